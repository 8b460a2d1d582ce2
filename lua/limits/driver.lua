-- The `limits` script: several limits in one call, or a quota stored in Redis; each algorithm is wrapped by
-- entry.lua. Every limit gives a verdict first, and only if all allow are all recorded: a request denied by one
-- limit consumes from none.
--
--   KEYS     two per limit: its config hash (read only when the limit's algorithm argument is ''), its state key
--   ARGV[1]  'limit' (decide and record), 'peek' (decide, record nothing), 'refund' (give a grant back)
--   ARGV[2]  unix ms, or '' for the Redis server's clock (the default); both read by prelude.lua
--   then six per limit: algorithm ('' = read the config hash), permits, limit, interval (ms), rate, lease
--     lease: for a concurrency or sliding log limit, a fresh random id naming the grant ('limit'); the receipt of
--            the grant to give back ('refund', permits then being the receipt's)
--
-- The reply is flat (one table is cheaper than one per limit), six entries per limit: status, limit, remaining,
-- reset, retry_after, receipt or ''.
--   granted        allowed and recorded; its receipt names the grant for a refund (see prelude.lua)
--   allowed        would be allowed, recorded nothing (a peek, or another limit denied)
--   denied         not allowed; retry_after is the exact wait (an upper bound for concurrency)
--   refunded       permits given back; not_held: nothing was (the grant's permits had freed, refilled or left the
--                  counted windows, or its lease was released)
--   exceeds_limit  more permits than the limit can ever grant; not_configured: no stored config
-- Either of the last two makes the whole call record nothing.

-- The call: ARGV[1] is the operation, ARGV[2] unix ms or '' for the server's clock.
local operation = ARGV[1]
if operation ~= 'limit' and operation ~= 'peek' and operation ~= 'refund' then
    reject('operation (limit, peek or refund)', operation)
end
local now = clock(ARGV[2])
local grace = ARGV[2] ~= '' and EXPLICIT_TIME_GRACE_MS or 0

-- The request's permits and quota as numbers, checked in one test (calls cost); on failure a clean error names the
-- first bad field and its source (`stored_in`, the config hash, or nil for arguments). On a refund it also checks
-- the receipt and returns its mark: one of another form, other permits or more than the limit is no grant of this
-- limit, refused before anything is written.
local function request_of(permits, limit, interval, rate, lease, stored_in)
    local n_permits, n_limit, n_interval, n_rate = tonumber(permits), tonumber(limit), tonumber(interval),
        tonumber(rate)
    if n_permits and n_limit and n_interval and n_rate and n_permits % 1 == 0 and n_limit % 1 == 0
        and n_interval % 1 == 0 and n_rate % 1 == 0 and n_permits >= 1 and n_permits <= MAX_COUNT and n_limit >= 1
        and n_limit <= MAX_COUNT and n_interval >= 1 and n_rate >= 1 and n_rate <= MAX_COUNT
        and n_limit * n_interval <= 2 ^ 52 then
        if operation == 'refund' then
            local receipt_permits, mark = string.match(lease, '^(%d+):([%w_%-]+)$')
            if not mark or #mark > 64 or receipt_permits + 0 ~= n_permits or n_permits > n_limit then
                reject('receipt (as a grant returned it: "<permits>:<mark>", its permits the refund\'s and at most '
                    .. 'the limit ' .. n_limit .. ')', string.sub(lease, 1, 100))
            end
            return n_permits, n_limit, n_interval, n_rate, mark
        end
        return n_permits, n_limit, n_interval, n_rate
    end
    whole(permits, 'permits', 1, MAX_COUNT)
    local source = stored_in and ('stored config in ' .. stored_in .. ', field ') or 'argument '
    for _, field in ipairs({ { 'limit', limit, MAX_COUNT }, { 'interval (ms)', interval, 2 ^ 52 },
                             { 'rate', rate, MAX_COUNT } }) do
        if not whole_number(field[2], 1, field[3]) then
            reject(source .. field[1], field[2])
        end
    end
    reject('limit × interval (must stay below 2^52 for exact arithmetic)', limit)
end

-- The tag each string algorithm's state starts with.
local STRING_TAGS = { token_bucket = 'tb', gcra = 'gcra', fixed_window = 'fw', sliding_window = 'sw' }

-- Which string algorithm wrote `value`, by its tag; nil for a value no edgelimit algorithm writes.
local function string_algorithm_tag(value)
    --@inline limits/string_tag.lua
    return tag
end

-- Each algorithm's function (entry.lua), by the name the arguments and stored configs use.
local ALGORITHMS = {}

--@algorithms

local count = #KEYS / 2
if count < 1 or count % 1 ~= 0 then
    reject('number of keys (two per limit: config, state)', #KEYS)
end
if #ARGV ~= 2 + 6 * count then
    reject('number of arguments (2, then 6 per limit)', #ARGV)
end
-- A refund writes as it decides (see prelude.lua): with one limit per call, nothing is written before every check.
if operation == 'refund' and count ~= 1 then
    reject('number of limits to refund (one per call)', count)
end

-- The i-th limit: a record of its checked request, quota and algorithm, from its arguments or its stored config,
-- and its status when it cannot be decided ('not_configured', 'exceeds_limit'), else false.
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
    local lease = ARGV[base + 6]
    local permits, n_limit, n_interval, n_rate, mark = request_of(ARGV[base + 2], limit, interval, rate, lease,
        stored_in)
    local algorithm = ALGORITHMS[name]
    if not algorithm then
        reject((stored_in and 'stored ' or '') .. 'algorithm (not in this script)', name)
    end
    if stored_in then
        -- A stored quota whose algorithm changed may find another algorithm's state (a log under a string
        -- algorithm, a string under a log, another tag): it means nothing now, so it is dropped, the one write
        -- before every check (if the call then fails, it is only gone sooner). Anything untagged is foreign state,
        -- left for WRONGTYPE or foreign_value.lua to report. A quota in the arguments never forgives it.
        local kind = redis.call('TYPE', KEYS[2 * i]).ok
        local logs = name == 'concurrency' or name == 'sliding_log'
        local other_string = false
        if kind == 'string' and not logs then
            local tag = string_algorithm_tag(redis.call('GET', KEYS[2 * i]))
            other_string = tag and tag ~= STRING_TAGS[name]
        end
        -- Dropped only by a decision (a peek writes nothing), and only when the state key is this config's limiter's
        -- (`<prefix>:{<name>}:<id>`, or `<prefix>:v2{<id>}:<name>`), so no config can wipe another limiter's state.
        local prefix, limiter_name = string.match(stored_in, '^(.*):{([^{}]*)}$')
        local state = KEYS[2 * i]
        local own = prefix and (string.sub(state, 1, #stored_in + 1) == stored_in .. ':'
            or (string.sub(state, 1, #prefix + 4) == prefix .. ':v2{'
                and string.sub(state, -(#limiter_name + 2)) == '}:' .. limiter_name))
        local other = (kind == 'zset' and not logs) or (kind == 'string' and logs) or other_string
        if own and operation ~= 'peek' and other then
            redis.call('DEL', state)
        end
    end
    return {
        key = KEYS[2 * i], permits = permits, limit = n_limit, interval = n_interval, rate = n_rate,
        lease = lease, mark = mark, algorithm = algorithm,
        status = operation ~= 'refund' and permits > n_limit and 'exceeds_limit',
    }
end

-- Every limit is read and checked before any is decided. A state key named twice is refused: both would be decided
-- on one reading and both granted, twice the permits past one check.
local limits, commit, named = {}, operation == 'limit', {}
for i = 1, count do
    if named[KEYS[2 * i]] then
        reject('state key (named twice in one call: decide a limit once, with the permits summed)', KEYS[2 * i])
    end
    named[KEYS[2 * i]] = true
    local limit = limit_of(i)
    limits[i] = limit
    commit = commit and not limit.status
end

for _, limit in ipairs(limits) do
    if limit.status then
        -- Not decided (see limit_of): nothing to report but the limit, when it is known.
        limit.remaining, limit.reset, limit.retry_after = 0, 0, 0
    else
        local held
        limit.allowed, limit.retry_after, limit.remaining, limit.reset, limit.reset_after, held, limit.grant =
            limit.algorithm(operation, limit.key, limit.permits, limit.limit, limit.interval, limit.rate, limit.lease,
                limit.mark, now, grace)
        if operation == 'refund' then
            limit.status, limit.retry_after = held and 'refunded' or 'not_held', 0
        end
        commit = commit and limit.allowed
    end
end

local reply = {}
for i, limit in ipairs(limits) do
    -- A status already set was decided above: a refund, or a limit that could not be decided.
    local status, remaining, reset, token = limit.status, limit.remaining, limit.reset, ''
    if not status then
        if not limit.allowed then
            status = 'denied'
        elseif not commit then
            status = 'allowed'
        else
            token = limit.grant()
            status, remaining, reset = 'granted', remaining - limit.permits, limit.reset_after
        end
    end
    local at = 6 * i - 6
    reply[at + 1], reply[at + 2], reply[at + 3] = status, limit.limit, remaining
    reply[at + 4], reply[at + 5], reply[at + 6] = reset, limit.retry_after, token
end
return reply
