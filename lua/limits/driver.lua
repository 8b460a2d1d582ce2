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
-- The reply is flat, six entries per limit, in order: status, limit, remaining, reset, retry_after, lease token or ''
-- (one array, not one per limit: each table costs Redis an allocation and a conversion).
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
local count = #KEYS / 2
if count < 1 or count % 1 ~= 0 then
    reject('number of keys (two per limit: config, state)', #KEYS)
end
if #ARGV ~= 2 + 6 * count then
    reject('number of arguments (2, then 6 per limit)', #ARGV)
end
local now = clock(ARGV[2])
local grace = ARGV[2] ~= '' and EXPLICIT_TIME_GRACE_MS or 0

-- A clean error naming the first of a limit's quota fields that is not a whole number within [1, high], and where it
-- came from: only called once a check failed (string building costs as much as a Redis command here).
local function reject_quota(stored_in, limit, interval, rate)
    local source = stored_in and ('stored config in ' .. stored_in .. ', field ') or 'argument '
    for _, field in ipairs({ { 'limit', limit, MAX_COUNT }, { 'interval (ms)', interval, 2 ^ 52 },
                             { 'rate', rate, MAX_COUNT } }) do
        if not whole_number(field[2], 1, field[3]) then
            reject(source .. field[1], field[2])
        end
    end
end

-- The i-th limit's record (see prelude.lua), its quota checked, from its arguments or its stored config; then its
-- status when it cannot be decided ('not_configured', 'exceeds_limit'), else nil and its algorithm.
local function limit_of(i)
    local base = 6 * i - 4
    local name, limit, interval, rate = ARGV[base + 1], ARGV[base + 3], ARGV[base + 4], ARGV[base + 5]
    local stored_in
    if name == '' then
        stored_in = KEYS[2 * i - 1]
        local stored = redis.call('HMGET', stored_in, 'algorithm', 'limit', 'interval', 'rate')
        if not stored[1] then
            whole(ARGV[base + 2], 'permits', 1, MAX_COUNT)
            return { limit = 0, status = 'not_configured' }
        end
        name, limit, interval, rate = stored[1], stored[2], stored[3], stored[4]
    end
    -- One check for the three fields (checks cost calls; the message is built only when one fails).
    local n_limit, n_interval, n_rate = tonumber(limit), tonumber(interval), tonumber(rate)
    if not (n_limit and n_interval and n_rate and n_limit % 1 == 0 and n_interval % 1 == 0 and n_rate % 1 == 0
            and n_limit >= 1 and n_limit <= MAX_COUNT and n_interval >= 1 and n_interval <= 2 ^ 52
            and n_rate >= 1 and n_rate <= MAX_COUNT) then
        reject_quota(stored_in, limit, interval, rate)
    end
    local algorithm = ALGORITHMS[name]
    if not algorithm then
        reject((stored_in and 'stored ' or '') .. 'algorithm (not in this script)', name)
    end
    if n_limit * n_interval > 2 ^ 52 then
        reject('limit × interval (must stay below 2^52 for exact arithmetic)', n_limit)
    end
    local permits, lease = whole(ARGV[base + 2], 'permits', 1, MAX_COUNT), ARGV[base + 6]
    -- The form of the sixth argument, where the algorithm takes one for this operation.
    local pattern = algorithm.ids and algorithm.ids[operation]
    if pattern and (#lease > 64 or not string.match(lease, pattern)) then
        reject('lease (an id of letters, digits, _ or -, at most 64; a token "<permits>:<id>" to release)', lease)
    end
    local record = {
        key = KEYS[2 * i], permits = permits, limit = n_limit, interval = n_interval, rate = n_rate, lease = lease,
        allowed = false, retry_after = 0, remaining = 0, reset = 0, reset_after = 0,
        -- The status, if this limit cannot be decided, and the algorithm.
        status = false, algorithm = algorithm,
    }
    if operation ~= 'refund' and permits > n_limit then
        record.status = 'exceeds_limit'
    end
    return record
end

-- Every limit is read and checked before the first write.
local limits, commit = {}, operation == 'limit'
for i = 1, count do
    local limit = limit_of(i)
    limits[i] = limit
    commit = commit and not limit.status
end

for i = 1, count do
    local limit = limits[i]
    local algorithm = limit.algorithm
    if limit.status then
        -- Not decided (see limit_of): nothing to report but the limit, when it is known.
        limit.remaining, limit.reset, limit.retry_after = 0, 0, 0
    elseif operation == 'refund' then
        local held = algorithm.refund(limit, now, grace)
        -- The standing after the refund: what one permit would find (no grant id: nothing is logged).
        limit.permits, limit.lease = 1, ''
        algorithm.decide(limit, now)
        limit.retry_after = 0
        limit.status = held == false and 'not_held' or 'refunded'
    else
        algorithm.decide(limit, now)
        commit = commit and limit.allowed
    end
end

-- Preallocated for the usual single limit: growing a table costs an allocation per doubling.
local reply = count == 1 and { false, false, false, false, false, false } or {}
for i = 1, count do
    local limit = limits[i]
    local algorithm, status, remaining, reset, lease = limit.algorithm, limit.status, limit.remaining, limit.reset, ''
    if status then
        -- Decided above: a refund, or a limit that could not be decided.
    elseif not limit.allowed then
        status = 'denied'
    elseif not commit then
        status = 'allowed'
    else
        algorithm.commit(limit, now, grace)
        status, remaining, reset = 'granted', remaining - limit.permits, limit.reset_after
        if algorithm.leases then
            lease = limit.permits .. ':' .. limit.lease
        end
    end
    local at = 6 * i - 6
    reply[at + 1], reply[at + 2], reply[at + 3] = status, limit.limit, remaining
    reply[at + 4], reply[at + 5], reply[at + 6] = reset, limit.retry_after, lease
end
return reply
