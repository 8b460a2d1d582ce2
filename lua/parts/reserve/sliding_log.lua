-- Permits of a sliding-log limit reserved for one client to grant locally, with no round trip
-- (src/limit/reserved.rs). The script shares its state with lua/sliding_log.lua's decisions on the same key (the
-- log of grants, lua/parts/limits/zset_member.lua), so reserved and plain decisions mix.
--
-- Why it is exact. The reserved permits are logged as one grant that frees one interval after the last moment the
-- client may use them: reserved at r and usable until r + horizon, they free at r + horizon + interval. Take any
-- span (t − interval, t] and the grants used in it, plain or reserved, and the latest moment e ≤ t at which Redis
-- decided one of them (granted it, or reserved it). At e each of them was in the log: a plain grant at g > t −
-- interval frees at g + interval > t ≥ e, a reserved one used at u ≤ r + horizon frees at r + horizon + interval ≥
-- u + interval > t. So the decision at e saw them all, and allowed them only within the limit. What a client does
-- not use is held until it frees: under-admission, never over.
--
--   KEYS[1]  the state key (the one lua/sliding_log.lua decides on)
--   ARGV[1]  the request and its quota, as lua/sliding_log.lua's: '<permits>:<limit>:<interval ms>'
--   ARGV[2]  '<block>:<lead ms>:<horizon ms>' (lua/parts/reserve/arguments.lua): the permits to reserve besides the
--            request's, the least time from now they must be usable for, how far from now they may be used
--   ARGV[3]  a fresh grant id (letters, digits, _ or -), as lua/sliding_log.lua's: the request's grant and the
--            reserved permits are logged under it
--   ARGV[4]  unix ms, or '' (the default) for the Redis server's clock
--
-- Reply {granted, now, reserved, usable, remaining, reset, retry_after}: the request's permits granted (`granted`,
-- all or 0) as lua/sliding_log.lua decides them; `reserved` permits for the caller, each usable from now until
-- now + `usable` ms, both included (`usable` is the horizon); then the standing after the call: permits left now,
-- when the log frees its last grant, and for a denied request the ms until it fits.

check_call(3, 4)
local key, id, time = KEYS[1], ARGV[3], ARGV[4] or ''
local permits, limit, interval = request_of(ARGV[1], false)
local block, _, horizon = block_of(ARGV[2], limit)
local now = clock(time)
local grace = time == '' and 0 or EXPLICIT_TIME_GRACE_MS

-- The request, decided and logged as lua/sliding_log.lua does (log_decision checks the grant id).
local _, _, allowed, retry_after, remaining, reset, reset_after, held, first_position, last_run =
    log_decision('limit', key, permits, limit, interval, id, nil, now)
local granted = 0
if allowed then
    granted = permits
    log_grant(key, permits, interval, id, now, grace, reset_after, held, first_position, last_run, reset)
    remaining = remaining - permits
    reset = reset_after
end

-- The reserved permits: what is asked and left after a granted request, as one grant freeing `horizon` ms later
-- than a plain one (the horizon is at least the lead, so each reservation leaves the client that long). None after a
-- denial, whose retry_after would then no longer hold. The log's standing is read again after the request's grant
-- (this path is rare: a client reserves when its permits run out).
local reserved = allowed and math.min(block, remaining) or 0
if reserved > 0 then
    _, _, _, reset, reset_after, held, first_position, last_run = log_verdict(key, reserved, limit, interval, now)
    reset_after = math.max(reset_after, now + interval + horizon)
    log_grant(key, reserved, interval + horizon, id, now, grace, reset_after, held, first_position, last_run, reset)
    remaining, reset = remaining - reserved, reset_after
end

return { granted, now, reserved, horizon, remaining, reset, retry_after }
