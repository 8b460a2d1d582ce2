-- Sliding window counter (Cloudflare's and Upstash's approximation): the previous window's count, weighted by how
-- much of it the sliding window still covers, plus the current window's, must stay within `limit`. O(1) memory. It
-- assumes the previous window's requests were spread evenly: a burst at a window's end then steady traffic lets up
-- to nearly twice the limit through in one interval (tests/tests/over_admission.rs). Use GCRA or the sliding log
-- where that matters. With e ms elapsed in the current window, a request is allowed when
--   previous × (interval − e) + (current + permits) × interval <= limit × interval
-- in whole numbers: no rounding (Upstash floors the weighted count, which admits a little more).
--
-- State: string 'sw:<k>:<current>:<previous>', both windows in one key: one GET, one SET (PX when it starts a
-- window, else KEEPTTL). The key expires at the end of the next window, when its current count stops counting. The
-- tag 'sw:' marks the layout; any other value is refused (foreign_value.lua).
--
-- A grant's receipt is '<permits>:<k>'. A refund gives the permits back to window k's count while it still counts
-- (the current or the previous window), never to another window.

--@decision

-- The window, elapsed ms in it, the two counts at `now`, and whether the stored window is this one. A stored window
-- after `now`'s (a caller's clock behind Redis's) stays current.
local window = now / interval
window = window - window % 1
local elapsed = now - window * interval
local value = redis.call('GET', key) or ''
local stored_text, current, previous_text = string.match(value, '^sw:(%d+):(%d+):(%d+)$')
if value ~= '' and not stored_text then
    --@inline limits/string_tag.lua
    --@inline limits/foreign_value.lua
end
local stored, previous = stored_text and stored_text + 0, previous_text
if not stored or stored < window - 1 then
    stored, current, previous = false, 0, 0
elseif stored == window - 1 then
    stored, current, previous = false, 0, current + 0
else
    window, elapsed, current, previous = stored, now - stored * interval, current + 0, previous + 0
    elapsed, stored = elapsed > 0 and elapsed or 0, true
end
if operation == 'refund' then
    local granted_in = string.find(mark, '^%d+$') and mark + 0
    if not granted_in or granted_in > window then
        error({ err = 'ERR edgelimit: invalid ' .. RECEIPT_MARK .. ': ' .. mark })
    end
    if granted_in == window then
        held = current > 0
        current = current > permits and current - permits or 0
    elseif granted_in == window - 1 then
        held = previous > 0
        previous = previous > permits and previous - permits or 0
    else
        held = false
    end
    if held then
        if current <= 0 and previous <= 0 then
            redis.call('DEL', key)
        elseif stored then
            redis.call('SET', key, string.format('sw:%d:%d:%d', window, current, previous), 'KEEPTTL')
        else
            redis.call('SET', key, string.format('sw:%d:%d:%d', window, current, previous), 'PX',
                (window + 2) * interval - now + grace)
        end
        stored = current > 0 or previous > 0
    end
    permits = 1
end
-- Room left, in units of 1 / interval permits, with the current count and with this request.
local room = limit * interval - previous * (interval - elapsed) - current * interval
remaining = room - room % interval
allowed = room >= permits * interval
remaining = remaining > 0 and remaining / interval or 0
reset = current > 0 and (window + 2) * interval or previous > 0 and (window + 1) * interval or now
reset_after = (window + 2) * interval
retry_after = 0
if not allowed then
    -- The exact ms until `permits` fit: later in this window as the previous window's weight falls; else in the
    -- next window, where the current count becomes the weighted one; else two windows on.
    local free = (limit - current - permits) * interval
    local at = interval
    if free >= 0 and previous > 0 then
        at = interval - (free - free % previous) / previous
    end
    if at < interval then
        retry_after = window * interval + at - now
    else
        at = 0
        if current > 0 then
            free = (limit - permits) * interval
            at = interval - (free - free % current) / current
            at = at > 0 and at or 0
        end
        retry_after = (at < interval and (window + 1) * interval + at or (window + 2) * interval) - now
    end
end

--@grant

if stored then
    -- Only the current count is printed, by concatenation ('%.14g', exact below 2^32): cheaper than string.format.
    redis.call('SET', key, 'sw:' .. stored_text .. ':' .. current + permits .. ':' .. previous_text, 'KEEPTTL')
else
    redis.call('SET', key, string.format('sw:%d:%d:%d', window, current + permits, previous), 'PX',
        (window + 2) * interval - now + grace)
end
granted_mark = window
