-- Concurrency limiter (Stripe's "N in flight"): at most `limit` permits held at once. A grant is a lease that the
-- holder gives back with release; a lease not given back expires `interval` ms after it was granted, so a crashed
-- holder cannot leak capacity.
--
-- State: a log of grants (zset_member.lua) where each lease frees at its expiry unless released sooner. The lease's
-- receipt, '<permits>:<expiry>-<lease id>', releases it. The wait for a denied request is an upper bound: holders
-- may release sooner. After the interval is lowered, older leases still run to their own expiry.

--@decision

local in_log, first_position, last_run
held, permits, allowed, retry_after, remaining, reset, reset_after, in_log, first_position, last_run =
    log_decision(operation, key, permits, limit, interval, lease, mark, now)

--@grant

-- A grant is a lease: its receipt is the token that releases it.
token = log_grant(key, permits, interval, lease, now, grace, reset_after, in_log, first_position, last_run, reset)
granted_mark = now + interval
