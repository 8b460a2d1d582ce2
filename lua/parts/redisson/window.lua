-- Redisson's layout, the window as it stands at `now`: after prelude.lua, for the scripts that read it (acquire,
-- available, release).

-- Total permits carried by log members.
local function permits_in(members)
    local total = 0
    for _, member in ipairs(members) do
        local _, permits = struct.unpack('Bc0I', member)
        total = total + permits
    end
    return total
end

-- Permits available at `now`, after dropping grants that left the window. A missing counter (first use, evicted) or
-- one above what the log allows is rebuilt from the log instead of failing (Redisson crashes on a nil here). An
-- evicted log under a surviving counter is not detected: capacity stays reduced (never exceeded) until the counter
-- expires; detecting it would cost a command on every decision.
local function refresh(limiter, now)
    local horizon = now - limiter.interval
    local value = tonumber(redis.call('GET', limiter.value_key))
    local expired = redis.call('ZRANGEBYSCORE', limiter.log_key, '-inf', horizon)
    if #expired > 0 then
        redis.call('ZREMRANGEBYSCORE', limiter.log_key, '-inf', horizon)
    end
    local released = permits_in(expired)
    if value == nil or value + released > limiter.rate then
        -- Rare: first use, an evicted key, or writes from an older client. O(log), once.
        value = limiter.rate - permits_in(redis.call('ZRANGE', limiter.log_key, 0, -1))
        redis.call('SET', limiter.value_key, value, 'PX', limiter.state_ttl)
    elseif released > 0 then
        value = value + released
        -- KEEPTTL: a plain SET would drop the key's TTL and leave it behind forever.
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
