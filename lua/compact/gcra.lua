-- GENERATED, what edgelimit sends to Redis: lua/gcra.lua without its comments (run scripts/lua).
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
local permits, limit, interval, rate = string.match(request, '^(%d+):(%d+):(%d+):(%d+)$')
if permits then
    permits, limit, interval, rate = permits + 0, limit + 0, interval + 0, rate + 0
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
if operation == 'refund' then
    return { held and 3 or 4, remaining, reset, 0 }
elseif operation == 'peek' then
    return { allowed and 2 or 0, remaining, reset, retry_after }
elseif not allowed then
    return 'd' .. seconds .. ':' .. micros .. ':' .. value
end
debt = full - left
local part = debt % rate
local whole_ms = now + (debt - part) / rate
if floor > now then
    part = part + rate * (FLOOR_MARK + whole_ms + 1 - floor)
end
local lifetime = debt + rate - 1
redis.call('SET', key, string.format('gcra:%d:%d', whole_ms, part), 'PX',
    (lifetime - lifetime % rate) / rate + grace)
granted_mark = now
return 'g' .. seconds .. ':' .. micros .. ':' .. value
