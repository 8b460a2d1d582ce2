-- GENERATED, what edgelimit sends to Redis: lua/redisson/lifetime.lua without its comments (run scripts/lua).
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
local what = ARGV[2]
local ms = whole(ARGV[3], 'time (ms)', 0, 2 ^ 53)
if what ~= 'keep_alive' and what ~= 'expire' then
    reject('lifetime (keep_alive or expire)', what)
end
local limiter = load_limiter()
if not limiter then
    return 0
end
if what == 'keep_alive' then
    if ms > 0 and ms < limiter.interval then
        reject('keep-alive (at least the interval, ' .. limiter.interval .. ' ms)', ms)
    end
    redis.call('HSET', KEYS[1], 'keepAliveTime', ms)
end
for i = 1, 5 do
    if ms > 0 then
        redis.call('PEXPIRE', KEYS[i], ms)
    else
        redis.call('PERSIST', KEYS[i])
    end
end
return 1
