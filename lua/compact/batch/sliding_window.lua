-- GENERATED, what edgelimit sends to Redis: lua/batch/sliding_window.lua without its comments (run scripts/lua).
local MAX_COUNT = 2 ^ 32 - 1
local EXPLICIT_TIME_GRACE_MS = 60000
local RECEIPT_MARK = 'receipt mark (not a grant of this limit: a time or window after the server clock, or no number)'
local server_time = redis.call('TIME')
local seconds, micros = server_time[1], server_time[2] -- luacheck: ignore seconds micros
local now = micros + 0
now = seconds * 1000 + (now - now % 1000) / 1000
local operation, mark, grace = 'limit', nil, 0
local function decide(key, request, lease)
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
    if permits > limit then
        return { 5, 0, 0, 0 }
    end
    -- luacheck: push ignore reset_after granted_mark token held
    local allowed, retry_after, remaining, reset, reset_after, held, granted_mark, token
    -- luacheck: pop
    local window = now / interval
    window = window - window % 1
    local elapsed = now - window * interval
    local value = redis.call('GET', key) or ''
    local stored_text, current, previous_text = string.match(value, '^sw:(%d+):(%d+):(%d+)$')
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
    local room = limit * interval - previous * (interval - elapsed) - current * interval
    remaining = room - room % interval
    allowed = room >= permits * interval
    remaining = remaining > 0 and remaining / interval or 0
    reset = current > 0 and (window + 2) * interval or previous > 0 and (window + 1) * interval or now
    reset_after = (window + 2) * interval
    retry_after = 0
    if not allowed then
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
    if not allowed then
        return 'd' .. seconds .. ':' .. micros .. ':' .. value
    end
    if stored then
        redis.call('SET', key, 'sw:' .. stored_text .. ':' .. current + permits .. ':' .. previous_text, 'KEEPTTL')
    else
        redis.call('SET', key, string.format('sw:%d:%d:%d', window, current + permits, previous), 'PX',
            (window + 2) * interval - now + grace)
    end
    granted_mark = window
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
