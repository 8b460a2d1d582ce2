-- Permits of a GCRA limit reserved for one client to grant locally, with no round trip (src/limit/reserved.rs):
-- 0-RTT decisions for an identifier a client sees often, exact by construction. The script shares its state with
-- lua/gcra.lua's decisions on the same key (see lua/parts/limits/gcra.lua: 'gcra:<ms>:<rem>', the theoretical
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
--   ARGV[2]  '<block>:<lead ms>:<horizon ms>' (lua/parts/reserve/arguments.lua): the permits to reserve besides the
--            request's, the least time from now to a reserved permit's slot start, how far from now they may start
--   ARGV[3]  unix ms, or '' (the default) for the Redis server's clock
--
-- Reply {granted, now, reserved, charged, remaining, reset, retry_after}: the request's permits granted (`granted`,
-- all or 0) as lua/gcra.lua decides them; `reserved` permits for the caller, the i-th (from 1) usable from
-- now + ceil((charged + i × interval − limit × interval) / rate) ms (or now) until now + floor((charged + (i − 1) ×
-- interval) / rate) ms (`charged`: where their slots start, in units after now; see lua/parts/limits/bucket.lua);
-- then the standing after the call: permits left now, when the limit is whole again, and for a denied request the
-- ms until it fits. A request above the limit is an error (the client refuses it before sending).

check_call(2, 3)
local key, request, time = KEYS[1], ARGV[1], ARGV[3] or ''
--@request
check_within_limit(request, permits, limit)
local block, lead, horizon = block_of(ARGV[2], limit)
-- The clock as every script reads it (lua/parts/common.lua); state written at an explicit time lives a grace longer.
local now = clock(time)
local grace = time == '' and 0 or EXPLICIT_TIME_GRACE_MS

-- The debt at `now` in units (see lua/parts/limits/bucket.lua: a permit is `interval` units, `rate` come back per
-- ms, the limit holds limit × interval): (TAT − now) × rate, never negative; read as lua/gcra.lua reads it, with
-- the end of slots reserved before, `floor` (see there: marked in `rem`).
local debt, floor = 0, 0
local ms, rem = string.match(redis.call('GET', key) or '', '^gcra:(%d+):(%d+)$')
local FLOOR_MARK = (2 ^ 32 - 2 ^ 32 % rate) / rate + 1
ms = ms and ms + 0
if ms and ms >= now then
    rem = rem + 0
    if rem < 2 ^ 32 then
        debt = (ms - now) * rate + (rem < rate and rem or rate - 1)
    else
        local part = rem % rate
        debt = (ms - now) * rate + part
        floor = ms + 1 + FLOOR_MARK - (rem - part) / rate
    end
end
local full = limit * interval

-- The request, decided as lua/gcra.lua decides it; its permits are used now, in the next slots.
local granted = debt + permits * interval <= full and permits or 0
local retry_after = 0
if granted > 0 then
    debt = debt + permits * interval
else
    local short = debt + permits * interval - full + rate - 1
    retry_after = (short - short % rate) / rate
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
    -- TAT = now + debt / rate: its whole ms and the remainder; the key expires when TAT passes. With reserved
    -- permits, their slots' end (TAT, rounded up to whole ms) is marked as lua/gcra.lua reads it, so that no refund
    -- moves TAT back over them.
    local part = debt % rate
    local whole_ms = now + (debt - part) / rate
    if reserved > 0 then
        floor = math.max(floor, whole_ms + (part > 0 and 1 or 0))
    end
    if floor > now then
        part = part + rate * (FLOOR_MARK + whole_ms + 1 - floor)
    end
    local span = debt + rate - 1
    redis.call('SET', key, string.format('gcra:%d:%d', whole_ms, part), 'PX', (span - span % rate) / rate + grace)
end

-- The standing after the call.
local available = full - debt
local fill = debt + rate - 1
return { granted, now, reserved, charged,
    available > 0 and (available - available % interval) / interval or 0, now + (fill - fill % rate) / rate,
    retry_after }
