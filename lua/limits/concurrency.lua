-- Concurrency limiter (Stripe's "N in flight"): at most `limit` permits held at once. A grant is a lease that the
-- holder gives back with release; a lease not given back expires `interval` ms after it was granted, so a crashed
-- holder cannot leak capacity.
--
-- State: a permit log (lua/limits/zset_log.lua) where each lease's permits free when the lease expires, unless
-- released sooner. The lease token given to the holder is '<permits>:<lease id>'.

ALGORITHMS.concurrency = {
    ids = { limit = GRANT_ID, refund = '^%d+:[%w_%-]+$' },
    decide = function(quota, key, now, permits, lease_id)
        -- The wait for a denied request is an upper bound here: holders may release sooner.
        local verdict = log_verdict(quota, key, now, permits, lease_id)
        if verdict.allowed then
            verdict.lease = permits .. ':' .. lease_id
        end
        return verdict
    end,
    -- Releases the lease `token`; false when it is not held (already released, or expired).
    refund = function(quota, key, now, permits, grace, token)
        local count, lease_id = string.match(token, '^(%d+):(.+)$')
        local members = {}
        for i = 1, math.min(tonumber(count), quota.limit) do
            members[#members + 1] = lease_id .. '/' .. i
        end
        -- An expired lease is not held, even before anything dropped it.
        redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
        return in_batches('ZREM', key, members) > 0
    end,
}
