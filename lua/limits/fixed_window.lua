-- Fixed window: at most `limit` permits in each window [k × interval, (k + 1) × interval) of unix ms. Cheap and
-- simple, but a client can take `limit` at the end of one window and `limit` again at the start of the next.
--
-- State: string '<k>:<count>'. The window is in the value, not in the key's name, because only the script knows
-- the server's time. The key expires when its window ends. A denied request counts nothing (one GET); a grant adds
-- one SET … PX.

-- The current window and the permits counted in it. A stored window after `now`'s (a caller's clock behind
-- Redis's) stays the current one.
local function window_count(quota, key, now)
    local window = math.floor(now / quota.interval)
    local stored_window, count = string.match(redis.call('GET', key) or '', '^(%d+):(%d+)$')
    stored_window, count = tonumber(stored_window), tonumber(count)
    if stored_window and count and stored_window >= window then
        return stored_window, count
    end
    return window, 0
end

local function write_window(key, window, count, expires_at, now, grace)
    if count <= 0 then
        redis.call('DEL', key)
        return
    end
    redis.call('SET', key, string.format('%d:%d', window, count), 'PX', expires_at - now + grace)
end

ALGORITHMS.fixed_window = {
    decide = function(quota, key, now, permits)
        local window, count = window_count(quota, key, now)
        local window_end = (window + 1) * quota.interval
        local function standing(counted)
            return { remaining = math.max(0, quota.limit - counted), reset = counted > 0 and window_end or now }
        end
        local allowed = count + permits <= quota.limit
        local verdict = verdict_of(allowed, allowed and 0 or window_end - now,
            standing(count), standing(count + permits))
        verdict.commit = function(grace)
            write_window(key, window, count + permits, window_end, now, grace)
        end
        return verdict
    end,
    refund = function(quota, key, now, permits, grace)
        local window, count = window_count(quota, key, now)
        write_window(key, window, count - permits, (window + 1) * quota.interval, now, grace)
    end,
}
