-- A log of permits in a zset, shared by the algorithms that keep one (concurrency, sliding log): after prelude.lua,
-- before those algorithms' files (see src/limit/scripts.rs).
--
-- One member per permit, '<grant id>/<i>' for i = 1..permits, score = the unix ms at which the permit frees. So
-- ZCARD is what is held (O(1), whatever the limit), freed permits go by score range, and the wait for a denied
-- request is one ranked read. The key expires when its last permit frees.

-- What names a grant's members (checked before anything is written): letters, digits, _ or -.
local GRANT_ID = '^[%w_%-]+$'

-- Why a grant whose id is already logged fails (log_verdict, log_grant).
local LOGGED_ID = 'grant id (already logged; use a fresh random id)'

-- Rejects a grant id or lease token that does not have the form `pattern` (checked before anything is written).
local function check_lease(lease, pattern)
    if #lease > 64 or not string.match(lease, pattern) then
        reject('lease (an id of letters, digits, _ or -, at most 64; a token "<permits>:<id>" to release)', lease)
    end
end

-- Runs `command key …` over `items` in batches: unpack has a stack limit, and one grant may hold many permits.
local function in_batches(command, key, items)
    local done = 0
    for first = 1, #items, 1000 do
        done = done + redis.call(command, key, unpack(items, first, math.min(first + 999, #items)))
    end
    return done
end

-- Permits held at `now`, after dropping the freed ones.
local function held_at(key, now)
    redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
    return redis.call('ZCARD', key)
end

-- When the permit at `rank` frees (0 = soonest; -1 = last), or nil.
local function expiry_at(key, rank)
    local member = redis.call('ZRANGE', key, rank, rank, 'WITHSCORES')
    return member[2] and member[2] + 0
end

-- The verdict on `permits` at `now` (allowed, retry_after, remaining, reset, reset_after): allowed while the
-- permits held plus these stay within the limit. The wait for a denied request is until enough of the soonest-freeing
-- permits have freed: exact if nothing frees early. Two reads are skipped when the request is granted at once
-- (grants_if_allowed, see prelude.lua):
--   the last expiry, for `reset`: when permits free exactly on time (`on_time`: a sliding log) on the server's clock,
--     a grant made now is the last to free, at now + interval (a lowered interval only makes the key, which then
--     expires at now + interval, drop grants that no longer count), and `reset` is not reported;
--   the check that the grant id is new, for one permit: log_grant's ZADD NX checks it, writing nothing if it is not.
local function log_verdict(key, permits, limit, interval, lease, now, grace, grants_if_allowed, on_time)
    local held = held_at(key, now)
    local remaining = limit - held
    local allowed = permits <= remaining
    local reset, reset_after = now, now + interval
    if held > 0 and not (allowed and grants_if_allowed and on_time and grace == 0) then
        reset = expiry_at(key, -1)
        reset_after = math.max(reset, reset_after)
    end
    -- Equal members would collapse into one and under-count. Checked here, not at the grant: a script's writes are
    -- not rolled back when it fails, so every check must come before the first write.
    if allowed and lease ~= '' and not (grants_if_allowed and permits == 1)
        and redis.call('ZSCORE', key, lease .. '/1') then
        reject(LOGGED_ID, lease)
    end
    return allowed, allowed and 0 or expiry_at(key, held + permits - limit - 1) - now, remaining > 0 and remaining or 0,
        reset, reset_after
end

-- Logs a grant: `permits` members named after its id, each freeing at now + interval; the key then expires at
-- `reset_after` (the verdict's).
local function log_grant(key, permits, interval, lease, now, grace, reset_after)
    local expiry = now + interval
    if permits == 1 then
        -- NX: an id already logged keeps its member, nothing is written, and the call fails (see log_verdict).
        if redis.call('ZADD', key, 'NX', expiry, lease .. '/1') == 0 then
            reject(LOGGED_ID, lease)
        end
    else
        local members = {}
        for i = 1, permits do
            members[2 * i - 1] = expiry
            members[2 * i] = lease .. '/' .. i
        end
        in_batches('ZADD', key, members)
    end
    redis.call('PEXPIRE', key, reset_after - now + grace)
end
