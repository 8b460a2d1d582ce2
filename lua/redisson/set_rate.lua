-- lua/redisson/set_rate.lua: GENERATED from lua/parts/ (src/lua/compose.rs). Edit the parts, then run scripts/lua.

-- Shared by every edgelimit script (prepended at compile time, see src/script.rs): argument checks and the clock.
--
-- A script's text runs from the top on every call, so every function defined here (and in the files after it) is a
-- new closure per call: keep them few. What costs most inside Redis is calling C (tonumber, string functions, every
-- redis.call) and allocating (tables, closures, new strings); plain Lua arithmetic is cheap. `bench/` measures it.

-- Rejects an argument no edgelimit client sends (a hand-made call): a clean Redis error reply naming the argument,
-- instead of a Lua runtime error with a stack trace. The value is quoted up to 100 bytes, as the single-limit
-- scripts quote theirs: an argument may be a megabyte.
local function reject(what, value)
    error({ err = 'ERR edgelimit: invalid ' .. what .. ': ' .. string.sub(tostring(value), 1, 100) })
end

-- A whole number within [low, high] from an argument (nil, or text): decimal digits only (tonumber alone would take
-- '0x1A', ' 12', '1e12'), or nil.
local function whole_number(text, low, high)
    local n = text and string.find(text, '^%d+$') and text + 0
    if n and n >= low and n <= high then
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
-- that read or rewrite the log follow with log.lua, those that read the window with window.lua, those that take or
-- give back permits with grants.lua too (see src/lua/compose.rs).
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
-- Invariant kept by every script: value = rate - (permits in the log), with value never negative (Redisson reads it
-- as is). It is what makes a decision O(expired grants) instead of O(log), and what keeps available permits from
-- ever exceeding the rate. window.lua repairs what a Redisson client may leave otherwise.
--
-- Lifetimes are Redisson's, exactly (see touch()): a Java client and edgelimit must agree on when keys vanish, or
-- one side forgets grants the other still counts.

if #KEYS ~= 5 then
    reject('number of keys (expected 5: name, value, client value, permits, client permits)', #KEYS)
end
-- The other four keys are the name's, spelt as Redisson spells them, one client's id in both client keys. With any
-- other key in their place (an empty log in the same slot), a call would rebuild the counter from a log that is not
-- the limiter's: a full rate again (review: 17 grants in 60 s on a rate of 5, by a holder of a limiter token).
local client = string.sub(KEYS[3], #KEYS[1] + 10)
if KEYS[2] ~= '{' .. KEYS[1] .. '}:value' or KEYS[3] ~= KEYS[2] .. ':' .. client
    or KEYS[4] ~= '{' .. KEYS[1] .. '}:permits' or KEYS[5] ~= KEYS[4] .. ':' .. client then
    reject('keys (expected name, {name}:value, {name}:value:<client>, {name}:permits, {name}:permits:<client>)',
        table.concat(KEYS, ' '))
end

-- The limiter's config and the keys of its mode, or nil when no rate was set (or it expired).
local function load_limiter()
    local config = redis.call('HMGET', KEYS[1], 'rate', 'interval', 'type', 'keepAliveTime')
    local rate, interval = tonumber(config[1]), tonumber(config[2])
    if not rate or not interval or not config[3] then
        return nil
    end
    -- A config no Redisson client writes (a rate or an interval that is not a whole number of at least 1: 0, -1000,
    -- 1.5, nan, inf) would let every grant expire at once, or decide on numbers of no meaning: refused as state
    -- edgelimit did not write (the caller's EDGELIMIT_FOREIGN_STATE), never decided on.
    if not (rate >= 1 and interval >= 1 and rate % 1 == 0 and interval % 1 == 0) then
        error({ err = 'WRONGTYPE edgelimit: the rate limiter\'s config holds rate ' .. tostring(config[1])
            .. ' and interval ' .. tostring(config[2]) .. ', not whole numbers of at least 1' })
    end
    local limiter = { rate = rate, interval = interval, keep_alive = tonumber(config[4]) or 0 }
    if config[3] == '1' then
        limiter.value_key, limiter.log_key = KEYS[3], KEYS[5]
    else
        limiter.value_key, limiter.log_key = KEYS[2], KEYS[4]
    end
    return limiter
end

-- The lifetimes Redisson gives the keys after every use, so that both sides' keys vanish together:
--   - with a keep-alive, the config and both state keys live that long past the last use (at least one interval:
--     no grant in the window is forgotten);
--   - without, the state keys live as long as the config: forever, unless the config was given an expiry
--     (Redisson's expire(), edgelimit's RateLimiter::expire), when they vanish with it.
-- No other expiry is safe while a Redisson client may write: Redisson never renews a TTL it did not set, and its
-- plain SET drops one, so an edgelimit-only TTL on one key of the pair would outlive or cut short the other.
local function touch(limiter)
    if limiter.keep_alive > 0 then
        redis.call('PEXPIRE', KEYS[1], limiter.keep_alive)
        redis.call('PEXPIRE', limiter.value_key, limiter.keep_alive)
        redis.call('PEXPIRE', limiter.log_key, limiter.keep_alive)
    else
        local ttl = redis.call('PTTL', KEYS[1])
        if ttl > 0 then
            redis.call('PEXPIRE', limiter.value_key, ttl)
            redis.call('PEXPIRE', limiter.log_key, ttl)
        end
    end
end

-- Redisson's layout, the log of grants: after prelude.lua, for every script that reads or rewrites the log.

-- A log member's grant id and permits, as log_grant() and Redisson write them: struct.pack('Bc0I', #id, id,
-- permits). Redisson logs a grant of 0 permits too (its tryAcquire(0) succeeds), which counts nothing. A member of
-- any other shape (written by hand, or damaged) is refused as state no Redisson client wrote, the caller's
-- EDGELIMIT_FOREIGN_STATE, before the call changes anything it read it for.
local function grant_of(member)
    local length = string.byte(member, 1)
    local id, permits
    if length and #member == length + 5 then
        id, permits = struct.unpack('Bc0I', member)
    end
    if not permits then
        error({ err = 'WRONGTYPE edgelimit: the rate limiter\'s log holds a member that is no grant (' .. #member
            .. ' bytes): a grant is struct.pack(\'Bc0I\', #id, id, permits)' })
    end
    return id, permits
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

-- The counter rebuilt from the log (the log must hold only grants still in the window): rate - permits logged. When
-- the log holds more than the rate (the rate was lowered below what is in use), the oldest permits beyond the rate
-- leave the log and the counter is 0, never negative (Redisson reads it as is): while any of those permits would
-- still be in the window, the rest alone fill the rate, so nothing is granted either way, and once they would have
-- expired the log is what it would have been. Returns the counter, and what left the log as 'score:permits' texts
-- (set_rate.lua keeps them, so that raising the rate again still counts them). O(log), for the rare cases that
-- need it.
local function rebuild(limiter)
    local members = redis.call('ZRANGE', limiter.log_key, 0, -1, 'WITHSCORES')
    local used = 0
    for i = 1, #members, 2 do
        local _, permits = grant_of(members[i])
        used = used + permits
    end
    local excess, trimmed, i = used - limiter.rate, {}, 1
    while excess > 0 do
        local id, permits = grant_of(members[i])
        redis.call('ZREM', limiter.log_key, members[i])
        local cut = math.min(permits, excess)
        if cut < permits then
            log_grant(limiter, tonumber(members[i + 1]), id, permits - cut)
        end
        trimmed[#trimmed + 1] = members[i + 1] .. ':' .. cut
        excess = excess - cut
        i = i + 2
    end
    local value = math.max(limiter.rate - used, 0)
    -- KEEPTTL: the counter keeps whatever lifetime it had (touch() sets it as Redisson would).
    redis.call('SET', limiter.value_key, value, 'KEEPTTL')
    return value, trimmed
end

-- Sliding log: set the rate.
--   ARGV[2] rate, ARGV[3] interval (ms), ARGV[4] type (0 overall, 1 per client), ARGV[5] keep-alive (ms, 0 = none),
--   ARGV[6] how: 'try' (only if no rate is set: first set wins), 'set' (replace and clear the state, as Redisson's
--   setRate does) or 'update' (only if a rate is set: replace it and keep the state, as Redisson 4's
--   updateRate(args.keepState(true)): permits in use stay in use under the new rate).
-- Reply: 1 when the rate was written, 0 when 'try' found one already set or 'update' found none (and wrote
-- nothing).
--
-- A keep-alive of 0 leaves the config's lifetime as it was (RateLimiter::expire changes it), as Redisson does, but for
-- one given by the keep-alive it replaces, which goes with it (see below).

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
if how == 'update' and redis.call('EXISTS', KEYS[1]) == 0 then
    return 0
end

redis.call('HSET', KEYS[1], 'rate', rate, 'interval', interval, 'type', mode, 'keepAliveTime', keep_alive)
if keep_alive > 0 then
    redis.call('PEXPIRE', KEYS[1], keep_alive)
elseif previous and previous.keep_alive > 0 then
    -- The keep-alive is dropped, and so is the lifetime it gave the keys, which may be shorter than the new interval
    -- (Redisson keeps it): updateRate(2, 30 s) after a keep-alive of 1 s let the config and the grants in the window
    -- vanish after an idle second, and a start-up trySetRate then began from a full window: 4 grants in 2 s.
    redis.call('PERSIST', KEYS[1])
    redis.call('PERSIST', previous.value_key)
    redis.call('PERSIST', previous.log_key)
end

local limiter = load_limiter()
-- Permits a lowered rate held back from the log (see rebuild()), per log, in a config field Redisson ignores: as
-- 'score:permits' texts joined by ',' ('' for none: the scripts call only the commands the bridge's limiter user is
-- granted, cli/src/bridge/profile.rs, which has no HDEL).
local held_field = 'edgelimitHeld:' .. limiter.log_key
if how == 'update' and previous and previous.log_key == limiter.log_key then
    -- Keep the state: permits in use stay in use under the new rate. Drop what left the window under the new
    -- interval, put back what an earlier lowering held back and is still in the window, then count under the new
    -- rate: lowering it below what is in use holds back the oldest permits beyond it again.
    local horizon = clock(ARGV[1]) - limiter.interval
    redis.call('ZREMRANGEBYSCORE', limiter.log_key, '-inf', horizon)
    local held = redis.call('HMGET', KEYS[1], held_field)[1] or ''
    for score, permits in string.gmatch(held, '(%d+):(%d+)') do
        if tonumber(score) > horizon then
            log_grant(limiter, tonumber(score), 'held', tonumber(permits))
        end
    end
    local _, trimmed = rebuild(limiter)
    if #trimmed > 0 or held ~= '' then
        redis.call('HSET', KEYS[1], held_field, table.concat(trimmed, ','))
    end
    touch(limiter)
else
    -- 'set', a first rate, or a change of mode (whose state lives under other keys): start from a full window.
    -- A mode change can only clear this client's per-client keys; other clients' keep theirs, as with Redisson.
    redis.call('DEL', KEYS[2], KEYS[3], KEYS[4], KEYS[5])
    for _, log_key in ipairs({ KEYS[4], KEYS[5] }) do
        if redis.call('HMGET', KEYS[1], 'edgelimitHeld:' .. log_key)[1] then
            redis.call('HSET', KEYS[1], 'edgelimitHeld:' .. log_key, '')
        end
    end
end
return 1
