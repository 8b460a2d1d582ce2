-- Sliding log: a request of `permits` at `now` is allowed while the permits granted in (now - interval, now] plus
-- these stay within `limit`. Exact over every interval-long span, at the cost of one zset member per permit.
--
-- State: a permit log (lua/limits/zset_log.lua) where every grant's permits free at exactly grant time + interval:
-- a concurrency lease that is never released early. So the wait for a denied request is exact, and the key expires
-- when the newest grant leaves the window. Unlike src/sliding_log (Redisson's layout, one config shared by name),
-- the quota comes with each request, so one script limits any identifier next to the other algorithms.
-- A grant's receipt is '<permits>:<grant id>'.

--@decision

if operation == 'limit' then
    check_lease(lease, GRANT_ID)
elseif operation == 'refund' then
    -- Gives back the grant its receipt names (`mark`, its id: permits <= limit, checked by request_of) if it is
    -- still in the window, and nothing else; `held` is false when it is not (it left the window, or was refunded).
    -- The key then expires when the newest grant left would.
    local members = {}
    for i = 1, permits do
        members[i] = mark .. '/' .. i
    end
    redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
    held = in_batches('ZREM', key, members) > 0
    local last_expiry = held and expiry_at(key, -1)
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
-- Its receipt names the grant for a refund.
token = permits .. ':' .. lease
