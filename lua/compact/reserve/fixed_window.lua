-- GENERATED, what edgelimit sends to Redis: lua/reserve/fixed_window.lua without its comments (run scripts/lua).
local function reject(what, value)
    error({ err = 'ERR edgelimit: invalid ' .. what .. ': ' .. string.sub(tostring(value), 1, 100) })
end
local function whole_number(text, low, high)
    local n = text and string.find(text, '^%d+$') and text + 0
    if n and n >= low and n <= high then
        return n
    end
    return nil
end
local function whole(text, what, low, high)
    return whole_number(text, low, high) or reject(what, text)
end
local function clock(text)
    if text ~= '' then
        return whole(text, 'time (unix ms, or empty for server time)', 0, 2 ^ 53)
    end
    local time = redis.call('TIME')
    local micros = time[2] % 1000000
    return time[1] * 1000 + (micros - micros % 1000) / 1000
end
local MAX_COUNT = 2 ^ 32 - 1
local EXPLICIT_TIME_GRACE_MS = 60000
local RECEIPT_MARK = 'receipt mark (not a grant of this limit: a time or window after the server clock, or no number)'
local function check_call(least, most)
    if not KEYS[1] or KEYS[2] or #ARGV < least or #ARGV > most then
        error({ err = 'ERR edgelimit: invalid call (1 key, the state key; ' .. least .. ' to ' .. most
            .. ' arguments): ' .. #KEYS .. ' keys, ' .. #ARGV .. ' arguments' })
    end
end
local function check_within_limit(request, permits, limit)
    if permits > limit then
        error({ err = 'ERR edgelimit: invalid request (permits at most the limit, ' .. limit .. '): '
            .. string.sub(request, 1, 100) })
    end
end
local function block_of(text, limit)
    local block, lead, horizon, rest = string.match(text, '^(%d+):(%d+):(%d+)(.*)$')
    local pace, only = '0', ''
    if rest and rest ~= '' then
        pace, only = string.match(rest, '^:(%d+)(.*)$')
    end
    if block and pace and (only == '' or only == ':only') then
        block, lead, horizon, pace = block + 0, lead + 0, horizon + 0, pace + 0
    else
        block = nil
    end
    if not block or block > limit or lead < 1 or lead > horizon or horizon > 60000 or pace > horizon then
        error({ err = 'ERR edgelimit: invalid block (<block>:<lead ms>:<horizon ms>[:<pace ms>[:only]], block from 0 '
            .. 'to the limit, lead from 1 to the horizon, horizon at most 60000, pace at most the horizon): '
            .. string.sub(text, 1, 100) })
    end
    return block, lead, horizon, pace, only == ':only'
end
check_call(2, 3)
local key, request, time = KEYS[1], ARGV[1], ARGV[3] or ''
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
check_within_limit(request, permits, limit)
local block, lead, horizon, _, only = block_of(ARGV[2], limit)
local now = clock(time)
local grace = time == '' and 0 or EXPLICIT_TIME_GRACE_MS
local operation, mark = 'limit', nil
-- luacheck: push ignore remaining reset reset_after held stored
local allowed, retry_after, remaining, reset, reset_after, held
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
-- luacheck: pop
local granted = allowed and not only and permits or 0
count = count + granted
local usable = math.min(window_end - 1 - now, horizon)
local left = limit - count
local reserved = usable >= lead and left > 0 and math.min(block, left) or 0
count = count + reserved
if granted + reserved > 0 then
    redis.call('SET', key, string.format('fw:%d:%d', window, count), 'PX', window_end - now + grace)
end
return { granted, now, reserved, usable, math.max(limit - count, 0), count > 0 and window_end or now, retry_after }
