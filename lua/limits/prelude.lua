-- The algorithm family, shared prelude: after lua/common.lua, before the algorithms' files and driver.lua (see
-- src/limit/scripts.rs). Each algorithm file adds one entry to ALGORITHMS, three functions over a limit record
-- (below):
--   decide(limit, now)         the verdict on limit.permits at `now`, written into the record; reads only
--   commit(limit, now, grace)  records the grant decide judged (called only if every limit of the call allows)
--   refund(limit, now, grace)  gives limit.permits back; false when there was nothing to give (a lease not held)
-- and optionally `ids`, the pattern the limit's grant id must match per operation, and `leases = true` when a grant
-- hands its holder a lease token. driver.lua reads the arguments, asks every limit for a verdict, and commits all
-- of them or none.
--
-- The limit record (one table per limit, made by driver.lua, so a decision allocates little):
--   key, permits, limit, interval, rate, lease   the request, its quota, its grant id ('' if none)
--   allowed, retry_after                         the verdict: retry_after = ms until it could be allowed (0 if it is)
--   remaining, reset                             the standing without this request: permits left, and the unix ms
--                                                at which the limit is whole again if no request comes
--   reset_after                                  `reset` with the grant (remaining is then remaining - permits)
--   status, algorithm                            driver.lua's: a status if the limit cannot be decided, and its entry
-- and what commit needs, set by decide under names of the algorithm's own. The record is made with 16 slots; one
-- that outgrows them is copied into a bigger table (the sliding window's four fields make 17: one copy).
--
-- All arithmetic is on whole numbers below 2^53, where Lua's doubles are exact: quotas are checked so that
-- limit × interval stays below 2^52 (see driver.lua), and no product below grows past that.

local ALGORITHMS = {}

-- ceil(a / b) for whole a >= 0, b > 0 (exact below 2^53).
local function ceil_div(a, b)
    local n = a + b - 1
    return (n - n % b) / b
end

-- State of a request made at an explicit time lives this much longer than it matters: that caller's clock may run
-- behind Redis's, and state must not expire in Redis's time while it still counts in the caller's. Under server
-- time (the default) keys vanish exactly when they stop mattering.
local EXPLICIT_TIME_GRACE_MS = 60000

-- Token bucket and GCRA are one decision over "units": a permit is `interval` units, `rate` units come back per ms
-- (so refill is continuous and exact: no step quantisation, no rounding drift), and the limit holds
-- limit × interval units. `available` may be negative when the limit was lowered under existing state.
-- Sets the verdict, and limit.left: the units left after the grant.
local function bucket_verdict(limit, now, available)
    local interval, rate = limit.interval, limit.rate
    local full, left = limit.limit * interval, available - limit.permits * interval
    local remaining = available - available % interval
    limit.allowed = left >= 0
    limit.retry_after = left >= 0 and 0 or ceil_div(-left, rate)
    limit.remaining = remaining > 0 and remaining / interval or 0
    limit.reset = now + ceil_div(full - available, rate)
    limit.reset_after = now + ceil_div(full - left, rate)
    limit.left = left
end
