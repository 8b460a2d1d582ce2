-- The arguments every script that reserves permits reads alike (src/limit/reserved.rs): after the family's prelude,
-- before the script's own file. Reserving runs on a small share of decisions (a client asks again only when its
-- permits run out), so these may be functions.

-- Raises a clean error unless the call has one key and `least` to `most` arguments.
local function check_call(least, most)
    if not KEYS[1] or KEYS[2] or #ARGV < least or #ARGV > most then
        error({ err = 'ERR edgelimit: invalid call (1 key, the state key; ' .. least .. ' to ' .. most
            .. ' arguments): ' .. #KEYS .. ' keys, ' .. #ARGV .. ' arguments' })
    end
end

-- The request and its quota, ARGV[1], as the algorithm's single-limit script reads it: '<permits>:<limit>:<interval
-- ms>', and ':<rate>' when `rated` (token bucket, GCRA). Returns permits, limit, interval and rate (1 when not
-- rated), or raises a clean error. Permits above the limit are refused (the client refuses them before sending).
local function request_of(text, rated)
    local permits, limit, interval, rate = string.match(text, '^(%d+):(%d+):(%d+)' .. (rated and ':(%d+)$' or '$'))
    if permits then
        permits, limit, interval, rate = permits + 0, limit + 0, interval + 0, rated and rate + 0 or 1
    end
    if not permits or permits < 1 or limit < 1 or limit > MAX_COUNT or permits > limit or interval < 1 or rate < 1
        or rate > MAX_COUNT or limit * interval > 2 ^ 52 then
        error({ err = 'ERR edgelimit: invalid request (<permits>:<limit>:<interval ms>' .. (rated and ':<rate>' or '')
            .. ', whole numbers from 1, permits at most the limit, limit' .. (rated and ' and rate' or '')
            .. ' below 2^32, limit × interval at most 2^52): ' .. string.sub(text, 1, 100) })
    end
    return permits, limit, interval, rate
end

-- The block a client asks for with its request, ARGV[2]: '<block>:<lead ms>:<horizon ms>', the permits to reserve
-- besides the request's (0 to the limit), the least time from now that a reserved permit must leave the client to
-- use it (1 to the horizon: a round trip at least), and how far from now reserved permits may reach (at most 60000
-- ms): the client asks for what it expects to use in that time. Returns the three numbers, or raises a clean error.
local function block_of(text, limit)
    local block, lead, horizon = string.match(text, '^(%d+):(%d+):(%d+)$')
    if block then
        block, lead, horizon = block + 0, lead + 0, horizon + 0
    end
    if not block or block > limit or lead < 1 or lead > horizon or horizon > 60000 then
        error({ err = 'ERR edgelimit: invalid block (<block>:<lead ms>:<horizon ms>, block from 0 to the limit, lead '
            .. 'from 1 to the horizon, horizon at most 60000): ' .. string.sub(text, 1, 100) })
    end
    return block, lead, horizon
end
