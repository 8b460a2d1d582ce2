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
