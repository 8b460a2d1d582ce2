-- Sliding log: change the lifetime of an existing limiter.
--   ARGV[2] what: 'keep_alive' (the keepAliveTime Redisson renews on every use; 0 = none) or 'expire' (Redisson's
--   RExpirable.expire: every key of the limiter vanishes at once after that long, unless a keep-alive renews it;
--   0 = never, Redisson's clearExpire);
--   ARGV[3] the time in ms.
-- Reply: 1 when the limiter exists, 0 when no rate is set (nothing is written).
-- Every key of the limiter gets the same lifetime, the config's and both state keys' of both modes (of this client),
-- so no key of the pair outlives the other.

local what = ARGV[2]
local ms = whole(ARGV[3], 'time (ms)', 0, 2 ^ 53)
if what ~= 'keep_alive' and what ~= 'expire' then
    reject('lifetime (keep_alive or expire)', what)
end
local limiter = load_limiter()
if not limiter then
    return 0
end
if what == 'keep_alive' then
    if ms > 0 and ms < limiter.interval then
        reject('keep-alive (at least the interval, ' .. limiter.interval .. ' ms)', ms)
    end
    redis.call('HSET', KEYS[1], 'keepAliveTime', ms)
end
for i = 1, 5 do
    if ms > 0 then
        redis.call('PEXPIRE', KEYS[i], ms)
    else
        redis.call('PERSIST', KEYS[i])
    end
end
return 1
