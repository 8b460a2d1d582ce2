-- GCRA (generic cell rate algorithm, as redis-cell): a burst of `limit` permits, then `rate` permits per `interval`
-- ms. The whole state is one timestamp, the theoretical arrival time (TAT): the cheapest exact limiter. Its
-- decisions equal a token bucket's with the same numbers (a property test checks this on the reference model).
--
-- State: string 'gcra:<ms>:<rem>', TAT = ms + rem / rate, so an emission interval need not be whole ms (3 per
-- second stays exact). The key expires when TAT passes. After a change of `rate`, a stored `rem` is capped at
-- rate - 1 (TAT moves by under 1 ms). The tag 'gcra:' marks the layout; any other value is refused
-- (foreign_value.lua).
--
-- A grant's receipt is '<permits>:<unix ms of the grant>'; a refund gives back the debt the grant added less what
-- has been paid off since, as token_bucket.lua does, but never moves TAT back over slots reserved for a client
-- (the `reserve/gcra` script): their end, `floor`, is marked in `rem` as
-- rem = part + rate × (FLOOR_MARK + TAT's whole ms + 1 − floor), FLOOR_MARK = ⌊2^32 / rate⌋ + 1, so a marked rem is
-- at least 2^32 and an unmarked one reads as before. Why: docs/design/reserve.md, "GCRA".

--@decision

-- Debt at `now` in units (bucket.lua): (TAT - now) × rate, never negative; and `floor` (0 when none is marked).
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
    -- A refund leaves at least the reserved slots' debt (never more than there is).
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
