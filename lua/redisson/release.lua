-- lua/redisson/release.lua: GENERATED from lua/parts/ (src/lua/compose.rs). Edit the parts, then run scripts/lua.

-- Shared by every edgelimit script (prepended at compile time, see src/script.rs): argument checks and the clock.
--
-- A script's text runs from the top on every call, so every function defined here (and in the files after it) is a
-- new closure per call: keep them few. What costs most inside Redis is calling C (tonumber, string functions, every
-- redis.call) and allocating (tables, closures, new strings); plain Lua arithmetic is cheap. `bench/` measures it.

-- Rejects an argument no edgelimit client sends (a hand-made call): a clean Redis error reply naming the argument,
-- instead of a Lua runtime error with a stack trace.
local function reject(what, value)
    error({ err = 'ERR edgelimit: invalid ' .. what .. ': ' .. tostring(value) })
end

-- A whole number within [low, high] from an argument (nil, or text), or nil.
local function whole_number(text, low, high)
    local n = text and tonumber(text)
    if n and n % 1 == 0 and n >= low and n <= high then
        return n
    end
    return nil
end

-- A whole number within [low, high] from an argument, or a clean error.
local function whole(text, what, low, high)
    return whole_number(text, low, high) or reject(what, text)
end

-- Unix ms: `text` when a caller passed an explicit time (tests, clients sharing a limiter with a clock-based
-- client), else the Redis server's clock, the default, because callers' clocks are skewed.
local function clock(text)
    if text ~= '' then
        return whole(text, 'time (unix ms, or empty for server time)', 0, 2 ^ 53)
    end
    local time = redis.call('TIME')
    local micros = time[2] % 1000000
    return time[1] * 1000 + (micros - micros % 1000) / 1000
end

-- Redisson's layout, shared prelude: every script of lua/redisson/ starts with lua/parts/common.lua and this; those
-- that read the window follow with window.lua, those that take or give back permits with grants.lua too (see
-- src/lua/compose.rs).
--
-- Redisson RRateLimiter's layout, kept exactly so Java services using Redisson and edge Workers using edgelimit
-- can share one limiter:
--   KEYS[1]  `name`                    config hash {rate, interval (ms), type (0 overall, 1 per client), keepAliveTime}
--   KEYS[2]  `{name}:value`            permits available now (overall mode)
--   KEYS[3]  `{name}:value:<client>`   the same, per client
--   KEYS[4]  `{name}:permits`          log of grants: zset, score = grant time (ms),
--   KEYS[5]  `{name}:permits:<client>`   member = struct.pack('Bc0I', #id, id, permits)
-- All five share the hash tag `name`, so they live in one Redis Cluster slot.
--
-- ARGV[1] is the time in ms, or '' to use the Redis server's clock (the default: callers' clocks are skewed).
--
-- Invariant kept by every script: value = rate - (permits in the log). It is what makes a decision O(expired
-- grants) instead of O(log), and what keeps available permits from ever exceeding the rate.

if #KEYS ~= 5 then
    reject('number of keys (expected 5: name, value, client value, permits, client permits)', #KEYS)
end

-- The limiter's config and the keys of its mode, or nil when no rate was set (or it expired).
local function load_limiter()
    local config = redis.call('HMGET', KEYS[1], 'rate', 'interval', 'type', 'keepAliveTime')
    local rate, interval = tonumber(config[1]), tonumber(config[2])
    if not rate or not interval or not config[3] then
        return nil
    end
    local keep_alive = tonumber(config[4]) or 0
    -- State keys live at least one more interval past their last write, so no grant in the window is lost, or
    -- the keep-alive when it is longer.
    local limiter = { rate = rate, interval = interval, keep_alive = keep_alive,
                      state_ttl = math.max(keep_alive, 2 * interval) }
    if config[3] == '1' then
        limiter.value_key, limiter.log_key = KEYS[3], KEYS[5]
    else
        limiter.value_key, limiter.log_key = KEYS[2], KEYS[4]
    end
    return limiter
end

-- Idle limiters vanish. A call that logged a grant renews the state keys' TTL; every use, granted or not, renews
-- the config's keep-alive if one is set (Redisson's semantics). A call that logs nothing leaves the state's TTL as it
-- was: it is already long enough.
local function touch(limiter, logged)
    if logged then
        redis.call('PEXPIRE', limiter.value_key, limiter.state_ttl)
        redis.call('PEXPIRE', limiter.log_key, limiter.state_ttl)
    end
    if limiter.keep_alive > 0 then
        redis.call('PEXPIRE', KEYS[1], limiter.keep_alive)
    end
end

-- Redisson's layout, the window as it stands at `now`: after prelude.lua, for the scripts that read it (acquire,
-- available, release).

-- Total permits carried by log members.
local function permits_in(members)
    local total = 0
    for _, member in ipairs(members) do
        local _, permits = struct.unpack('Bc0I', member)
        total = total + permits
    end
    return total
end

-- Permits available at `now`, after dropping grants that left the window. A missing counter (first use, evicted) or
-- one above what the log allows is rebuilt from the log instead of failing (Redisson crashes on a nil here). An
-- evicted log under a surviving counter is not detected: capacity stays reduced (never exceeded) until the counter
-- expires; detecting it would cost a command on every decision.
local function refresh(limiter, now)
    local horizon = now - limiter.interval
    local value = tonumber(redis.call('GET', limiter.value_key))
    local expired = redis.call('ZRANGEBYSCORE', limiter.log_key, '-inf', horizon)
    if #expired > 0 then
        redis.call('ZREMRANGEBYSCORE', limiter.log_key, '-inf', horizon)
    end
    local released = permits_in(expired)
    if value == nil or value + released > limiter.rate then
        -- Rare: first use, an evicted key, or writes from an older client. O(log), once.
        value = limiter.rate - permits_in(redis.call('ZRANGE', limiter.log_key, 0, -1))
        redis.call('SET', limiter.value_key, value, 'PX', limiter.state_ttl)
    elseif released > 0 then
        value = value + released
        -- KEEPTTL: a plain SET would drop the key's TTL and leave it behind forever.
        redis.call('SET', limiter.value_key, value, 'KEEPTTL')
    end
    return value
end

-- When the window is full again: the newest grant's expiry, or now for an empty log.
local function full_again_at(limiter, now)
    local newest = redis.call('ZRANGE', limiter.log_key, -1, -1, 'WITHSCORES')
    if #newest == 0 then
        return now
    end
    return tonumber(newest[2]) + limiter.interval
end

-- Redisson's layout, taking and giving back permits: after window.lua, for acquire and release.

-- The limiter, and `text` as a number of permits; or, instead, the status reply to return (no rate, bad permits).
local function limiter_and_permits(text)
    local limiter = load_limiter()
    if not limiter then
        return nil, nil, { 'not_initialized', 0, 0, 0, 0 }
    end
    local permits = whole_number(text, 1, 2 ^ 32 - 1)
    if not permits then
        return nil, nil, { 'invalid_permits', limiter.rate, 0, 0, 0 }
    end
    return limiter, permits
end
-- Adds a grant to the log. Members are unique per (id, permits); NX with a suffix keeps two equal grants in the
-- same millisecond from collapsing into one (which would under-count).
local function log_grant(limiter, now, id, permits)
    local candidate, attempt = id, 0
    while redis.call('ZADD', limiter.log_key, 'NX', now, struct.pack('Bc0I', #candidate, candidate, permits)) == 0 do
        attempt = attempt + 1
        candidate = id .. '#' .. attempt
    end
end

-- Sliding log: give back up to ARGV[2] permits (a refund), newest grants first.
-- The permits leave the log, so available permits can never exceed the rate, and the next acquire cannot undo the
-- release (Redisson's release only bumped the counter, which the next expiry then corrected away).
-- Reply: {status, limit, remaining, reset_ms, released} with status 'released', 'not_initialized' or
-- 'invalid_permits'; `released` is what was given back (less than asked when the log held less).

local limiter, wanted, refusal = limiter_and_permits(ARGV[2])
if refusal then
    return refusal
end

local now = clock(ARGV[1])
refresh(limiter, now)
local released = 0
while released < wanted do
    local newest = redis.call('ZRANGE', limiter.log_key, -1, -1, 'WITHSCORES')
    if #newest == 0 then
        break
    end
    local id, permits = struct.unpack('Bc0I', newest[1])
    redis.call('ZREM', limiter.log_key, newest[1])
    local give_back = math.min(permits, wanted - released)
    if give_back < permits then
        -- Keep the rest of a partly released grant, with its original time.
        log_grant(limiter, tonumber(newest[2]), id, permits - give_back)
    end
    released = released + give_back
end
local available = redis.call('INCRBY', limiter.value_key, released)
touch(limiter, released > 0)
return { 'released', limiter.rate, math.max(available, 0), full_again_at(limiter, now), released }
