-- The arguments every reserve script reads alike (src/limit/reserved.rs). Reserving is a small share of calls, so
-- these may be functions.

-- Raises a clean error unless the call has one key and `least` to `most` arguments.
local function check_call(least, most)
    if not KEYS[1] or KEYS[2] or #ARGV < least or #ARGV > most then
        error({ err = 'ERR edgelimit: invalid call (1 key, the state key; ' .. least .. ' to ' .. most
            .. ' arguments): ' .. #KEYS .. ' keys, ' .. #ARGV .. ' arguments' })
    end
end

-- A reserve script's request (checked by limits/request.lua) is also at most the limit: the client refuses a larger
-- one before sending, where the `<algorithm>` script answers exceeds_limit.
local function check_within_limit(request, permits, limit)
    if permits > limit then
        error({ err = 'ERR edgelimit: invalid request (permits at most the limit, ' .. limit .. '): '
            .. string.sub(request, 1, 100) })
    end
end

-- ARGV[2], '<block>:<lead ms>:<horizon ms>[:<pace ms>[:only]]': the permits to reserve besides the request's (0 to
-- the limit); the least time from now a reserved permit must leave the client (1 to the horizon: a round trip at
-- least); how far from now reserved permits may reach (at most 60000); for a sliding log, the time between this
-- client's requests (at most the horizon, else 0). ':only' reserves without taking the request, which the `limits`
-- script decided in the same round trip (src/limit/reserved/several.rs); the request then only sizes the block.
-- Returns the four numbers and whether the call reserves only, or raises a clean error.
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
