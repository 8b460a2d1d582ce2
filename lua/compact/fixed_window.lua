-- GENERATED, what edgelimit sends to Redis: lua/fixed_window.lua without its comments (run scripts/lua).
local MAX_COUNT = 2 ^ 32 - 1
local EXPLICIT_TIME_GRACE_MS = 60000
local RECEIPT_MARK = 'receipt mark (not a grant of this limit: a time or window after the server clock, or no number)'
local key, request, lease = KEYS[1], ARGV[1], ARGV[2]
local operation, time, extra = 'limit', '', nil
if lease then
    operation, time, extra = ARGV[3] or operation, ARGV[4] or time, ARGV[5]
else
    lease = ''
end
if not key or not request or extra then
    error({ err = 'ERR edgelimit: invalid call (1 key, the state key; 1 to 4 arguments): ' .. #KEYS .. ' keys, '
        .. #ARGV .. ' arguments' })
end
local permits, limit, interval = string.match(request, '^(%d+):(%d+):(%d+)$')
local rate = 1
if permits then
    permits, limit, interval = permits + 0, limit + 0, interval + 0
end
if not permits or permits < 1 or permits > MAX_COUNT or limit < 1 or limit > MAX_COUNT or interval < 1
    or rate < 1 or rate > MAX_COUNT or limit * interval > 2 ^ 52 then
    error({ err = 'ERR edgelimit: invalid request (<permits>:<limit>:<interval ms>[:<rate>], whole numbers from 1, '
        .. 'permits, limit and rate below 2^32, limit × interval at most 2^52): ' .. string.sub(request, 1, 100) })
end
local now, mark
local seconds, micros, grace = '', '', 0 -- luacheck: ignore seconds micros
if time == '' then
    local server_time = redis.call('TIME')
    seconds, micros = server_time[1], server_time[2]
    local us = micros + 0
    now = seconds * 1000 + (us - us % 1000) / 1000
else
    now = string.find(time, '^%d+$') and time + 0
    if not now or now > 2 ^ 53 then
        error({ err = 'ERR edgelimit: invalid time (unix ms, or empty for server time): ' .. string.sub(time, 1, 100) })
    end
    grace = EXPLICIT_TIME_GRACE_MS
end
if operation == 'refund' then
    local receipt_permits
    receipt_permits, mark = string.match(lease, '^(%d+):([%w_%-]+)$')
    if not mark or #mark > 64 or receipt_permits + 0 ~= permits or permits > limit then
        error({ err = 'ERR edgelimit: invalid receipt (as a grant returned it: "<permits>:<mark>", its permits the '
            .. 'refund\'s and at most the limit ' .. limit .. '): ' .. string.sub(lease, 1, 100) })
    end
elseif operation ~= 'limit' and operation ~= 'peek' then
    error({ err = 'ERR edgelimit: invalid operation (limit, peek or refund): ' .. string.sub(operation, 1, 100) })
elseif permits > limit then
    return { 5, 0, 0, 0 }
end
-- luacheck: push ignore reset_after granted_mark token
local allowed, retry_after, remaining, reset, reset_after, held, granted_mark, token
-- luacheck: pop
local window = now / interval
window = window - window % 1
local value = redis.call('GET', key) or ''
local stored_text, count = string.match(value, '^fw:(%d+):(%d+)$')
if value ~= '' and not stored_text then
    local tag = string.match(value, '^(%l+):%d+:%d+$')
    if not (tag == 'tb' or tag == 'gcra' or tag == 'fw') then
        tag = string.find(value, '^sw:%d+:%d+:%d+$') and 'sw' or nil
    end
    if tag then
        error({ err = 'WRONGTYPE edgelimit: the key holds the state of another algorithm (' .. tag
            .. '): two limits share this name with different algorithms; give each its own name' })
    end
    error({ err = 'WRONGTYPE edgelimit: the key holds a value of no edgelimit algorithm '
        .. '(another program\'s, or damaged: ' .. #value .. ' bytes)' })
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
if operation == 'refund' then
    return { held and 3 or 4, remaining, reset, 0 }
elseif operation == 'peek' then
    return { allowed and 2 or 0, remaining, reset, retry_after }
elseif not allowed then
    return 'd' .. seconds .. ':' .. micros .. ':' .. value
end
if stored then
    redis.call('SET', key, 'fw:' .. stored_text .. ':' .. count + permits, 'KEEPTTL')
else
    redis.call('SET', key, string.format('fw:%d:%d', window, count + permits), 'PX', window_end - now + grace)
end
granted_mark = window
return 'g' .. seconds .. ':' .. micros .. ':' .. value
