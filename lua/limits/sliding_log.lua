-- Sliding log: a request of `permits` at `now` is allowed while the permits granted in (now - interval, now] plus
-- these stay within `limit`. Exact over every interval-long span, at the cost of one zset member per permit.
--
-- State: a permit log (lua/limits/zset_log.lua) where every grant's permits free at exactly grant time + interval:
-- a concurrency lease that is never released early. So the wait for a denied request is exact, and the key expires
-- when the newest grant leaves the window. Unlike src/sliding_log (Redisson's layout, one config shared by name),
-- the quota comes with each request, so one script limits any identifier next to the other algorithms.

--@decision

if operation == 'limit' then
    check_lease(lease, GRANT_ID)
elseif operation == 'refund' then
    -- Gives back the newest grants first (the request that just failed is usually the newest), never more than is
    -- still in the window; the key then expires when the newest grant left would.
    redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
    redis.call('ZREMRANGEBYRANK', key, -permits, -1)
    local last_expiry = expiry_at(key, -1)
    if last_expiry then
        redis.call('PEXPIRE', key, last_expiry - now + grace)
    end
    permits, lease = 1, ''
end
-- Every grant frees exactly on time.
allowed, retry_after, remaining, reset, reset_after =
    log_verdict(key, permits, limit, interval, lease, now, grace, grants_if_allowed, true)

--@grant

log_grant(key, permits, interval, lease, now, grace, reset_after)
