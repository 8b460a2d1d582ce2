-- The algorithm family, shared prelude: after lua/common.lua, before the algorithms' files and driver.lua (see
-- src/limit/scripts.rs). Each algorithm file adds one entry to ALGORITHMS: decide(quota, key, now, permits, id)
-- returns a verdict, refund(quota, key, now, permits, grace, token) gives permits back, and `ids` (optional) maps an
-- operation to the pattern its sixth argument must match. driver.lua reads the arguments, asks every limit for a
-- verdict, and commits all of them or none.
--
-- All arithmetic is on whole numbers below 2^53, where Lua's doubles are exact: quotas are checked so that
-- limit × interval stays below 2^52 (see quota_of in driver.lua), and no product below grows past that.

local ALGORITHMS = {}

-- ceil(a / b) for whole a >= 0, b > 0 (exact below 2^53).
local function ceil_div(a, b)
    return math.floor((a + b - 1) / b)
end

-- State of a request made at an explicit time lives this much longer than it matters: that caller's clock may run
-- behind Redis's, and state must not expire in Redis's time while it still counts in the caller's. Under server
-- time (the default) keys vanish exactly when they stop mattering.
local EXPLICIT_TIME_GRACE_MS = 60000

-- A verdict: what a limit would answer to `permits` at `now`, and how to record it if every limit agrees.
--   allowed      boolean
--   retry_after  ms until this request could be allowed (0 when it is)
--   now, after   the limit's standing without this request and with it (after = now when not allowed), each
--                {remaining = permits left, reset = unix ms when the limit is whole again if no request comes}
--   commit       function(grace) that records the grant
--   lease        (concurrency) the lease token the grant would hold
local function verdict_of(allowed, retry_after, standing_now, standing_after)
    return { allowed = allowed, retry_after = retry_after, now = standing_now,
             after = allowed and standing_after or standing_now }
end

-- Token bucket and GCRA are one decision over "units": a permit is `interval` units, `rate` units come back per ms
-- (so refill is continuous and exact: no step quantisation, no rounding drift), and the limit holds
-- limit × interval units. `available` may be negative when the limit was lowered under existing state.
-- The verdict's `left` is the units left after the grant.
local function bucket_verdict(quota, now, available, permits)
    local full, need = quota.limit * quota.interval, permits * quota.interval
    local function standing(units)
        return { remaining = math.max(0, math.floor(units / quota.interval)),
                 reset = now + ceil_div(full - units, quota.rate) }
    end
    local allowed = available >= need
    local verdict = verdict_of(allowed, allowed and 0 or ceil_div(need - available, quota.rate),
        standing(available), standing(available - need))
    verdict.left = available - need
    return verdict
end
