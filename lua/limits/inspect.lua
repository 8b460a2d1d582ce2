-- Reads limits' state, writing nothing: for tools that show it (the playground, through Ratelimit.state). One call
-- reads the clock and every key together, so what it returns is one consistent moment of the server's time.
--
--   KEYS     one state key per limit
--   ARGV[1]  unix ms, or '' for the Redis server's clock (the default)
--   ARGV[2]  for a permit log, the most permits to list (the soonest-freeing first)
--   then one per key: 'log' (a permit log zset, lua/limits/zset_log.lua) or 'value' (a string: the other algorithms)
--
-- Reply: {now, then one entry per key}. An entry is {ms until the key expires (-2: no key, -1: no expiry), then
-- for 'value' the string ('' when there is none), for 'log' the permits held and then member, frees-at pairs of the
-- first of them}.

local now = clock(ARGV[1])
local most = whole(ARGV[2], 'most permits to list', 0, 100000)
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
        -- A permit freeing at exactly `now` is free (zset_log.lua drops scores <= now), hence the open bound.
        local held_from = '(' .. now
        entry[2] = redis.call('ZCOUNT', key, held_from, '+inf')
        local listed = redis.call('ZRANGEBYSCORE', key, held_from, '+inf', 'WITHSCORES', 'LIMIT', 0, most)
        for _, item in ipairs(listed) do
            entry[#entry + 1] = item
        end
    else
        reject('kind of state (log or value)', kind)
    end
    reply[#reply + 1] = entry
end
return reply
