-- Fixed window: at most `limit` permits in each window [k × interval, (k + 1) × interval) of unix ms. Cheap and
-- simple, but a client can take `limit` at the end of one window and `limit` again at the start of the next.
--
-- State: string '<k>:<count>'. The window is in the value, not in the key's name, because only the script knows
-- the server's time. The key expires when its window ends. A denied request counts nothing (one GET); a grant adds
-- one SET, which keeps the key's expiry (KEEPTTL: setting one costs about as much as the SET itself) unless it
-- starts the window.

-- The current window, the permits counted in it, and whether that is the stored window. A stored window after
-- `now`'s (a caller's clock behind Redis's) stays the current one.
local function window_count(limit, now)
    local window = now / limit.interval
    window = window - window % 1
    local stored, count = string.match(redis.call('GET', limit.key) or '', '^(%d+):(%d+)$')
    stored = stored and stored + 0
    if stored and stored >= window then
        return stored, count + 0, true
    end
    return window, 0, false
end

local function write_window(limit, window, count, stored, now, grace)
    if count <= 0 then
        redis.call('DEL', limit.key)
    elseif stored then
        redis.call('SET', limit.key, string.format('%d:%d', window, count), 'KEEPTTL')
    else
        redis.call('SET', limit.key, string.format('%d:%d', window, count), 'PX',
            (window + 1) * limit.interval - now + grace)
    end
end

ALGORITHMS.fixed_window = {
    decide = function(limit, now)
        local window, count, stored = window_count(limit, now)
        local window_end = (window + 1) * limit.interval
        local remaining = limit.limit - count
        limit.allowed = limit.permits <= remaining
        limit.retry_after = limit.permits <= remaining and 0 or window_end - now
        limit.remaining = remaining > 0 and remaining or 0
        limit.reset = count > 0 and window_end or now
        limit.reset_after = window_end
        limit.window, limit.count, limit.stored = window, count, stored
    end,
    commit = function(limit, now, grace)
        write_window(limit, limit.window, limit.count + limit.permits, limit.stored, now, grace)
    end,
    refund = function(limit, now, grace)
        local window, count, stored = window_count(limit, now)
        write_window(limit, window, count - limit.permits, stored, now, grace)
    end,
}
