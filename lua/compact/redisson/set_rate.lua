-- GENERATED, what edgelimit sends to Redis: lua/redisson/set_rate.lua without its comments (run scripts/lua).
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
if #KEYS ~= 5 then
    reject('number of keys (expected 5: name, value, client value, permits, client permits)', #KEYS)
end
local client = string.sub(KEYS[3], #KEYS[1] + 10)
if KEYS[2] ~= '{' .. KEYS[1] .. '}:value' or KEYS[3] ~= KEYS[2] .. ':' .. client
    or KEYS[4] ~= '{' .. KEYS[1] .. '}:permits' or KEYS[5] ~= KEYS[4] .. ':' .. client then
    reject('keys (expected name, {name}:value, {name}:value:<client>, {name}:permits, {name}:permits:<client>)',
        table.concat(KEYS, ' '))
end
local function load_limiter()
    local config = redis.call('HMGET', KEYS[1], 'rate', 'interval', 'type', 'keepAliveTime')
    local rate, interval = tonumber(config[1]), tonumber(config[2])
    if not rate or not interval or not config[3] then
        return nil
    end
    if not (rate >= 1 and interval >= 1 and rate % 1 == 0 and interval % 1 == 0) then
        error({ err = 'WRONGTYPE edgelimit: the rate limiter\'s config holds rate ' .. tostring(config[1])
            .. ' and interval ' .. tostring(config[2]) .. ', not whole numbers of at least 1' })
    end
    local limiter = { rate = rate, interval = interval, keep_alive = tonumber(config[4]) or 0 }
    if config[3] == '1' then
        limiter.value_key, limiter.log_key = KEYS[3], KEYS[5]
    else
        limiter.value_key, limiter.log_key = KEYS[2], KEYS[4]
    end
    return limiter
end
local function touch(limiter)
    if limiter.keep_alive > 0 then
        redis.call('PEXPIRE', KEYS[1], limiter.keep_alive)
        redis.call('PEXPIRE', limiter.value_key, limiter.keep_alive)
        redis.call('PEXPIRE', limiter.log_key, limiter.keep_alive)
    else
        local ttl = redis.call('PTTL', KEYS[1])
        if ttl > 0 then
            redis.call('PEXPIRE', limiter.value_key, ttl)
            redis.call('PEXPIRE', limiter.log_key, ttl)
        end
    end
end
local function grant_of(member)
    local length = string.byte(member, 1)
    local id, permits
    if length and #member == length + 5 then
        id, permits = struct.unpack('Bc0I', member)
    end
    if not permits then
        error({ err = 'WRONGTYPE edgelimit: the rate limiter\'s log holds a member that is no grant (' .. #member
            .. ' bytes): a grant is struct.pack(\'Bc0I\', #id, id, permits)' })
    end
    return id, permits
end
local function log_grant(limiter, now, id, permits)
    local candidate, attempt = id, 0
    while redis.call('ZADD', limiter.log_key, 'NX', now, struct.pack('Bc0I', #candidate, candidate, permits)) == 0 do
        attempt = attempt + 1
        candidate = id .. '#' .. attempt
    end
end
local function rebuild(limiter)
    local members = redis.call('ZRANGE', limiter.log_key, 0, -1, 'WITHSCORES')
    local used = 0
    for i = 1, #members, 2 do
        local _, permits = grant_of(members[i])
        used = used + permits
    end
    local excess, trimmed, i = used - limiter.rate, {}, 1
    while excess > 0 do
        local id, permits = grant_of(members[i])
        redis.call('ZREM', limiter.log_key, members[i])
        local cut = math.min(permits, excess)
        if cut < permits then
            log_grant(limiter, tonumber(members[i + 1]), id, permits - cut)
        end
        trimmed[#trimmed + 1] = members[i + 1] .. ':' .. cut
        excess = excess - cut
        i = i + 2
    end
    local value = math.max(limiter.rate - used, 0)
    redis.call('SET', limiter.value_key, value, 'KEEPTTL')
    return value, trimmed
end
local rate = whole(ARGV[2], 'rate', 1, 2 ^ 32 - 1)
local interval = whole(ARGV[3], 'interval (ms)', 1, 2 ^ 53)
local keep_alive = whole(ARGV[5], 'keep-alive (ms)', 0, 2 ^ 53)
local mode, how = ARGV[4], ARGV[6]
if mode ~= '0' and mode ~= '1' then
    reject('type (0 overall, 1 per client)', mode)
end
if how ~= 'try' and how ~= 'set' and how ~= 'update' then
    reject("mode (try, set or update)", how)
end
local previous = load_limiter()
if how == 'try' and previous then
    return 0
end
if how == 'update' and redis.call('EXISTS', KEYS[1]) == 0 then
    return 0
end
redis.call('HSET', KEYS[1], 'rate', rate, 'interval', interval, 'type', mode, 'keepAliveTime', keep_alive)
if keep_alive > 0 then
    redis.call('PEXPIRE', KEYS[1], keep_alive)
elseif previous and previous.keep_alive > 0 then
    redis.call('PERSIST', KEYS[1])
    redis.call('PERSIST', previous.value_key)
    redis.call('PERSIST', previous.log_key)
end
local limiter = load_limiter()
local held_field = 'edgelimitHeld:' .. limiter.log_key
if how == 'update' and previous and previous.log_key == limiter.log_key then
    local horizon = clock(ARGV[1]) - limiter.interval
    redis.call('ZREMRANGEBYSCORE', limiter.log_key, '-inf', horizon)
    local held = redis.call('HMGET', KEYS[1], held_field)[1] or ''
    for score, permits in string.gmatch(held, '(%d+):(%d+)') do
        if tonumber(score) > horizon then
            log_grant(limiter, tonumber(score), 'held', tonumber(permits))
        end
    end
    local _, trimmed = rebuild(limiter)
    if #trimmed > 0 or held ~= '' then
        redis.call('HSET', KEYS[1], held_field, table.concat(trimmed, ','))
    end
    touch(limiter)
else
    redis.call('DEL', KEYS[2], KEYS[3], KEYS[4], KEYS[5])
    for _, log_key in ipairs({ KEYS[4], KEYS[5] }) do
        if redis.call('HMGET', KEYS[1], 'edgelimitHeld:' .. log_key)[1] then
            redis.call('HSET', KEYS[1], 'edgelimitHeld:' .. log_key, '')
        end
    end
end
return 1
