-- A log of permits in a zset, shared by the algorithms that keep one (concurrency, sliding log): after prelude.lua,
-- before those algorithms' files (see src/limit/scripts.rs).
--
-- One member per permit, '<grant id>/<i>' for i = 1..permits, score = the unix ms at which the permit frees. So
-- ZCARD is what is held (O(1), whatever the limit), freed permits go by score range, and the wait for a denied
-- request is one ranked read. The key expires when its last permit frees.

-- What names a grant's members (the driver checks it before anything is written): letters, digits, _ or -.
local GRANT_ID = '^[%w_%-]+$'

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

-- The verdict on limit.permits at `now`: allowed while the permits held plus these stay within the limit. The wait
-- for a denied request is until enough of the soonest-freeing permits have freed: exact if nothing frees early.
local function log_decide(limit, now)
    local key, permits = limit.key, limit.permits
    local held = held_at(key, now)
    local last_expiry = held > 0 and expiry_at(key, -1) or now
    local remaining = limit.limit - held
    limit.allowed = permits <= remaining
    limit.retry_after = permits <= remaining and 0 or expiry_at(key, held + permits - limit.limit - 1) - now
    limit.remaining = remaining > 0 and remaining or 0
    limit.reset = last_expiry
    limit.reset_after = math.max(last_expiry, now + limit.interval)
    -- Equal members would collapse into one and under-count. Checked here, not at commit: a script's writes are not
    -- rolled back when it fails, so every check must come before the first write.
    if limit.allowed and limit.lease ~= '' and redis.call('ZSCORE', key, limit.lease .. '/1') then
        reject('grant id (already logged; use a fresh random id)', limit.lease)
    end
end

-- Logs the grant: limit.permits members named after its id, each freeing at now + interval.
local function log_commit(limit, now, grace)
    local expiry, id, members = now + limit.interval, limit.lease, {}
    for i = 1, limit.permits do
        members[2 * i - 1] = expiry
        members[2 * i] = id .. '/' .. i
    end
    in_batches('ZADD', limit.key, members)
    redis.call('PEXPIRE', limit.key, limit.reset_after - now + grace)
end
