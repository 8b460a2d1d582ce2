-- Sliding log: try to take ARGV[2] permits now.
--   ARGV[2] permits, ARGV[3] grant id (unique per request; any bytes, at most 200)
-- Reply: the family's decision shape (lua/limits/driver.lua), {status, limit, remaining, reset_ms,
-- retry_after_ms, ''}, status 'granted' | 'denied' | 'not_configured' | 'exceeds_limit'. A grant has no receipt (the
-- last field): Redisson's layout gives permits back by count (release.lua), not by grant.
-- A denied request writes nothing but expiry housekeeping: it consumes no permits.

local limiter, permits, refusal = limiter_and_permits(ARGV[2])
if refusal then
    return refusal
end
if permits > limiter.rate then
    return { 'exceeds_limit', limiter.rate, 0, 0, 0, '' }
end

local id = ARGV[3] or ''
if #id > 200 then
    reject('grant id (at most 200 bytes)', #id .. ' bytes')
end

local now = clock(ARGV[1])
local available = refresh(limiter, now)
local status, retry_after = 'granted', 0
if available >= permits then
    log_grant(limiter, now, id, permits)
    available = redis.call('DECRBY', limiter.value_key, permits)
else
    -- Exact wait: the oldest grants must free what this request lacks, each at score + interval. Every grant but
    -- a tryAcquire(0)'s holds a permit, so the oldest `missing` grants suffice: one bounded read.
    status = 'denied'
    local missing = permits - available
    local oldest = redis.call('ZRANGE', limiter.log_key, 0, missing - 1, 'WITHSCORES')
    for i = 1, #oldest, 2 do
        local _, granted = grant_of(oldest[i])
        missing = missing - granted
        if missing <= 0 then
            retry_after = tonumber(oldest[i + 1]) + limiter.interval - now
            break
        end
    end
    -- The invariant says the log frees enough; should it not (grants of 0), a full interval is safe.
    if missing > 0 then
        retry_after = limiter.interval
    end
end
touch(limiter)
return { status, limiter.rate, math.max(available, 0), full_again_at(limiter, now), retry_after, '' }
