-- The `reserve/gcra` script: permits reserved for one client to grant locally, with no round trip
-- (src/limit/reserved.rs), on the `gcra` script's state. The reserved permits take the next slots, each used
-- between its slot's end less the burst and its slot's start; the first slots start `lead` ms from now at the
-- earliest. Why that is exact: docs/design/reserve.md, "GCRA".
--
--   KEYS[1]  the state key (the one the `gcra` script decides on)
--   ARGV[1]  the request and its quota, as the `gcra` script's: '<permits>:<limit>:<interval ms>:<rate>'
--   ARGV[2]  '<block>:<lead ms>:<horizon ms>[:<pace ms>[:only]]' (lua/reserve/arguments.lua): the permits to
--            reserve besides the request's, the least time from now to a reserved permit's slot start, how far from
--            now they may start (a pace is read and not used); ':only' reserves without taking the request
--   ARGV[3]  unix ms, or '' (the default) for the Redis server's clock
--
-- Reply {granted, now, reserved, charged, remaining, reset, retry_after}: the request's permits granted (`granted`,
-- all or 0) as the `gcra` script decides them; `reserved` permits for the caller, the i-th (from 1) usable from
-- now + ceil((charged + i × interval − limit × interval) / rate) ms (or now) until now + floor((charged + (i − 1) ×
-- interval) / rate) ms (`charged`: where their slots start, in units after now; see lua/limits/bucket.lua);
-- then the standing after the call: permits left now, when the limit is whole again, and for a denied request the
-- ms until it fits. A request above the limit is an error (the client refuses it before sending).

check_call(2, 3)
local key, request, time = KEYS[1], ARGV[1], ARGV[3] or ''
--@request
check_within_limit(request, permits, limit)
local block, lead, horizon, _, only = block_of(ARGV[2], limit)
local now = clock(time)
local grace = time == '' and 0 or EXPLICIT_TIME_GRACE_MS

-- The request, decided by limits/gcra.lua's decision spliced here: it sets `debt` (units, limits/bucket.lua),
-- `full`, `floor` (the end of slots reserved before) and the verdict. Its refund branch never runs here.
local operation, mark = 'limit', nil
-- The other fields are for the `gcra` script's reply.
-- luacheck: push ignore remaining reset reset_after held
local allowed, retry_after, remaining, reset, reset_after, held
--@decision
-- luacheck: pop

-- A granted request's permits are used now, in the next slots (but for a call that reserves only).
local granted = allowed and not only and permits or 0
if granted > 0 then
    debt = full - left
end

-- The reserved permits: the next slots, from `lead` ms after now at the earliest, as many as asked that start
-- within the horizon (charged + i × interval − full ≤ horizon × rate, in units).
local charged = debt > lead * rate and debt or lead * rate
local fits = full + horizon * rate - charged
fits = fits > 0 and (fits - fits % interval) / interval or 0
local reserved = block < fits and block or fits
if reserved > 0 then
    debt = charged + reserved * interval
end
if debt > 0 and (granted > 0 or reserved > 0) then
    -- Reserved slots' end (TAT, rounded up to whole ms) is marked: no refund moves TAT back over them.
    if reserved > 0 then
        local slots_end = debt + rate - 1
        floor = math.max(floor, now + (slots_end - slots_end % rate) / rate)
    end
    --@inline limits/gcra_write.lua
end

-- The standing after the call.
available = full - debt
fill = debt + rate - 1
return { granted, now, reserved, charged, available > 0 and (available - available % interval) / interval or 0,
    now + (fill - fill % rate) / rate, retry_after }
