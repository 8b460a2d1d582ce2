-- The algorithm family's driver: the last part of every algorithm script. One call decides one limit or several,
-- atomically: every limit gives a verdict first, and only if all allow are all of them recorded. A request denied
-- by one limit consumes from none.
--
--   KEYS     two per limit: its config hash (read only when the limit's algorithm argument is ''), its state key
--   ARGV[1]  'limit' (decide and record), 'peek' (decide, record nothing), 'refund' (give permits back)
--   ARGV[2]  unix ms, or '' for the Redis server's clock (the default)
--   then six per limit: algorithm ('' = read the config hash), permits, limit, interval (ms), rate, lease
--     lease: for a concurrency or sliding log limit, a fresh random id naming the grant ('limit'); for a concurrency
--            limit, the lease token to release ('refund')
--
-- The reply has one entry per limit, in order: {status, limit, remaining, reset, retry_after, lease token or ''}.
--   granted        allowed and recorded
--   allowed        would be allowed, recorded nothing (a peek, or another limit denied)
--   denied         not allowed; retry_after is the exact wait (an upper bound for concurrency)
--   refunded       permits given back; not_held: the concurrency lease was not held (released or expired)
--   exceeds_limit  more permits than the limit can ever grant; not_configured: no stored config
-- Either of the last two makes the whole call record nothing.

local MAX_COUNT = 2 ^ 32 - 1

local operation = ARGV[1]
if operation ~= 'limit' and operation ~= 'peek' and operation ~= 'refund' then
    reject('operation (limit, peek or refund)', operation)
end
if #KEYS == 0 or #KEYS % 2 ~= 0 then
    reject('number of keys (two per limit: config, state)', #KEYS)
end
local count = #KEYS / 2
if #ARGV ~= 2 + 6 * count then
    reject('number of arguments (2, then 6 per limit)', #ARGV)
end
local now = clock(ARGV[2])
local grace = 0
if ARGV[2] ~= '' then
    grace = EXPLICIT_TIME_GRACE_MS
end

-- A whole number within [low, high] from a limit's quota field, or a clean error naming where it came from (the
-- message is only built on failure: string building costs as much as a Redis command here).
local function quota_field(text, high, stored_in, field)
    local n = whole_number(text, 1, high)
    if not n then
        local source = stored_in and ('stored config in ' .. stored_in .. ', field ') or 'argument '
        reject(source .. field, text)
    end
    return n
end

-- A limit's quota {algorithm, limit, interval, rate}, checked, from its arguments or its stored config; nil when it
-- is stored and there is none.
local function quota_of(i, base)
    local algorithm, limit, interval, rate = ARGV[base + 1], ARGV[base + 3], ARGV[base + 4], ARGV[base + 5]
    local stored_in
    if algorithm == '' then
        stored_in = KEYS[2 * i - 1]
        local stored = redis.call('HMGET', stored_in, 'algorithm', 'limit', 'interval', 'rate')
        if not stored[1] then
            return nil
        end
        algorithm, limit, interval, rate = stored[1], stored[2], stored[3], stored[4]
    end
    local quota = {
        algorithm = algorithm,
        limit = quota_field(limit, MAX_COUNT, stored_in, 'limit'),
        interval = quota_field(interval, 2 ^ 52, stored_in, 'interval (ms)'),
        rate = quota_field(rate, MAX_COUNT, stored_in, 'rate'),
    }
    if not ALGORITHMS[algorithm] then
        reject((stored_in and 'stored ' or '') .. 'algorithm (not in this script)', algorithm)
    end
    if quota.limit * quota.interval > 2 ^ 52 then
        reject('limit × interval (must stay below 2^52 for exact arithmetic)', quota.limit)
    end
    return quota
end

local limits, replies, commit = {}, {}, operation == 'limit'
for i = 1, count do
    local base = 2 + 6 * (i - 1)
    local quota = quota_of(i, base)
    local permits = whole(ARGV[base + 2], 'permits', 1, MAX_COUNT)
    local lease = ARGV[base + 6]
    -- The form of the sixth argument, where the algorithm takes one for this operation (its `ids`).
    local pattern = quota and ALGORITHMS[quota.algorithm].ids
    pattern = pattern and pattern[operation]
    if pattern and (#lease > 64 or not string.match(lease, pattern)) then
        reject('lease (an id of letters, digits, _ or -, at most 64; a token "<permits>:<id>" to release)', lease)
    end
    limits[i] = { quota = quota, key = KEYS[2 * i], permits = permits, lease = lease }
    if not quota then
        replies[i], commit = { 'not_configured', 0, 0, 0, 0, '' }, false
    elseif operation ~= 'refund' and permits > quota.limit then
        replies[i], commit = { 'exceeds_limit', quota.limit, 0, 0, 0, '' }, false
    end
end

if operation == 'refund' then
    -- Every limit was checked above, before this first write.
    for i, limit in ipairs(limits) do
        if not replies[i] then
            local algorithm = ALGORITHMS[limit.quota.algorithm]
            local held = algorithm.refund(limit.quota, limit.key, now, limit.permits, grace, limit.lease)
            local standing = algorithm.decide(limit.quota, limit.key, now, 1, '').now
            replies[i] = { held == false and 'not_held' or 'refunded', limit.quota.limit, standing.remaining,
                           standing.reset, 0, '' }
        end
    end
    return replies
end

local verdicts = {}
for i, limit in ipairs(limits) do
    if not replies[i] then
        local algorithm = ALGORITHMS[limit.quota.algorithm]
        verdicts[i] = algorithm.decide(limit.quota, limit.key, now, limit.permits, limit.lease)
        commit = commit and verdicts[i].allowed
    end
end
for i, verdict in pairs(verdicts) do
    local status, standing = 'denied', verdict.now
    if verdict.allowed and commit then
        verdict.commit(grace)
        status, standing = 'granted', verdict.after
    elseif verdict.allowed then
        status = 'allowed'
    end
    replies[i] = { status, limits[i].quota.limit, standing.remaining, standing.reset, verdict.retry_after,
                   status == 'granted' and verdict.lease or '' }
end
return replies
