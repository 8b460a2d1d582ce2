-- GCRA (generic cell rate algorithm, as redis-cell): a burst of `limit` permits, then `rate` permits per `interval`
-- ms. The whole state is one timestamp, the theoretical arrival time (TAT): the cheapest exact limiter. Its
-- decisions equal a token bucket's with the same numbers (a property test checks this on the reference model).
--
-- State: string 'ms:rem', TAT = ms + rem / rate, so that an emission interval of interval / rate ms need not be a
-- whole number of ms (3 per second stays exact). The key expires when TAT passes. If `rate` is changed, a stored
-- `rem` is capped at rate - 1: the TAT moves by less than 1 ms.

local function write_tat(key, rate, debt, now, grace)
    if debt <= 0 then
        redis.call('DEL', key)
        return
    end
    local rem = debt % rate
    redis.call('SET', key, string.format('%d:%d', now + (debt - rem) / rate, rem), 'PX', ceil_div(debt, rate) + grace)
end

--@decision

-- Debt at `now`, in units (see bucket_verdict): (TAT - now) × rate, never negative.
local debt = 0
local ms, rem = string.match(redis.call('GET', key) or '', '^(%d+):(%d+)$')
ms = ms and ms + 0
if ms and ms >= now then
    debt = (ms - now) * rate + math.min(rem + 0, rate - 1)
end
if operation == 'refund' then
    debt = debt - permits * interval
    write_tat(key, rate, debt, now, grace)
    debt, permits = debt > 0 and debt or 0, 1
end
local left
allowed, retry_after, remaining, reset, reset_after, left =
    bucket_verdict(permits, limit, interval, rate, now, limit * interval - debt)

--@grant

write_tat(key, rate, limit * interval - left, now, grace)
