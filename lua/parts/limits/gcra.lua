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

local function write_tat(key, rate, debt, now, grace)
    if debt <= 0 then
        redis.call('DEL', key)
        return
    end
    local rem = debt % rate
    redis.call('SET', key, string.format('gcra:%d:%d', now + (debt - rem) / rate, rem), 'PX',
        ceil_div(debt, rate) + grace)
end

--@decision

-- Debt at `now`, in units (see bucket_verdict): (TAT - now) × rate, never negative.
local debt = 0
local ms, rem = string.match(redis.call('GET', key) or '', '^gcra:(%d+):(%d+)$')
ms = ms and ms + 0
if ms and ms >= now then
    debt = (ms - now) * rate + math.min(rem + 0, rate - 1)
end
if operation == 'refund' then
    local granted = string.find(mark, '^%d+$') and whole_number(mark, 0, now) or reject(RECEIPT_MARK, mark)
    local taken, elapsed = permits * interval, now - granted
    local credit = elapsed < ceil_div(taken, rate) and taken - elapsed * rate or 0
    held = credit > 0 and debt > 0
    if held then
        debt = debt > credit and debt - credit or 0
        write_tat(key, rate, debt, now, grace)
    end
    permits = 1
end
local left
allowed, retry_after, remaining, reset, reset_after, left =
    bucket_verdict(permits, limit, interval, rate, now, limit * interval - debt)

--@grant

write_tat(key, rate, limit * interval - left, now, grace)
token = string.format('%d:%d', permits, now)
