-- A block of GCRA permits reserved for one client to grant locally, with no round trip, until the block is used up
-- or its time runs out (src/limit/reserved.rs): 0-RTT decisions for an identifier a client sees often, exact by
-- construction. It shares its state with lua/gcra.lua's decisions on the same key (see lua/parts/limits/gcra.lua:
-- 'gcra:<ms>:<rem>', the theoretical arrival time TAT = ms + rem / rate), so reserved and plain decisions mix.
--
-- The rule. A block of `block` permits for the span [now, until] (until = now + length) is admitted if
-- max(TAT, until) + block × T − now ≤ limit × T (T = interval / rate, one permit's emission interval), and then
-- TAT becomes max(TAT, until) + block × T: it is checked as if every permit were used at the block's start and
-- charged as if every one were used at its end. Whenever its holder uses them within the span, no span [a, b] ever
-- holds more than limit + (b − a) / T grants. Charging at the start instead (TAT = max(TAT, now) + block × T) would
-- let the holder bank the refill that comes while the block waits, and over-admit. The price is the refill between
-- now and until when the bucket is not busy (TAT < until): so blocks are short, and sized by the client to what it
-- expects to use in that time.
--
-- A block is at most half of what the limit has left (the rest stays for other clients); when that is not more than
-- the request's permits, the request is decided alone, as lua/gcra.lua would.
--
--   KEYS[1]  the state key (the one lua/gcra.lua decides on)
--   ARGV[1]  the request and its quota, as lua/gcra.lua's: '<permits>:<limit>:<interval ms>:<rate>'
--   ARGV[2]  the block: '<block>:<length ms>', the permits to reserve (the request's among them; from permits to
--            the limit) and for how long (1 to 60000 ms)
--   ARGV[3]  unix ms, or '' (the default) for the Redis server's clock
--
-- Reply {granted, now, until, remaining, reset, retry_after}: the caller's `granted` permits (the request's and,
-- when more, a block to use by `until`, unix ms on the clock of `now`; `until` is `now` for a request decided
-- alone), or 0 when denied, with `retry_after` ms until the request's permits fit; `remaining` and `reset` as after
-- the call: permits left, and when the limit is whole again. A request above the limit is an error (the client
-- refuses it before sending).

local key, request, block_text, time = KEYS[1], ARGV[1], ARGV[2], ARGV[3] or ''
if not key or not request or not block_text or ARGV[4] then
    error({ err = 'ERR edgelimit: invalid call (1 key, the state key; 2 or 3 arguments): ' .. #KEYS .. ' keys, '
        .. #ARGV .. ' arguments' })
end
local permits, limit, interval, rate = string.match(request, '^(%d+):(%d+):(%d+):(%d+)$')
local block, length = string.match(block_text, '^(%d+):(%d+)$')
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
    block, length = block + 0, length + 0
end
if not block or block < permits or block > limit or length < 1 or length > 60000 then
    error({ err = 'ERR edgelimit: invalid block (<block>:<length ms>, block from the request\'s permits to the limit, '
        .. 'length from 1 to 60000): ' .. string.sub(block_text, 1, 100) })
end
local now, grace
if time == '' then
    local server_time = redis.call('TIME')
    now, grace = server_time[1] * 1000 + (server_time[2] - server_time[2] % 1000) / 1000, 0
else
    now = string.find(time, '^%d+$') and time + 0
    if not now or now > 2 ^ 53 then
        error({ err = 'ERR edgelimit: invalid time (unix ms, or empty for server time): ' .. string.sub(time, 1, 100) })
    end
    grace = EXPLICIT_TIME_GRACE_MS
end

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

-- The largest block that fits (the rule above, in units: max(debt, length × rate) + block × interval ≤ full), and
-- half of it at most.
local charged = debt > length * rate and debt or length * rate
local fits = full - charged
fits = fits > 0 and (fits - fits % interval) / interval or 0
fits = (fits - fits % 2) / 2
local granted, ends = 0, now
if block > permits and fits > permits then
    granted = block < fits and block or fits
    ends, debt = now + length, charged + granted * interval
elseif debt + permits * interval <= full then
    granted, debt = permits, debt + permits * interval
end
if granted > 0 then
    -- TAT = now + debt / rate: its whole ms and the remainder; the key expires when TAT passes.
    local part = debt % rate
    local span = debt + rate - 1
    redis.call('SET', key, string.format('gcra:%d:%d', now + (debt - part) / rate, part), 'PX',
        (span - span % rate) / rate + grace)
end

-- The standing after the call; for a denial, when the request's permits will fit.
local available = full - debt
local fill = debt + rate - 1
local retry_after = 0
if granted == 0 then
    local short = permits * interval - available + rate - 1
    retry_after = (short - short % rate) / rate
end
return { granted, now, ends, available > 0 and (available - available % interval) / interval or 0,
    now + (fill - fill % rate) / rate, retry_after }
