-- The `<algorithm>` scripts: one limit whose quota comes with the request, the common call. The algorithm's file is
-- spliced in at the markers, so it runs straight through; the common call sends one or two arguments (cost:
-- docs/design/scripts.md).
--
--   KEYS[1]  the state key
--   ARGV[1]  the request and its quota, '<permits>:<limit>:<interval ms>' and, for token bucket and GCRA, ':<rate>'
--   ARGV[2]  the lease: a concurrency or sliding log grant's fresh id; on a refund the receipt to give back; or ''
--   ARGV[3]  the operation: 'limit' (decide and record; the default when absent), 'peek' (decide only), 'refund'
--   ARGV[4]  unix ms, or '' (the default when absent) for the Redis server's clock
--
-- Reply {status, remaining, reset, x}: status 1 granted, 0 denied, 2 allowed (a peek), 3 refunded, 4 not_held (a
-- refund that gave nothing back), 5 exceeds_limit (more permits than the limit); remaining and reset as driver.lua's
-- (after the grant, when granted); x is the grant's mark when granted (the receipt is '<permits>:<x>', with
-- '-<grant id>' after it for a log), else retry_after (0 for a refund). The caller knows the limit.

local key, request, lease = KEYS[1], ARGV[1], ARGV[2]
local operation, time, extra = 'limit', '', nil
if lease then
    operation, time, extra = ARGV[3] or operation, ARGV[4] or time, ARGV[5]
else
    lease = ''
end
if not key or not request or extra then
    error({ err = 'ERR edgelimit: invalid call (1 key, the state key; 1 to 4 arguments): ' .. #KEYS .. ' keys, '
        .. #ARGV .. ' arguments' })
end
--@request
local now, mark
local grace = 0
if time == '' then
    local server_time = redis.call('TIME')
    local us = server_time[2] + 0
    now = server_time[1] * 1000 + (us - us % 1000) / 1000
else
    now = string.find(time, '^%d+$') and time + 0
    if not now or now > 2 ^ 53 then
        error({ err = 'ERR edgelimit: invalid time (unix ms, or empty for server time): ' .. string.sub(time, 1, 100) })
    end
    grace = EXPLICIT_TIME_GRACE_MS
end
if operation == 'refund' then
    -- The receipt, as a grant returned it: '<permits>:<mark>', its permits the refund's and at most the limit.
    local receipt_permits
    receipt_permits, mark = string.match(lease, '^(%d+):([%w_%-]+)$')
    if not mark or #mark > 64 or receipt_permits + 0 ~= permits or permits > limit then
        error({ err = 'ERR edgelimit: invalid receipt (as a grant returned it: "<permits>:<mark>", its permits the '
            .. 'refund\'s and at most the limit ' .. limit .. '): ' .. string.sub(lease, 1, 100) })
    end
elseif operation ~= 'limit' and operation ~= 'peek' then
    error({ err = 'ERR edgelimit: invalid operation (limit, peek or refund): ' .. string.sub(operation, 1, 100) })
elseif permits > limit then
    return { 5, 0, 0, 0 }
end
-- Set by the decision (held only on a refund; unset reads as nothing given back) and by the grant (token: a log's
-- whole receipt, which this reply does not carry: the caller builds it).
-- luacheck: push ignore token
local allowed, retry_after, remaining, reset, reset_after, held, granted_mark, token
-- luacheck: pop

--@helpers

--@decision

if operation == 'refund' then
    return { held and 3 or 4, remaining, reset, 0 }
elseif operation == 'peek' then
    return { allowed and 2 or 0, remaining, reset, retry_after }
elseif not allowed then
    return { 0, remaining, reset, retry_after }
end

--@grant

return { 1, remaining - permits, reset_after, granted_mark }
