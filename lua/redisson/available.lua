-- Sliding log: permits available now, without taking any.
-- Reply: the family's decision shape, {status, limit, remaining, reset_ms, 0, ''}, status 'allowed' (what a peek
-- of the family answers) or 'not_configured'.

local limiter = load_limiter()
if not limiter then
    return { 'not_configured', 0, 0, 0, 0, '' }
end
local now = clock(ARGV[1])
local available = refresh(limiter, now)
touch(limiter)
return { 'allowed', limiter.rate, math.max(available, 0), full_again_at(limiter, now), 0, '' }
