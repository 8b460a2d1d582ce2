-- Concurrency limiter (Stripe's "N in flight"): at most `limit` permits held at once. A grant is a lease that the
-- holder gives back with release; a lease not given back expires `interval` ms after it was granted, so a crashed
-- holder cannot leak capacity.
--
-- State: a permit log (lua/limits/zset_log.lua) where each lease's permits free when the lease expires, unless
-- released sooner. The lease token given to the holder is '<permits>:<lease id>'.

--@decision

if operation == 'limit' then
    check_lease(lease, GRANT_ID)
elseif operation == 'refund' then
    -- Releases the lease whose token is `lease`; `held` is false when it is not held (released, or expired).
    check_lease(lease, '^%d+:[%w_%-]+$')
    local count, lease_id = string.match(lease, '^(%d+):(.+)$')
    local members = {}
    for i = 1, math.min(count + 0, limit) do
        members[i] = lease_id .. '/' .. i
    end
    -- An expired lease is not held, even before anything dropped it.
    redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
    held = in_batches('ZREM', key, members) > 0
    permits, lease = 1, ''
end
-- The wait for a denied request is an upper bound here: holders may release sooner. Leases do not free on time:
-- after the interval was lowered, older leases still run to their own expiry.
allowed, retry_after, remaining, reset, reset_after =
    log_verdict(key, permits, limit, interval, lease, now, grace, grants_if_allowed, false)

--@grant

log_grant(key, permits, interval, lease, now, grace, reset_after)
-- A grant is a lease: its token goes back to the holder.
token = permits .. ':' .. lease
