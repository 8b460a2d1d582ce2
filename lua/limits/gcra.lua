-- GCRA (generic cell rate algorithm, as redis-cell): a burst of `limit` permits, then `rate` permits per `interval`
-- ms. The whole state is one timestamp, the theoretical arrival time (TAT): the cheapest exact limiter. Its
-- decisions equal a token bucket's with the same numbers (a property test checks this on the reference model).
--
-- State: string 'ms:rem', TAT = ms + rem / rate, so that an emission interval of interval / rate ms need not be a
-- whole number of ms (3 per second stays exact). The key expires when TAT passes. If `rate` is changed, a stored
-- `rem` is capped at rate - 1: the TAT moves by less than 1 ms.

-- Debt at `now`, in units (see bucket_verdict): (TAT - now) × rate, never negative.
local function gcra_debt(quota, key, now)
    local stored = redis.call('GET', key)
    local ms, rem = string.match(stored or '', '^(%d+):(%d+)$')
    ms, rem = tonumber(ms), tonumber(rem)
    if not ms or ms < now then
        return 0
    end
    return (ms - now) * quota.rate + math.min(rem, quota.rate - 1)
end

local function write_tat(quota, key, debt, now, grace)
    if debt <= 0 then
        redis.call('DEL', key)
        return
    end
    local whole_ms = math.floor(debt / quota.rate)
    redis.call('SET', key, (now + whole_ms) .. ':' .. (debt - whole_ms * quota.rate),
        'PX', ceil_div(debt, quota.rate) + grace)
end

ALGORITHMS.gcra = {
    decide = function(quota, key, now, permits)
        local full = quota.limit * quota.interval
        local verdict = bucket_verdict(quota, now, full - gcra_debt(quota, key, now), permits)
        verdict.commit = function(grace)
            write_tat(quota, key, full - verdict.left, now, grace)
        end
        return verdict
    end,
    refund = function(quota, key, now, permits, grace)
        write_tat(quota, key, gcra_debt(quota, key, now) - permits * quota.interval, now, grace)
    end,
}
