-- Concurrency limiter (Stripe's "N in flight"): at most `limit` permits held at once. A grant is a lease that the
-- holder gives back with release; a lease not given back expires `interval` ms after it was granted, so a crashed
-- holder cannot leak capacity.
--
-- State: a permit log (lua/limits/zset_log.lua) where each lease's permits free when the lease expires, unless
-- released sooner. The grant's receipt, handed to the holder, is '<permits>:<lease id>'; releasing is refunding it.

--@decision

if operation == 'limit' then
    check_lease(lease, GRANT_ID)
elseif operation == 'refund' then
    -- Releases the lease its receipt names (`mark`, its id: permits <= limit, checked by request_of); `held` is
    -- false when it is not held (released, or expired).
    local members = {}
    for i = 1, permits do
        members[i] = mark .. '/' .. i
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
-- A grant is a lease: its receipt goes back to the holder.
token = permits .. ':' .. lease
