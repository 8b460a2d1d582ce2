-- GENERATED, what edgelimit sends to Redis: lua/reserve/gcra.lua without its comments (run scripts/lua).
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
local permits, limit, interval, rate = string.match(request, '^(%d+):(%d+):(%d+):(%d+)$')
if permits then
    permits, limit, interval, rate = permits + 0, limit + 0, interval + 0, rate + 0
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
-- luacheck: push ignore remaining reset reset_after held
local allowed, retry_after, remaining, reset, reset_after, held
local debt, floor = 0, 0
local value = redis.call('GET', key) or ''
local ms, rem = string.match(value, '^gcra:(%d+):(%d+)$')
if value ~= '' and not ms then
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
local FLOOR_MARK = (2 ^ 32 - 2 ^ 32 % rate) / rate + 1
ms = ms and ms + 0
if ms and ms >= now then
    rem = rem + 0
    if rem < 2 ^ 32 then
        debt = (ms - now) * rate + (rem < rate and rem or rate - 1)
    else
        local part = rem % rate
        debt = (ms - now) * rate + part
        floor = ms + 1 + FLOOR_MARK - (rem - part) / rate
    end
end
if operation == 'refund' then
    local granted = string.find(mark, '^%d+$') and mark + 0
    if not granted or granted > now then
        error({ err = 'ERR edgelimit: invalid ' .. RECEIPT_MARK .. ': ' .. mark })
    end
    local taken, elapsed = permits * interval, now - granted
    local span = taken + rate - 1
    local credit = elapsed < (span - span % rate) / rate and taken - elapsed * rate or 0
    local least = floor > now and math.min((floor - now) * rate, debt) or 0
    held = credit > 0 and debt > least
    if held then
        debt = debt - credit > least and debt - credit or least
        if debt <= 0 then
            redis.call('DEL', key)
        else
            local part = debt % rate
            local whole_ms = now + (debt - part) / rate
            if floor > now then
                part = part + rate * (FLOOR_MARK + whole_ms + 1 - floor)
            end
            local lifetime = debt + rate - 1
            redis.call('SET', key, string.format('gcra:%d:%d', whole_ms, part), 'PX',
                (lifetime - lifetime % rate) / rate + grace)
        end
    end
    permits = 1
end
local full = limit * interval
local available = full - debt
local left = available - permits * interval
local fill = debt + rate - 1
allowed, remaining, reset = left >= 0, available - available % interval, now + (fill - fill % rate) / rate
remaining = remaining > 0 and remaining / interval or 0
fill = full - left + rate - 1
reset_after = now + (fill - fill % rate) / rate
if allowed then
    retry_after = 0
else
    fill = rate - 1 - left
    retry_after = (fill - fill % rate) / rate
end
-- luacheck: pop
local granted = allowed and not only and permits or 0
if granted > 0 then
    debt = full - left
end
local charged = debt > lead * rate and debt or lead * rate
local fits = full + horizon * rate - charged
fits = fits > 0 and (fits - fits % interval) / interval or 0
local reserved = block < fits and block or fits
if reserved > 0 then
    debt = charged + reserved * interval
end
if debt > 0 and (granted > 0 or reserved > 0) then
    if reserved > 0 then
        local slots_end = debt + rate - 1
        floor = math.max(floor, now + (slots_end - slots_end % rate) / rate)
    end
    local part = debt % rate
    local whole_ms = now + (debt - part) / rate
    if floor > now then
        part = part + rate * (FLOOR_MARK + whole_ms + 1 - floor)
    end
    local lifetime = debt + rate - 1
    redis.call('SET', key, string.format('gcra:%d:%d', whole_ms, part), 'PX',
        (lifetime - lifetime % rate) / rate + grace)
end
available = full - debt
fill = debt + rate - 1
return { granted, now, reserved, charged, available > 0 and (available - available % interval) / interval or 0,
    now + (fill - fill % rate) / rate, retry_after }
