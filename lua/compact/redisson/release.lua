-- GENERATED, what edgelimit sends to Redis: lua/redisson/release.lua without its comments (run scripts/lua).
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
local function permits_in(members)
    local total = 0
    for _, member in ipairs(members) do
        local _, permits = grant_of(member)
        total = total + permits
    end
    return total
end
local function refresh(limiter, now)
    local horizon = now - limiter.interval
    local value = tonumber(redis.call('GET', limiter.value_key))
    local expired = redis.call('ZRANGEBYSCORE', limiter.log_key, '-inf', horizon)
    local released = permits_in(expired)
    if #expired > 0 then
        redis.call('ZREMRANGEBYSCORE', limiter.log_key, '-inf', horizon)
    end
    local logged = redis.call('ZCARD', limiter.log_key)
    if value == nil or value < 0 or value + released + logged > limiter.rate
        or (value + released < limiter.rate and logged == 0) then
        local rebuilt, trimmed = rebuild(limiter)
        if #trimmed > 0 then
            local field = 'edgelimitHeld:' .. limiter.log_key
            for score, permits in string.gmatch(redis.call('HMGET', KEYS[1], field)[1] or '', '(%d+):(%d+)') do
                if tonumber(score) > horizon then
                    trimmed[#trimmed + 1] = score .. ':' .. permits
                end
            end
            redis.call('HSET', KEYS[1], field, table.concat(trimmed, ','))
        end
        return rebuilt
    end
    if released > 0 then
        value = value + released
        redis.call('SET', limiter.value_key, value, 'KEEPTTL')
    end
    return value
end
local function full_again_at(limiter, now)
    local newest = redis.call('ZRANGE', limiter.log_key, -1, -1, 'WITHSCORES')
    if #newest == 0 then
        return now
    end
    return tonumber(newest[2]) + limiter.interval
end
local function limiter_and_permits(text)
    local limiter = load_limiter()
    if not limiter then
        return nil, nil, { 'not_configured', 0, 0, 0, 0, '' }
    end
    return limiter, whole(text, 'permits', 1, 2 ^ 32 - 1)
end
local limiter, wanted, refusal = limiter_and_permits(ARGV[2])
if refusal then
    return refusal
end
local now = clock(ARGV[1])
refresh(limiter, now)
local released = 0
while released < wanted do
    local newest = redis.call('ZRANGE', limiter.log_key, -1, -1, 'WITHSCORES')
    if #newest == 0 then
        break
    end
    local id, permits = grant_of(newest[1])
    redis.call('ZREM', limiter.log_key, newest[1])
    local give_back = math.min(permits, wanted - released)
    if give_back < permits then
        log_grant(limiter, tonumber(newest[2]), id, permits - give_back)
    end
    released = released + give_back
end
local available = redis.call('INCRBY', limiter.value_key, released)
touch(limiter)
return { 'refunded', limiter.rate, math.max(available, 0), full_again_at(limiter, now), 0, released }
