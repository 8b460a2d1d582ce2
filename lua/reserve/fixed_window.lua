-- The `reserve/fixed_window` script: permits reserved for one client to grant locally, with no round trip
-- (src/limit/reserved.rs), on the `fixed_window` script's state. They count in the current window and are used
-- before it ends, so no window counts more than the limit; unused ones are lost (docs/design/reserve.md).
--
--   KEYS[1]  the state key (the one the `fixed_window` script decides on)
--   ARGV[1]  the request and its quota, as the `fixed_window` script's: '<permits>:<limit>:<interval ms>'
--   ARGV[2]  '<block>:<lead ms>:<horizon ms>[:<pace ms>[:only]]' (lua/reserve/arguments.lua): the permits to
--            reserve besides the request's, the least time from now they must be usable for, how far from now they
--            may be used (a pace is read and not used); ':only' reserves without taking the request
--   ARGV[3]  unix ms, or '' (the default) for the Redis server's clock
--
-- Reply {granted, now, reserved, usable, remaining, reset, retry_after}: the request's permits granted (`granted`,
-- all or 0) as the `fixed_window` script decides them; `reserved` permits for the caller, each usable from now until
-- now + `usable` ms, both included (the window's last ms, or the horizon); then the standing after the call:
-- permits left in the window, when the limit is whole again, and for a denied request the ms until it fits.

check_call(2, 3)
local key, request, time = KEYS[1], ARGV[1], ARGV[3] or ''
--@request
check_within_limit(request, permits, limit)
local block, lead, horizon, _, only = block_of(ARGV[2], limit)
local now = clock(time)
local grace = time == '' and 0 or EXPLICIT_TIME_GRACE_MS

-- The request, decided by limits/fixed_window.lua's decision spliced here: it sets `window`, `window_end`, `count`
-- and the verdict. Its refund branch never runs here.
local operation, mark = 'limit', nil
-- The other fields and `stored` are for the `fixed_window` script's reply and grant.
-- luacheck: push ignore remaining reset reset_after held stored
local allowed, retry_after, remaining, reset, reset_after, held
--@decision
-- luacheck: pop

-- (A call that reserves only takes nothing for the request.)
local granted = allowed and not only and permits or 0
count = count + granted

-- The reserved permits: what is asked and left, if the window leaves the client `lead` ms. Its last ms is
-- window_end - 1: a permit used at window_end would count in the next window.
local usable = math.min(window_end - 1 - now, horizon)
local left = limit - count
local reserved = usable >= lead and left > 0 and math.min(block, left) or 0
count = count + reserved
if granted + reserved > 0 then
    redis.call('SET', key, string.format('fw:%d:%d', window, count), 'PX', window_end - now + grace)
end

-- The count may exceed a limit lowered since: nothing is left then.
return { granted, now, reserved, usable, math.max(limit - count, 0), count > 0 and window_end or now, retry_after }
