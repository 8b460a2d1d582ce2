-- Sliding log: set the rate.
--   ARGV[2] rate, ARGV[3] interval (ms), ARGV[4] type (0 overall, 1 per client), ARGV[5] keep-alive (ms, 0 = none),
--   ARGV[6] how: 'try' (only if no rate is set: first set wins), 'set' (replace and clear the state, as Redisson's
--   setRate does) or 'update' (only if a rate is set: replace it and keep the state, as Redisson 4's
--   updateRate(args.keepState(true)): permits in use stay in use under the new rate).
-- Reply: 1 when the rate was written, 0 when 'try' found one already set or 'update' found none (and wrote
-- nothing).
--
-- A keep-alive of 0 leaves the config's lifetime as it was (the handle's expire changes it), as Redisson does, but
-- for one given by the keep-alive it replaces, which goes with it (see below).

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
    -- The keep-alive is dropped, and so is the lifetime it gave the keys (Redisson keeps it): it may be shorter than
    -- the new interval, and grants still in the window would vanish with the config.
    redis.call('PERSIST', KEYS[1])
    redis.call('PERSIST', previous.value_key)
    redis.call('PERSIST', previous.log_key)
end

local limiter = load_limiter()
-- Permits a lowered rate held back from the log (rebuild()), per log, in a config field Redisson ignores:
-- 'score:permits' joined by ',', '' for none (no HDEL: the bridge's limiter user lacks it, cli/src/bridge/profile.rs).
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
