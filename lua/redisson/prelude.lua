-- The `redisson/*` scripts' prelude, after common.lua (then log.lua, window.lua, grants.lua as needed). Redisson
-- RRateLimiter's layout, kept exactly so Java services and edgelimit can share one limiter:
--   KEYS[1]  `name`                    config hash {rate, interval (ms), type (0 overall, 1 per client), keepAliveTime}
--   KEYS[2]  `{name}:value`            permits available now (overall mode)
--   KEYS[3]  `{name}:value:<client>`   the same, per client
--   KEYS[4]  `{name}:permits`          log of grants: zset, score = grant time (ms),
--   KEYS[5]  `{name}:permits:<client>`   member = struct.pack('Bc0I', #id, id, permits)
-- All five share the hash tag `name`, so they live in one Redis Cluster slot.
--
-- ARGV[1] is the time in ms, or '' for the Redis server's clock (the default).
--
-- Invariant: value = rate - (permits in the log), never negative (Redisson reads it as is). It makes a decision
-- O(expired grants) and keeps available permits within the rate; window.lua repairs what a Redisson client leaves.
-- Lifetimes are Redisson's exactly (touch()): otherwise one side forgets grants the other still counts.

if #KEYS ~= 5 then
    reject('number of keys (expected 5: name, value, client value, permits, client permits)', #KEYS)
end
-- The other four keys must be the name's, spelt as Redisson spells them, one client's id in both client keys: a
-- counter rebuilt from another log (an empty one in the same slot) would grant the full rate again.
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
    -- A rate or interval that is not a whole number of at least 1 (0, 1.5, nan, inf) was written by no Redisson
    -- client and would decide on meaningless numbers: refused as foreign state (EDGELIMIT_FOREIGN_STATE).
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

-- The lifetimes Redisson gives the keys after every use: with a keep-alive, all live that long past the last use
-- (at least one interval); without, the state keys live as long as the config (Redisson's and edgelimit's
-- expire). No other expiry is safe: Redisson never renews a TTL it did not set, and its SET drops one.
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
