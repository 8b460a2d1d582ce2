-- lua/redisson/set_rate.lua: GENERATED from lua/parts/ (src/lua/compose.rs). Edit the parts, then run scripts/lua.

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

-- Sliding log: set the rate.
--   ARGV[2] rate, ARGV[3] interval (ms), ARGV[4] type (0 overall, 1 per client), ARGV[5] keep-alive (ms, 0 = none),
--   ARGV[6] how: 'try' (only if no rate is set: first set wins), 'set' (replace and clear the state, as Redisson's
--   setRate does) or 'update' (replace and keep the state: permits in use stay in use under the new rate).
-- Reply: 1 when the rate was written, 0 when 'try' found one already set.

local rate = whole(ARGV[2], 'rate', 1, 2 ^ 32 - 1)
local interval = whole(ARGV[3], 'interval (ms)', 1, 2 ^ 53)
local keep_alive = whole(ARGV[5], 'keep-alive (ms)', 0, 2 ^ 53)
local mode, how = ARGV[4], ARGV[6]
if mode ~= '0' and mode ~= '1' then
    reject('type (0 overall, 1 per client)', mode)
end
if how ~= 'try' and how ~= 'set' and how ~= 'update' then
    reject("mode (try, set or update)", how)
end
local previous = load_limiter()
if how == 'try' and previous then
    return 0
end

redis.call('HSET', KEYS[1], 'rate', rate, 'interval', interval, 'type', mode, 'keepAliveTime', keep_alive)
if keep_alive > 0 then
    redis.call('PEXPIRE', KEYS[1], keep_alive)
else
    redis.call('PERSIST', KEYS[1])
end

local limiter = load_limiter()
if how == 'update' and previous and previous.log_key == limiter.log_key then
    -- Keep the log; move the count of available permits by the change of rate, so the invariant
    -- value = rate - (permits in the log) holds under the new rate. It may go negative when the rate drops below
    -- what is in use: then nothing is granted until enough grants expire.
    if redis.call('EXISTS', limiter.value_key) == 1 then
        redis.call('INCRBY', limiter.value_key, limiter.rate - previous.rate)
    end
    touch(limiter, true)
else
    -- 'set', a first rate, or a change of mode (whose state lives under other keys): start from a full window.
    -- A mode change can only clear this client's per-client keys; other clients' expire with their TTL.
    redis.call('DEL', KEYS[2], KEYS[3], KEYS[4], KEYS[5])
end
return 1
