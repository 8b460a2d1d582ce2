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
