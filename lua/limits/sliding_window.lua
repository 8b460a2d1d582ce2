-- Sliding window counter (Cloudflare's and Upstash's approximation): the previous fixed window's count, weighted
-- by how much of it the sliding window still covers, plus the current window's count, must stay within `limit`.
-- O(1) memory whatever the rate. It assumes the previous window's requests were spread evenly: under steady
-- overload it holds the limit exactly, but a burst at the very end of one window followed by steady traffic lets
-- up to nearly twice the limit through in one interval-long span (measured: 1.95×, tests/tests/over_admission.rs).
-- Use GCRA or the sliding log where that matters.
--
-- Exactness of the arithmetic itself: with e ms elapsed in the current window, a request is allowed when
--   previous × (interval − e) + (current + permits) × interval <= limit × interval
-- all in whole numbers, so there is no rounding (Upstash floors the weighted count, which admits a little more).
--
-- State: one string '<k>:<current>:<previous>': both windows in one key, so in one Cluster slot by construction,
-- read with one GET and written with one SET … PX. The key expires when its current window stops counting, at the
-- end of the next window.

-- The window, elapsed ms in it, and the two counts at `now`.
local function sliding_counts(quota, key, now)
    local window = math.floor(now / quota.interval)
    local stored_window, current, previous = string.match(redis.call('GET', key) or '', '^(%d+):(%d+):(%d+)$')
    stored_window, current, previous = tonumber(stored_window), tonumber(current), tonumber(previous)
    if not stored_window or not current or not previous or stored_window < window - 1 then
        current, previous = 0, 0
    elseif stored_window == window - 1 then
        current, previous = 0, current
    else
        -- This window, or a later one (a caller's clock behind Redis's): that one stays current.
        window = stored_window
    end
    return window, math.max(0, now - window * quota.interval), current, previous
end

-- Exact ms until `permits` fit, when they do not fit now: later in this window as the previous window's weight
-- falls; else in the next window, where the current count becomes the weighted one; else two windows on.
local function sliding_retry_after(quota, now, window, current, previous, permits)
    local interval = quota.interval
    local room = (quota.limit - current - permits) * interval
    if room >= 0 and previous > 0 then
        local elapsed = interval - math.floor(room / previous)
        if elapsed < interval then
            return window * interval + elapsed - now
        end
    end
    local elapsed = 0
    if current > 0 then
        elapsed = math.max(0, interval - math.floor((quota.limit - permits) * interval / current))
    end
    if elapsed < interval then
        return (window + 1) * interval + elapsed - now
    end
    return (window + 2) * interval - now
end

local function write_sliding(quota, key, window, current, previous, now, grace)
    if current <= 0 and previous <= 0 then
        redis.call('DEL', key)
        return
    end
    redis.call('SET', key, string.format('%d:%d:%d', window, current, previous), 'PX',
        (window + 2) * quota.interval - now + grace)
end

ALGORITHMS.sliding_window = {
    decide = function(quota, key, now, permits)
        local window, elapsed, current, previous = sliding_counts(quota, key, now)
        local interval = quota.interval
        -- Room left, in units of 1 / interval permits, with `counted` in the current window.
        local function room(counted)
            return quota.limit * interval - previous * (interval - elapsed) - counted * interval
        end
        local function standing(counted)
            local reset = now
            if counted > 0 then
                reset = (window + 2) * interval
            elseif previous > 0 then
                reset = (window + 1) * interval
            end
            return { remaining = math.max(0, math.floor(room(counted) / interval)), reset = reset }
        end
        local allowed = room(current + permits) >= 0
        local retry_after = 0
        if not allowed then
            retry_after = sliding_retry_after(quota, now, window, current, previous, permits)
        end
        local verdict = verdict_of(allowed, retry_after, standing(current), standing(current + permits))
        verdict.commit = function(grace)
            write_sliding(quota, key, window, current + permits, previous, now, grace)
        end
        return verdict
    end,
    -- Gives back to the current window's count (grants from the previous window are part of its weighted count
    -- and are not given back).
    refund = function(quota, key, now, permits, grace)
        local window, _, current, previous = sliding_counts(quota, key, now)
        write_sliding(quota, key, window, math.max(0, current - permits), previous, now, grace)
    end,
}
