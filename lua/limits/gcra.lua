-- GCRA (generic cell rate algorithm, as redis-cell): a burst of `limit` permits, then `rate` permits per `interval`
-- ms. The whole state is one timestamp, the theoretical arrival time (TAT): the cheapest exact limiter. Its
-- decisions equal a token bucket's with the same numbers (a property test checks this on the reference model).
--
-- State: string 'gcra:<ms>:<rem>', TAT = ms + rem / rate, so that an emission interval of interval / rate ms need not
-- be a whole number of ms (3 per second stays exact). The key expires when TAT passes. If `rate` is changed, a
-- stored `rem` is capped at rate - 1: the TAT moves by less than 1 ms. The tag 'gcra:' says whose value it is:
-- another algorithm's value, or one of no edgelimit algorithm, is refused (foreign_value.lua; a stored quota that
-- changed its algorithm has the old state dropped first, by driver.lua).
--
-- A grant's receipt is '<permits>:<unix ms of the grant>'; a refund of it gives back the debt the grant added less
-- what has been paid off since, as token_bucket.lua does (there, with the same reason), but never moves TAT back
-- over permits reserved for a client (lua/reserve/gcra.lua). Those are used at times Redis does not see, up
-- to their slot's start: a later grant given their slots would be used in the same span as they are. (A plain
-- grant is used when it is decided, before any refund after it, so a later grant may take its slot's place.) So the
-- reserve script marks the end of its slots, `floor` (whole ms, rounded up), in `rem`, and every writer keeps the
-- mark until it passes: rem = part + rate × (FLOOR_MARK + TAT's whole ms + 1 − floor), FLOOR_MARK = ⌊2^32 / rate⌋ + 1,
-- so that a marked rem is at least 2^32 and an unmarked one (below rate, below 2^32) is read as before. An edgelimit
-- from before the mark reads a marked rem as rate − 1 (TAT less than 1 ms later: it admits no more).

--@decision

-- Debt at `now`, in units (see bucket.lua): (TAT - now) × rate, never negative; and the reserved slots' end,
-- `floor` (0 when none is marked).
local debt, floor = 0, 0
local value = redis.call('GET', key) or ''
local ms, rem = string.match(value, '^gcra:(%d+):(%d+)$')
if value ~= '' and not ms then
    --@inline limits/string_tag.lua
    --@inline limits/foreign_value.lua
end
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
if operation == 'refund' then
    local granted = string.find(mark, '^%d+$') and mark + 0
    if not granted or granted > now then
        error({ err = 'ERR edgelimit: invalid ' .. RECEIPT_MARK .. ': ' .. mark })
    end
    local taken, elapsed = permits * interval, now - granted
    local span = taken + rate - 1
    local credit = elapsed < (span - span % rate) / rate and taken - elapsed * rate or 0
    -- The debt a refund leaves at least: the reserved slots' (never more than there is).
    local least = floor > now and math.min((floor - now) * rate, debt) or 0
    held = credit > 0 and debt > least
    if held then
        debt = debt - credit > least and debt - credit or least
        if debt <= 0 then
            redis.call('DEL', key)
        else
            --@inline limits/gcra_write.lua
        end
    end
    permits = 1
end
-- The verdict over units (bucket.lua), with `available` = full − debt.
local full = limit * interval
local available = full - debt
local left = available - permits * interval
local fill = debt + rate - 1
allowed, remaining, reset = left >= 0, available - available % interval, now + (fill - fill % rate) / rate
remaining = remaining > 0 and remaining / interval or 0
fill = full - left + rate - 1
reset_after = now + (fill - fill % rate) / rate
if allowed then
    retry_after = 0
else
    fill = rate - 1 - left
    retry_after = (fill - fill % rate) / rate
end

--@grant

-- The debt after the grant (at least one permit's: never none), due when TAT passes: at `reset_after`.
debt = full - left
--@inline limits/gcra_write.lua
granted_mark = now
