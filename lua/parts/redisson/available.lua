-- Sliding log: permits available now, without taking any.
-- Reply: {status, limit, remaining, reset_ms, retry_after_ms} with status 'available' or 'not_initialized';
-- retry_after_ms is 0.

local limiter = load_limiter()
if not limiter then
    return { 'not_initialized', 0, 0, 0, 0 }
end
local now = clock(ARGV[1])
local available = refresh(limiter, now)
touch(limiter)
return { 'available', limiter.rate, math.max(available, 0), full_again_at(limiter, now), 0 }
