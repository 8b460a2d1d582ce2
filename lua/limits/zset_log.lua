-- A log of grants in a zset, shared by the algorithms that keep one (concurrency, sliding log): after prelude.lua,
-- before those algorithms' files (see src/limit/scripts.rs).
--
-- One member per grant, whatever its permits: '<position>:<permits>:<grant id>', scored with the unix ms at which
-- the grant frees. Positions number the permits of the log: a grant of k permits at position p holds the positions
-- [p, p + k), and positions grow with the score (the zset orders members by score, then by name; the position is
-- zero-padded to 16 digits, so that among equal scores name order is position order too). So, whatever the weights:
--   permits held   = the end of the last grant - the position of the first: two ranked reads;
--   the wait for a denied request needing `need` more permits to free = until the grant holding position
--                    first + need - 1 frees: a search over ranks (one read when all grants have the same weight,
--                    O(log n) reads otherwise);
--   freed grants go by score range, and the key expires when its last grant frees.
-- Positions stay gapless: a grant removed before it frees (a refund, a released lease) moves the positions of the
-- grants after it down, and a grant that frees before some already logged (an explicit clock that went back, a
-- lowered interval) moves theirs up. Each costs O(grants moved); on the server clock with a steady quota only a
-- refund or a release moves any, and only those granted after it.

-- What names a grant (checked before anything is written): letters, digits, _ or -.
local GRANT_ID = '^[%w_%-]+$'

-- A grant's receipt, which gives it back: '<permits>:<expiry>-<grant id>' (log_grant).
local RECEIPT = '^%d+:%d+%-[%w_%-]+$'

-- Positions stay below this (2^53 has 16 digits, the width of a member's position): see log_grant.
local MAX_POSITION = 2 ^ 52

-- Rejects a grant id or receipt that does not have the form `pattern` (checked before anything is written).
local function check_lease(lease, pattern)
    if #lease > 64 or not string.match(lease, pattern) then
        reject('lease (an id of letters, digits, _ or -, at most 64; a receipt "<permits>:<expiry>-<id>" to give '
            .. 'back)', lease)
    end
end

local function member_of(position, permits, id)
    return string.format('%016d:%d:%s', position, permits, id)
end

-- A member's position, permits and grant id. A member in no known layout (state written by something else, or by
-- an older edgelimit that logged one member per permit) is a clean error, not a Lua error on nil.
local function parse_member(member)
    local position, permits, id = string.match(member, '^(%d+):(%d+):(.+)$')
    if not position then
        error({ err = 'WRONGTYPE edgelimit: the log holds a member in no known layout (' .. member .. '): written '
            .. 'by something else or an older edgelimit; it expires by itself, or reset the identifier' })
    end
    return position + 0, permits + 0, id
end

-- Runs `command key …` over `items` in batches: unpack has a stack limit.
local function in_batches(command, key, items)
    for first = 1, #items, 1000 do
        redis.call(command, key, unpack(items, first, math.min(first + 999, #items)))
    end
end

-- Moves the positions of the grants from rank `from` on by `delta`, renaming their members: O(grants moved).
local function shift_positions(key, from, delta)
    local items = redis.call('ZRANGE', key, from, -1, 'WITHSCORES')
    local old, new = {}, {}
    for i = 1, #items, 2 do
        local position, permits, id = parse_member(items[i])
        old[#old + 1] = items[i]
        new[#new + 1] = items[i + 1]
        new[#new + 1] = member_of(position + delta, permits, id)
    end
    -- All removed before any is added: a new name may be an old name of a grant further on.
    in_batches('ZREM', key, old)
    in_batches('ZADD', key, new)
end

-- The log at `now`, after dropping the grants that have freed: permits held, the first grant's position, and when
-- the last grant frees (`now` when none is held).
local function log_at(key, now)
    redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
    local first = redis.call('ZRANGE', key, 0, 0)[1]
    if not first then
        return 0, 0, now
    end
    local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
    local first_position = parse_member(first)
    local last_position, last_permits = parse_member(last[1])
    return last_position + last_permits - first_position, first_position, last[2] + 0
end

-- When the grant holding position `target` frees (`first_position` <= target < first_position + held). The first
-- guess is where the target would be if every grant had the same weight: then it is the answer.
local function frees_at(key, target, first_position, held)
    local low, high = 0, redis.call('ZCARD', key) - 1
    local rank = (target - first_position) * (high + 1) / held
    rank = math.min(rank - rank % 1, high)
    while true do
        local item = redis.call('ZRANGE', key, rank, rank, 'WITHSCORES')
        local position, permits = parse_member(item[1])
        if target < position then
            high = rank - 1
        elseif target >= position + permits then
            low = rank + 1
        else
            return item[2] + 0
        end
        rank = (low + high - (low + high) % 2) / 2
    end
end

-- The verdict on `permits` at `now` (allowed, retry_after, remaining, reset, reset_after), and the log's standing for
-- log_grant (held, first_position, last_expiry): allowed while the permits held plus these stay within the limit.
-- The wait for a denied request is until enough of the soonest-freeing permits have freed: exact if nothing frees
-- early.
local function log_verdict(key, permits, limit, interval, now)
    local held, first_position, last_expiry = log_at(key, now)
    local remaining = limit - held
    local allowed = permits <= remaining
    local retry_after = 0
    if not allowed then
        retry_after = frees_at(key, first_position + held + permits - limit - 1, first_position, held) - now
    end
    return allowed, retry_after, remaining > 0 and remaining or 0, last_expiry,
        math.max(last_expiry, now + interval), held, first_position
end

-- Logs a grant of `permits` named `id`, freeing at now + interval, after the log's standing at `now` (from
-- log_verdict); the key then expires at `reset_after` (the verdict's). Returns the grant's receipt mark:
-- '<expiry>-<id>', which finds it again (log_remove).
local function log_grant(key, permits, interval, id, now, grace, reset_after, held, first_position, last_expiry)
    local expiry = now + interval
    local position = first_position + held
    if expiry < last_expiry then
        -- It frees before grants already logged: it goes before them, and they move up.
        local rank = redis.call('ZCOUNT', key, '-inf', expiry)
        position = parse_member(redis.call('ZRANGE', key, rank, rank)[1])
        shift_positions(key, rank, permits)
    elseif position + permits > MAX_POSITION then
        -- Positions grow with every grant while the key lives: start them again from 0 (once per 2^52 permits).
        shift_positions(key, 0, -first_position)
        position = held
    end
    redis.call('ZADD', key, expiry, member_of(position, permits, id))
    redis.call('PEXPIRE', key, reset_after - now + grace)
    return expiry .. '-' .. id
end

-- Removes the grant of `permits` named by `mark` ('<expiry>-<id>', log_grant's) if it is still held at `now`;
-- returns whether it was. The grants after it move down, so that what is held stays exact.
local function log_remove(key, permits, mark, now)
    local expiry, id = string.match(mark, '^(%d+)%-(.+)$')
    if not expiry or expiry + 0 <= now then
        return false
    end
    for _, member in ipairs(redis.call('ZRANGEBYSCORE', key, expiry, expiry)) do
        local _, held_permits, held_id = parse_member(member)
        if held_id == id and held_permits == permits then
            local rank = redis.call('ZRANK', key, member)
            redis.call('ZREM', key, member)
            shift_positions(key, rank, -permits)
            return true
        end
    end
    return false
end

-- The decision of an algorithm that keeps a log (the --@decision section, see prelude.lua): on a refund it first
-- gives back the grant that the receipt `lease` names (`held`: whether it was still held), then decides on one
-- permit; otherwise it decides on `permits`. Returns held, the permits decided on, log_verdict's values.
local function log_decision(operation, key, permits, limit, interval, lease, now)
    local held = true
    if operation == 'refund' then
        check_lease(lease, RECEIPT)
        local count, mark = string.match(lease, '^(%d+):(.+)$')
        held, permits = log_remove(key, count + 0, mark, now), 1
    elseif operation == 'limit' then
        check_lease(lease, GRANT_ID)
    end
    return held, permits, log_verdict(key, permits, limit, interval, now)
end
