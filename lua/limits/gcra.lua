-- GCRA (generic cell rate algorithm, as redis-cell): a burst of `limit` permits, then `rate` permits per `interval`
-- ms. The whole state is one timestamp, the theoretical arrival time (TAT): the cheapest exact limiter. Its
-- decisions equal a token bucket's with the same numbers (a property test checks this on the reference model).
--
-- State: string 'ms:rem', TAT = ms + rem / rate, so that an emission interval of interval / rate ms need not be a
-- whole number of ms (3 per second stays exact). The key expires when TAT passes. If `rate` is changed, a stored
-- `rem` is capped at rate - 1: the TAT moves by less than 1 ms.

-- Debt at `now`, in units (see bucket_verdict): (TAT - now) × rate, never negative.
local function gcra_debt(limit, now)
    local ms, rem = string.match(redis.call('GET', limit.key) or '', '^(%d+):(%d+)$')
    ms = ms and ms + 0
    if not ms or ms < now then
        return 0
    end
    return (ms - now) * limit.rate + math.min(rem + 0, limit.rate - 1)
end

local function write_tat(limit, debt, now, grace)
    if debt <= 0 then
        redis.call('DEL', limit.key)
        return
    end
    local rate = limit.rate
    local rem = debt % rate
    redis.call('SET', limit.key, string.format('%d:%d', now + (debt - rem) / rate, rem), 'PX',
        ceil_div(debt, rate) + grace)
end

ALGORITHMS.gcra = {
    decide = function(limit, now)
        bucket_verdict(limit, now, limit.limit * limit.interval - gcra_debt(limit, now))
    end,
    commit = function(limit, now, grace)
        write_tat(limit, limit.limit * limit.interval - limit.left, now, grace)
    end,
    refund = function(limit, now, grace)
        write_tat(limit, gcra_debt(limit, now) - limit.permits * limit.interval, now, grace)
    end,
}
