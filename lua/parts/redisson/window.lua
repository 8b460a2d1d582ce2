-- Redisson's layout, the window as it stands at `now`: after prelude.lua and log.lua, for the scripts that read it
-- (acquire, available, release).

-- Total permits carried by log members.
local function permits_in(members)
    local total = 0
    for _, member in ipairs(members) do
        local _, permits = struct.unpack('Bc0I', member)
        total = total + permits
    end
    return total
end

-- Permits available at `now`, after dropping grants that left the window. Every state a Redisson client can leave is
-- read without failing, over-admitting or sticking:
--   - no counter (first use, or deleted) while the log holds grants: rebuilt from the log (Redisson would take the
--     whole rate again);
--   - a counter above the rate, or one that the expiring grants would push above it (Redisson's release only bumps
--     the counter): rebuilt from the log, at most the rate;
--   - a negative counter (older edgelimit's lowered rates): rebuilt;
--   - a counter below the rate with no log at all (the log expired or was deleted under it; Redisson then denies
--     forever, or fails on a nil): nothing is in use, so the full rate.
-- Otherwise O(expired grants), plus one EXISTS when the window is not full.
local function refresh(limiter, now)
    local horizon = now - limiter.interval
    local value = tonumber(redis.call('GET', limiter.value_key))
    local expired = redis.call('ZRANGEBYSCORE', limiter.log_key, '-inf', horizon)
    if #expired > 0 then
        redis.call('ZREMRANGEBYSCORE', limiter.log_key, '-inf', horizon)
    end
    local released = permits_in(expired)
    if value == nil or value < 0 or value + released > limiter.rate
        or (value + released < limiter.rate and redis.call('EXISTS', limiter.log_key) == 0) then
        return rebuild(limiter)
    end
    if released > 0 then
        value = value + released
        -- KEEPTTL: a plain SET would drop the key's lifetime.
        redis.call('SET', limiter.value_key, value, 'KEEPTTL')
    end
    return value
end

-- When the window is full again: the newest grant's expiry, or now for an empty log.
local function full_again_at(limiter, now)
    local newest = redis.call('ZRANGE', limiter.log_key, -1, -1, 'WITHSCORES')
    if #newest == 0 then
        return now
    end
    return tonumber(newest[2]) + limiter.interval
end
