-- Concurrency limiter (Stripe's "N in flight"): at most `limit` permits held at once. A grant is a lease that the
-- holder gives back with release; a lease not given back expires `interval` ms after it was granted, so a crashed
-- holder cannot leak capacity.
--
-- State: zset with one member per permit held, '<lease id>/<i>' for i = 1..permits, score = the lease's expiry
-- (unix ms). So ZCARD is what is held (O(1), whatever the limit), expired leases go by score range, and the wait for
-- a denied request is one ranked read. The lease token given to the holder is '<permits>:<lease id>'. The key
-- expires with its last lease.

-- Runs `command key …` over `items` in batches: unpack has a stack limit, and a lease may hold many permits.
local function in_batches(command, key, items)
    local done = 0
    for first = 1, #items, 1000 do
        done = done + redis.call(command, key, unpack(items, first, math.min(first + 999, #items)))
    end
    return done
end

-- Permits held at `now`, after dropping expired leases.
local function held_at(key, now)
    redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
    return redis.call('ZCARD', key)
end

-- Expiry of the lease member at `rank` (0 = soonest; -1 = last), or nil.
local function expiry_at(key, rank)
    local member = redis.call('ZRANGE', key, rank, rank, 'WITHSCORES')
    return tonumber(member[2])
end

ALGORITHMS.concurrency = {
    decide = function(quota, key, now, permits, lease_id)
        local held = held_at(key, now)
        local last_expiry = held > 0 and expiry_at(key, -1) or now
        local allowed = held + permits <= quota.limit
        local retry_after = 0
        if not allowed then
            -- Upper bound: holders may release sooner. Waits until enough of the soonest leases expire.
            retry_after = expiry_at(key, held + permits - quota.limit - 1) - now
        end
        local verdict = verdict_of(allowed, retry_after,
            { remaining = math.max(0, quota.limit - held), reset = last_expiry },
            { remaining = quota.limit - held - permits, reset = math.max(last_expiry, now + quota.interval) })
        if allowed then
            verdict.lease = permits .. ':' .. lease_id
            -- Checked here, not at commit: a script's writes are not rolled back when it fails, so every check
            -- must come before the first write.
            if lease_id ~= '' and redis.call('ZSCORE', key, lease_id .. '/1') then
                reject('lease id (already held; use a fresh random id)', lease_id)
            end
        end
        verdict.commit = function(grace)
            local expiry, members = now + quota.interval, {}
            for i = 1, permits do
                members[#members + 1] = expiry
                members[#members + 1] = lease_id .. '/' .. i
            end
            in_batches('ZADD', key, members)
            redis.call('PEXPIRE', key, verdict.after.reset - now + grace)
        end
        return verdict
    end,
    -- Releases the lease `token`; false when it is not held (already released, or expired).
    refund = function(quota, key, now, permits, grace, token)
        local count, lease_id = string.match(token, '^(%d+):(.+)$')
        local members = {}
        for i = 1, math.min(tonumber(count), quota.limit) do
            members[#members + 1] = lease_id .. '/' .. i
        end
        -- An expired lease is not held, even before anything dropped it.
        redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
        return in_batches('ZREM', key, members) > 0
    end,
}
