-- Fixed window: at most `limit` permits in each window [k × interval, (k + 1) × interval) of unix ms. Cheap and
-- simple, but a client can take `limit` at the end of one window and `limit` again at the start of the next.
--
-- State: string 'fw:<k>:<count>'. The window is in the value, not in the key's name, because only the script knows
-- the server's time. The key expires when its window ends. A denied request counts nothing (one GET); a grant adds
-- one SET, which keeps the key's expiry (KEEPTTL: setting one costs about as much as the SET itself) unless it
-- starts the window. The tag 'fw:' says whose value it is: another algorithm's value, or one of no edgelimit
-- algorithm, is refused (foreign_value.lua; a stored quota that changed its algorithm has the old state dropped
-- first, by driver.lua).
--
-- Why this layout stays (instructions per decision, bench/instructions.mjs, thousands, granted / denied: this one
-- 52.1 / 41.3; @upstash/ratelimit's one INCRBY 32.1 / 33.4, and the goal that plus one TIME, 8.3). A number per window
-- (tag × 2^33 + count, exact in Lua below 2^53) counts with one INCRBY, but a denial must then take it back (a
-- DECRBY): 45.6 / 47.4; read first (GET, then INCRBY), about 49 / 43. Either way one path pays two commands where the
-- peer pays one (about 4–4.5 each), and a new layout pays a key of its own plus the previous layout's key in every
-- call, so that clients of a release before count the same grants during a rolling upgrade (about 2). The one
-- conditional increment Redis has, BITFIELD … OVERFLOW FAIL on the permits left, costs about 8 more than INCRBY.
--
-- A grant's receipt is '<permits>:<k>', its window. A refund gives the permits back to that window only while it is
-- the current one: a window that has ended no longer limits anything, and giving its permits to the current window
-- would let the current window count more than the limit.

--@decision

-- The current window, the permits counted in it, and whether that is the stored window. A stored window after
-- `now`'s (a caller's clock behind Redis's) stays the current one.
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
    -- The stored window as it was read: only the count is printed (a concatenated number prints as '%.14g', exact
    -- for counts below 2^32), which costs less than string.format.
    redis.call('SET', key, 'fw:' .. stored_text .. ':' .. count + permits, 'KEEPTTL')
else
    redis.call('SET', key, string.format('fw:%d:%d', window, count + permits), 'PX', window_end - now + grace)
end
granted_mark = window
