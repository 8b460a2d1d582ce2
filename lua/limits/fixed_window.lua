-- Fixed window: at most `limit` permits in each window [k × interval, (k + 1) × interval) of unix ms. Cheap and
-- simple, but a client can take `limit` at the end of one window and `limit` again at the start of the next.
--
-- State: string 'fw:<k>:<count>', the window in the value because only the script knows the server's time. The key
-- expires when its window ends. A denial is one GET; a grant adds one SET, KEEPTTL unless it starts the window.
-- The tag 'fw:' marks the layout; any other value is refused (foreign_value.lua). Why not INCRBY:
-- docs/design/scripts.md.
--
-- A grant's receipt is '<permits>:<k>'. A refund gives the permits back only while k is the current window: giving
-- an ended window's permits to the current one would let it count more than the limit.

--@decision

-- The current window, its count, and whether it is the stored one. A stored window after `now`'s (a caller's clock
-- behind Redis's) stays current.
local window = now / interval
window = window - window % 1
local value = redis.call('GET', key) or ''
local stored_text, count = string.match(value, '^fw:(%d+):(%d+)$')
if value ~= '' and not stored_text then
    --@inline limits/string_tag.lua
    --@inline limits/foreign_value.lua
end
local stored = stored_text and stored_text + 0
if stored and stored >= window then
    window, count, stored = stored, count + 0, true
else
    count, stored = 0, false
end
if operation == 'refund' then
    local granted_in = string.find(mark, '^%d+$') and mark + 0
    if not granted_in or granted_in > window then
        error({ err = 'ERR edgelimit: invalid ' .. RECEIPT_MARK .. ': ' .. mark })
    end
    held = granted_in == window and count > 0
    if held then
        count = count > permits and count - permits or 0
        if count <= 0 then
            redis.call('DEL', key)
        else
            redis.call('SET', key, string.format('fw:%d:%d', window, count), 'KEEPTTL')
        end
        stored = count > 0
    end
    permits = 1
end
local window_end = (window + 1) * interval
remaining = limit - count
allowed = permits <= remaining
retry_after = allowed and 0 or window_end - now
remaining = remaining > 0 and remaining or 0
reset = count > 0 and window_end or now
reset_after = window_end

--@grant

if stored then
    -- Only the count is printed, by concatenation ('%.14g', exact below 2^32): cheaper than string.format.
    redis.call('SET', key, 'fw:' .. stored_text .. ':' .. count + permits, 'KEEPTTL')
else
    redis.call('SET', key, string.format('fw:%d:%d', window, count + permits), 'PX', window_end - now + grace)
end
granted_mark = window
