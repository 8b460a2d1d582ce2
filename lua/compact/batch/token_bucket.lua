-- GENERATED, what edgelimit sends to Redis: lua/batch/token_bucket.lua without its comments (run scripts/lua).
local MAX_COUNT = 2 ^ 32 - 1
local EXPLICIT_TIME_GRACE_MS = 60000
local RECEIPT_MARK = 'receipt mark (not a grant of this limit: a time or window after the server clock, or no number)'
local server_time = redis.call('TIME')
local seconds, micros = server_time[1], server_time[2] -- luacheck: ignore seconds micros
local now = micros + 0
now = seconds * 1000 + (now - now % 1000) / 1000
local operation, mark, grace = 'limit', nil, 0
local function decide(key, request, lease)
    local permits, limit, interval, rate = string.match(request, '^(%d+):(%d+):(%d+):(%d+)$')
    if permits then
        permits, limit, interval, rate = permits + 0, limit + 0, interval + 0, rate + 0
    end
    if not permits or permits < 1 or permits > MAX_COUNT or limit < 1 or limit > MAX_COUNT or interval < 1
        or rate < 1 or rate > MAX_COUNT or limit * interval > 2 ^ 52 then
        error({ err = 'ERR edgelimit: invalid request (<permits>:<limit>:<interval ms>[:<rate>], whole numbers from 1, '
            .. 'permits, limit and rate below 2^32, limit × interval at most 2^52): ' .. string.sub(request, 1, 100) })
    end
    if permits > limit then
        return { 5, 0, 0, 0 }
    end
    -- luacheck: push ignore reset_after granted_mark token held
    local allowed, retry_after, remaining, reset, reset_after, held, granted_mark, token
    -- luacheck: pop
    local full = limit * interval
    local value = redis.call('GET', key) or ''
    local units, at = string.match(value, '^tb:(%d+):(%d+)$')
    if value ~= '' and not units then
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
    if units then
        units, at = units + 0, at + 0
        units = units < full and units or full
        if now > at then
            local fill = full - units + rate - 1
            if now - at >= (fill - fill % rate) / rate then
                units = full
            else
                units = units + (now - at) * rate
            end
            at = now
        end
    else
        units, at = full, now
    end
    if operation == 'refund' then
        local granted = string.find(mark, '^%d+$') and mark + 0
        if not granted or granted > now then
            error({ err = 'ERR edgelimit: invalid ' .. RECEIPT_MARK .. ': ' .. mark })
        end
        local taken, elapsed = permits * interval, now - granted
        local span = taken + rate - 1
        local credit = elapsed < (span - span % rate) / rate and taken - elapsed * rate or 0
        held = credit > 0 and units < full
        if held then
            units = units + credit < full and units + credit or full
            if units >= full then
                redis.call('DEL', key)
            else
                local fill = full - units + rate - 1
                redis.call('SET', key, string.format('tb:%d:%d', units, at), 'PX',
                    at - now + (fill - fill % rate) / rate + grace)
            end
        end
        permits = 1
    end
    local left = units - permits * interval
    local fill = full - units + rate - 1
    allowed, remaining, reset = left >= 0, units - units % interval, now + (fill - fill % rate) / rate
    remaining = remaining > 0 and remaining / interval or 0
    fill = full - left + rate - 1
    reset_after = now + (fill - fill % rate) / rate
    if allowed then
        retry_after = 0
    else
        fill = rate - 1 - left
        retry_after = (fill - fill % rate) / rate
    end
    if not allowed then
        return 'd' .. seconds .. ':' .. micros .. ':' .. value
    end
    redis.call('SET', key, string.format('tb:%d:%d', left, at), 'PX', at - now + reset_after - now + grace)
    granted_mark = now
    return 'g' .. seconds .. ':' .. micros .. ':' .. value
end
local replies, count = {}, #KEYS
for i = 1, count do
    local decided, reply = pcall(decide, KEYS[i], ARGV[i], ARGV[count + i] or '')
    if not decided then
        reply = '!' .. (type(reply) == 'table' and reply.err or tostring(reply))
    end
    replies[i] = reply
end
return replies
