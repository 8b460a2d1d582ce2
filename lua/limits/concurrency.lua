-- Concurrency limiter (Stripe's "N in flight"): at most `limit` permits held at once. A grant is a lease that the
-- holder gives back with release; a lease not given back expires `interval` ms after it was granted, so a crashed
-- holder cannot leak capacity.
--
-- State: zset of leases, member = the lease token '<permits>:<id>' (the id is random, from the client), score =
-- expiry (unix ms). Expired leases are dropped by score range. Counting what is held reads the live leases: at most
-- `limit` of them, since each holds at least one permit. The key expires with its last lease.

-- Live leases at `now` as {token, permits, expiry}, soonest expiry first, and the permits they hold.
local function live_leases(key, now)
    redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
    local flat = redis.call('ZRANGE', key, 0, -1, 'WITHSCORES')
    local leases, held = {}, 0
    for i = 1, #flat, 2 do
        local permits = tonumber(string.match(flat[i], '^(%d+):')) or 1
        leases[#leases + 1] = { permits = permits, expiry = tonumber(flat[i + 1]) }
        held = held + permits
    end
    return leases, held
end

ALGORITHMS.concurrency = {
    decide = function(quota, key, now, permits, lease_id)
        local leases, held = live_leases(key, now)
        local last_expiry = now
        if #leases > 0 then
            last_expiry = leases[#leases].expiry
        end
        local allowed = held + permits <= quota.limit
        local retry_after = 0
        if not allowed then
            -- Upper bound: holders may release sooner. Waits for the soonest expiries that free enough.
            local freed, excess = 0, held + permits - quota.limit
            for _, lease in ipairs(leases) do
                freed = freed + lease.permits
                if freed >= excess then
                    retry_after = lease.expiry - now
                    break
                end
            end
        end
        local verdict = verdict_of(allowed, retry_after,
            { remaining = math.max(0, quota.limit - held), reset = last_expiry },
            { remaining = quota.limit - held - permits, reset = math.max(last_expiry, now + quota.interval) })
        if allowed then
            verdict.lease = permits .. ':' .. lease_id
            -- Checked here, not at commit: a script's writes are not rolled back when it fails, so every check
            -- must come before the first write.
            if lease_id ~= '' and redis.call('ZSCORE', key, verdict.lease) then
                reject('lease id (already held; use a fresh random id)', lease_id)
            end
        end
        verdict.commit = function(grace)
            redis.call('ZADD', key, now + quota.interval, verdict.lease)
            redis.call('PEXPIRE', key, verdict.after.reset - now + grace)
        end
        return verdict
    end,
    -- Releases the lease `token`; false when it is not held (already released, or expired).
    refund = function(quota, key, now, permits, grace, token)
        -- An expired lease is not held, even before anything dropped it.
        redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
        return redis.call('ZREM', key, token) == 1
    end,
}
