-- Redisson's layout, the window as it stands at `now`: after prelude.lua and log.lua, for the scripts that read it
-- (acquire, available, release).

-- Total permits carried by log members.
local function permits_in(members)
    local total = 0
    for _, member in ipairs(members) do
        local _, permits = grant_of(member)
        total = total + permits
    end
    return total
end

-- Permits available at `now`, after dropping grants that left the window. The counter is rebuilt from the log when
-- missing, negative, above what the log leaves free (ZCARD stands for the permits held: a lower bound), or below
-- the rate with no log at all; so no state a Redisson client leaves fails, over-admits or sticks. Otherwise
-- O(expired grants) plus one ZCARD. The cases: docs/design/scripts.md, "Redisson's layout".
local function refresh(limiter, now)
    local horizon = now - limiter.interval
    local value = tonumber(redis.call('GET', limiter.value_key))
    local expired = redis.call('ZRANGEBYSCORE', limiter.log_key, '-inf', horizon)
    -- Read (and checked) before they leave the log: a damaged member stops the call with nothing removed.
    local released = permits_in(expired)
    if #expired > 0 then
        redis.call('ZREMRANGEBYSCORE', limiter.log_key, '-inf', horizon)
    end
    local logged = redis.call('ZCARD', limiter.log_key)
    if value == nil or value < 0 or value + released + logged > limiter.rate
        or (value + released < limiter.rate and logged == 0) then
        local rebuilt, trimmed = rebuild(limiter)
        if #trimmed > 0 then
            -- Held permits that have left the window count for nothing: dropped, so the field does not grow with
            -- every trim.
            local field = 'edgelimitHeld:' .. limiter.log_key
            for score, permits in string.gmatch(redis.call('HMGET', KEYS[1], field)[1] or '', '(%d+):(%d+)') do
                if tonumber(score) > horizon then
                    trimmed[#trimmed + 1] = score .. ':' .. permits
                end
            end
            redis.call('HSET', KEYS[1], field, table.concat(trimmed, ','))
        end
        return rebuilt
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
