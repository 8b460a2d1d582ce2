-- Sliding log: give back up to ARGV[2] permits (a refund), newest grants first.
-- The permits leave the log, so available permits never exceed the rate and the next expiry cannot undo the release.
-- Reply: the family's decision shape, {status, limit, remaining, reset_ms, 0, released}, status 'refunded' or
-- 'not_configured'; the last field, which names what a grant took (its receipt), here is what was given back: a
-- number of permits, less than asked when the log held less. Releasing 0 is Redisson's no-op: the clients answer
-- it without calling Redis.

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
    local id, permits = grant_of(newest[1])
    redis.call('ZREM', limiter.log_key, newest[1])
    local give_back = math.min(permits, wanted - released)
    if give_back < permits then
        -- Keep the rest of a partly released grant, with its original time.
        log_grant(limiter, tonumber(newest[2]), id, permits - give_back)
    end
    released = released + give_back
end
local available = redis.call('INCRBY', limiter.value_key, released)
touch(limiter)
return { 'refunded', limiter.rate, math.max(available, 0), full_again_at(limiter, now), 0, released }
