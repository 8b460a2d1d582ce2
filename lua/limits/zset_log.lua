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
    return tonumber(member[2])
end

-- The verdict on `permits` at `now`: allowed while the permits held plus these stay within the limit. A grant logs
-- `permits` members named after `id`, each freeing at now + interval. The wait for a denied request is until enough
-- of the soonest-freeing permits have freed: exact if nothing frees early.
local function log_verdict(quota, key, now, permits, id)
    local held = held_at(key, now)
    local last_expiry = held > 0 and expiry_at(key, -1) or now
    local allowed = held + permits <= quota.limit
    local retry_after = 0
    if not allowed then
        retry_after = expiry_at(key, held + permits - quota.limit - 1) - now
    end
    local verdict = verdict_of(allowed, retry_after,
        { remaining = math.max(0, quota.limit - held), reset = last_expiry },
        { remaining = quota.limit - held - permits, reset = math.max(last_expiry, now + quota.interval) })
    -- Equal members would collapse into one and under-count. Checked here, not at commit: a script's writes are not
    -- rolled back when it fails, so every check must come before the first write.
    if allowed and id ~= '' and redis.call('ZSCORE', key, id .. '/1') then
        reject('grant id (already logged; use a fresh random id)', id)
    end
    verdict.commit = function(grace)
        local expiry, members = now + quota.interval, {}
        for i = 1, permits do
            members[#members + 1] = expiry
            members[#members + 1] = id .. '/' .. i
        end
        in_batches('ZADD', key, members)
        redis.call('PEXPIRE', key, verdict.after.reset - now + grace)
    end
    return verdict
end
