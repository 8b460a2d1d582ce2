-- Sliding log: a request of `permits` at `now` is allowed while the permits granted in (now - interval, now] plus
-- these stay within `limit`. Exact over every interval-long span, at the cost of one zset member per grant in the
-- window, whatever its permits.
--
-- State: a log of grants (zset_member.lua) where every grant frees at exactly grant time + interval, so the wait
-- for a denied request is exact; the key expires when the newest grant leaves the window. Unlike src/redisson, the
-- quota comes with each request.

--@decision

local in_log, first_position, last_run
held, permits, allowed, retry_after, remaining, reset, reset_after, in_log, first_position, last_run =
    log_decision(operation, key, permits, limit, interval, lease, mark, now)

--@grant

-- The receipt names the grant, to give it back exactly.
token = log_grant(key, permits, interval, lease, now, grace, reset_after, in_log, first_position, last_run, reset)
granted_mark = now + interval
