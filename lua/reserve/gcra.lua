-- Permits of a GCRA limit reserved for one client to grant locally, with no round trip (src/limit/reserved.rs):
-- 0-RTT decisions for an identifier a client sees often, exact by construction. The script shares its state with
-- lua/gcra.lua's decisions on the same key (see lua/limits/gcra.lua: 'gcra:<ms>:<rem>', the theoretical
-- arrival time TAT = ms + rem / rate), so reserved and plain decisions mix.
--
-- Why it is exact. GCRA gives each grant a slot of T = interval / rate ms, one after another from TAT, and admits a
-- grant at time v only if its slot ends by v + limit × T. Slots do not overlap and each lies within
-- [v, v + limit × T], so a window [a, b] holds at most (b − a + limit × T) / T = limit + (b − a) / T grants. A
-- reserved permit is used at a time the server does not see: it is exact as well if that time is within
-- [slot end − limit × T, slot start]. Then its slot lies within [v, v + limit × T] whatever v is. So the reserved
-- permits take the next slots, and the client may use the i-th from its slot's end less the burst (on the pace the
-- limit refills at when the bucket is empty; at once when it has room) until its slot's start: when the bucket is
-- busy, a window of the burst less one slot.
--
-- So that the first permits have time to be used (a round trip, at least), their slots start `lead` ms from now
-- at the earliest. While the bucket is not that busy (TAT before now + lead), that skips the refill between TAT
-- and now + lead: the price of a reservation on an idle bucket. (Slots taken from TAT there would give the first
-- permits no time at all; using them after their slot's start would over-admit.)
--
--   KEYS[1]  the state key (the one lua/gcra.lua decides on)
--   ARGV[1]  the request and its quota, as lua/gcra.lua's: '<permits>:<limit>:<interval ms>:<rate>'
--   ARGV[2]  '<block>:<lead ms>:<horizon ms>[:<pace ms>[:only]]' (lua/reserve/arguments.lua): the permits to
--            reserve besides the request's, the least time from now to a reserved permit's slot start, how far from
--            now they may start (a pace is read and not used); ':only' reserves without taking the request
--   ARGV[3]  unix ms, or '' (the default) for the Redis server's clock
--
-- Reply {granted, now, reserved, charged, remaining, reset, retry_after}: the request's permits granted (`granted`,
-- all or 0) as lua/gcra.lua decides them; `reserved` permits for the caller, the i-th (from 1) usable from
-- now + ceil((charged + i × interval − limit × interval) / rate) ms (or now) until now + floor((charged + (i − 1) ×
-- interval) / rate) ms (`charged`: where their slots start, in units after now; see lua/limits/bucket.lua);
-- then the standing after the call: permits left now, when the limit is whole again, and for a denied request the
-- ms until it fits. A request above the limit is an error (the client refuses it before sending).

check_call(2, 3)
local key, request, time = KEYS[1], ARGV[1], ARGV[3] or ''
--@request
check_within_limit(request, permits, limit)
local block, lead, horizon, _, only = block_of(ARGV[2], limit)
-- The clock as every script reads it (lua/common.lua); state written at an explicit time lives a grace longer.
local now = clock(time)
local grace = time == '' and 0 or EXPLICIT_TIME_GRACE_MS

-- The request, decided by lua/gcra.lua's own decision (spliced here from lua/limits/gcra.lua, so the two
-- read the state and judge a request alike): the debt at `now` in units (see lua/limits/bucket.lua: a permit
-- is `interval` units, `rate` come back per ms, the limit holds limit × interval, `full`), the end of slots reserved
-- before (`floor`), and the verdict. Its refund branch never runs here.
local operation, mark = 'limit', nil
-- (The verdict's other fields are for lua/gcra.lua's reply: luacheck need not say this script reads none.)
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
    -- With reserved permits, their slots' end (TAT, rounded up to whole ms) is marked, so that no refund moves TAT
    -- back over them.
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
