-- Concurrency limiter (Stripe's "N in flight"): at most `limit` permits held at once. A grant is a lease that the
-- holder gives back with release; a lease not given back expires `interval` ms after it was granted, so a crashed
-- holder cannot leak capacity.
--
-- State: a permit log (lua/limits/zset_log.lua) where each lease's permits free when the lease expires, unless
-- released sooner. The lease token given to the holder is '<permits>:<lease id>'.

ALGORITHMS.concurrency = {
    ids = { limit = GRANT_ID, refund = '^%d+:[%w_%-]+$' },
    -- A grant is a lease: its token '<permits>:<lease id>' goes back to the holder.
    leases = true,
    -- The wait for a denied request is an upper bound here: holders may release sooner.
    decide = log_decide,
    commit = log_commit,
    -- Releases the lease limit.lease (a token); false when it is not held (already released, or expired).
    refund = function(limit, now)
        local count, lease_id = string.match(limit.lease, '^(%d+):(.+)$')
        local members = {}
        for i = 1, math.min(count + 0, limit.limit) do
            members[i] = lease_id .. '/' .. i
        end
        -- An expired lease is not held, even before anything dropped it.
        redis.call('ZREMRANGEBYSCORE', limit.key, '-inf', now)
        return in_batches('ZREM', limit.key, members) > 0
    end,
}
