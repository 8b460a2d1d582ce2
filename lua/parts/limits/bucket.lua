-- Helpers shared by token bucket and GCRA: after prelude.lua, before those algorithms' files (see
-- src/lua/compose.rs).

-- ceil(a / b) for whole a >= 0, b > 0 (exact below 2^53).
local function ceil_div(a, b)
    local n = a + b - 1
    return (n - n % b) / b
end

-- Token bucket and GCRA are one decision over "units": a permit is `interval` units, `rate` units come back per ms
-- (so refill is continuous and exact: no step quantisation, no rounding drift), and the limit holds
-- limit × interval units. `available` may be negative when the limit was lowered under existing state.
-- Returns the verdict (allowed, retry_after, remaining, reset, reset_after) and the units left after the grant.
local function bucket_verdict(permits, limit, interval, rate, now, available)
    local full, left = limit * interval, available - permits * interval
    local remaining = available - available % interval
    return left >= 0, left >= 0 and 0 or ceil_div(-left, rate), remaining > 0 and remaining / interval or 0,
        now + ceil_div(full - available, rate), now + ceil_div(full - left, rate), left
end
