-- GENERATED, what edgelimit sends to Redis: lua/inspect.lua without its comments (run scripts/lua).
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
local function parse_member(member)
    local position, permits, run, id = string.match(member, '^(%d+):(%d+):(%d+):(.+)$')
    if not position then
        error({ err = 'WRONGTYPE edgelimit: the log holds a member in no known layout (' .. member .. '): written '
            .. 'by something else or an older edgelimit; it expires by itself, or reset the identifier' })
    end
    return position + 0, permits + 0, run + 0, id
end
local now = clock(ARGV[1])
local most = whole(ARGV[2], 'most grants to list', 0, 100000)
if #ARGV ~= 2 + #KEYS then
    reject('number of arguments (2, then one kind per key)', #ARGV)
end
local reply = { now }
for i, key in ipairs(KEYS) do
    local kind = ARGV[2 + i]
    local entry = { redis.call('PTTL', key) }
    if kind == 'value' then
        entry[2] = redis.call('GET', key) or ''
    elseif kind == 'log' then
        local listed = redis.call('ZRANGEBYSCORE', key, '(' .. now, '+inf', 'WITHSCORES', 'LIMIT', 0,
            math.max(most, 1))
        local held = 0
        if listed[1] then
            local last_position, last_permits = parse_member(redis.call('ZRANGE', key, -1, -1)[1])
            held = last_position + last_permits - parse_member(listed[1])
        end
        entry[2] = held
        for j = 1, math.min(#listed, 2 * most) do
            entry[#entry + 1] = listed[j]
        end
    else
        reject('kind of state (log or value)', kind)
    end
    reply[#reply + 1] = entry
end
return reply
