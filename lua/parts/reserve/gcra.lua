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
-- So that the first permits have time to be used (a round trip, at least), their slots start `window` ms from now
-- at the earliest. While the bucket is not that busy (TAT before now + window), that skips the refill between TAT
-- and now + window: the price of a reservation on an idle bucket. (Slots taken from TAT there would give the first
-- permits no time at all; using them after their slot's start would over-admit.)
--
--   KEYS[1]  the state key (the one lua/gcra.lua decides on)
--   ARGV[1]  the request and its quota, as lua/gcra.lua's: '<permits>:<limit>:<interval ms>:<rate>'
--   ARGV[2]  '<block>:<window ms>:<horizon ms>': the permits to reserve besides the request's (0 to the limit), the
--            least time from now to a reserved permit's slot start (1 to the horizon), and how far from now they may
--            start (at most 60000 ms): the client asks for what it expects to use in that time
--   ARGV[3]  unix ms, or '' (the default) for the Redis server's clock
--
-- Reply {granted, now, reserved, charged, remaining, reset, retry_after}: the request's permits granted (`granted`,
-- all or 0) as lua/gcra.lua decides them; `reserved` permits for the caller, the i-th (from 1) usable from
-- now + ceil((charged + i × interval − limit × interval) / rate) ms (or now) until now + floor((charged + (i − 1) ×
-- interval) / rate) ms (`charged`: where their slots start, in units after now; see lua/parts/limits/bucket.lua);
-- then the standing after the call: permits left now, when the limit is whole again, and for a denied request the
-- ms until it fits. A request above the limit is an error (the client refuses it before sending).

local key, request, block_text, time = KEYS[1], ARGV[1], ARGV[2], ARGV[3] or ''
if not key or not request or not block_text or ARGV[4] then
    error({ err = 'ERR edgelimit: invalid call (1 key, the state key; 2 or 3 arguments): ' .. #KEYS .. ' keys, '
        .. #ARGV .. ' arguments' })
end
local permits, limit, interval, rate = string.match(request, '^(%d+):(%d+):(%d+):(%d+)$')
local block, window, horizon = string.match(block_text, '^(%d+):(%d+):(%d+)$')
if permits then
    permits, limit, interval, rate = permits + 0, limit + 0, interval + 0, rate + 0
end
if not permits or permits < 1 or limit < 1 or limit > MAX_COUNT or permits > limit or interval < 1 or rate < 1
    or rate > MAX_COUNT or limit * interval > 2 ^ 52 then
    error({ err = 'ERR edgelimit: invalid request (<permits>:<limit>:<interval ms>:<rate>, whole numbers from 1, '
        .. 'permits at most the limit, limit and rate below 2^32, limit × interval at most 2^52): '
        .. string.sub(request, 1, 100) })
end
if block then
    block, window, horizon = block + 0, window + 0, horizon + 0
end
if not block or block > limit or window < 1 or window > horizon or horizon > 60000 then
    error({ err = 'ERR edgelimit: invalid block (<block>:<window ms>:<horizon ms>, block from 0 to the limit, window '
        .. 'from 1 to the horizon, horizon at most 60000): ' .. string.sub(block_text, 1, 100) })
end
-- The clock as every script reads it (lua/parts/common.lua); state written at an explicit time lives a grace longer.
local now = clock(time)
local grace = time == '' and 0 or EXPLICIT_TIME_GRACE_MS

-- The debt at `now` in units (see lua/parts/limits/bucket.lua: a permit is `interval` units, `rate` come back per
-- ms, the limit holds limit × interval): (TAT − now) × rate, never negative; read as lua/gcra.lua reads it.
local debt = 0
local ms, rem = string.match(redis.call('GET', key) or '', '^gcra:(%d+):(%d+)$')
ms = ms and ms + 0
if ms and ms >= now then
    rem = rem + 0
    debt = (ms - now) * rate + (rem < rate and rem or rate - 1)
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

-- The reserved permits: the next slots, from `window` ms after now at the earliest, as many as asked that start
-- within the horizon (charged + i × interval − full ≤ horizon × rate, in units).
local charged = debt > window * rate and debt or window * rate
local fits = full + horizon * rate - charged
fits = fits > 0 and (fits - fits % interval) / interval or 0
local reserved = block < fits and block or fits
if reserved > 0 then
    debt = charged + reserved * interval
end
if debt > 0 and (granted > 0 or reserved > 0) then
    -- TAT = now + debt / rate: its whole ms and the remainder; the key expires when TAT passes.
    local part = debt % rate
    local span = debt + rate - 1
    redis.call('SET', key, string.format('gcra:%d:%d', now + (debt - part) / rate, part), 'PX',
        (span - span % rate) / rate + grace)
end

-- The standing after the call.
local available = full - debt
local fill = debt + rate - 1
return { granted, now, reserved, charged,
    available > 0 and (available - available % interval) / interval or 0, now + (fill - fill % rate) / rate,
    retry_after }
