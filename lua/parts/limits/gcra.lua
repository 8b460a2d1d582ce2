-- GCRA (generic cell rate algorithm, as redis-cell): a burst of `limit` permits, then `rate` permits per `interval`
-- ms. The whole state is one timestamp, the theoretical arrival time (TAT): the cheapest exact limiter. Its
-- decisions equal a token bucket's with the same numbers (a property test checks this on the reference model).
--
-- State: string 'gcra:<ms>:<rem>', TAT = ms + rem / rate, so that an emission interval of interval / rate ms need not
-- be a whole number of ms (3 per second stays exact). The key expires when TAT passes. If `rate` is changed, a
-- stored `rem` is capped at rate - 1: the TAT moves by less than 1 ms. The tag 'gcra:' says whose value it is:
-- another algorithm's (a stored quota that changed its algorithm) matches no pattern here and is read as no debt.
--
-- A grant's receipt is '<permits>:<unix ms of the grant>'; a refund of it gives back the debt the grant added less
-- what has been paid off since, as token_bucket.lua does (there, with the same reason).

--@decision

-- Debt at `now`, in units (see bucket.lua): (TAT - now) × rate, never negative.
local debt = 0
local value = redis.call('GET', key) or ''
local ms, rem = string.match(value, '^gcra:(%d+):(%d+)$')
ms = ms and ms + 0
if ms and ms >= now then
    rem = rem + 0
    debt = (ms - now) * rate + (rem < rate and rem or rate - 1)
end
if operation == 'refund' then
    local granted = string.find(mark, '^%d+$') and mark + 0
    if not granted or granted > now then
        error({ err = 'ERR edgelimit: invalid ' .. RECEIPT_MARK .. ': ' .. mark })
    end
    local taken, elapsed = permits * interval, now - granted
    local span = taken + rate - 1
    local credit = elapsed < (span - span % rate) / rate and taken - elapsed * rate or 0
    held = credit > 0 and debt > 0
    if held then
        debt = debt > credit and debt - credit or 0
        if debt <= 0 then
            redis.call('DEL', key)
        else
            local part = debt % rate
            span = debt + rate - 1
            redis.call('SET', key, string.format('gcra:%d:%d', now + (debt - part) / rate, part), 'PX',
                (span - span % rate) / rate + grace)
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
local part = debt % rate
redis.call('SET', key, string.format('gcra:%d:%d', now + (debt - part) / rate, part), 'PX',
    reset_after - now + grace)
granted_mark = now
