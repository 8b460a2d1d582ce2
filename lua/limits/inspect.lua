-- The `inspect` script: reads limits' state, writing nothing, for tools that show it (Ratelimit.state). The clock
-- and every key are read in one call: one consistent moment of the server's time.
--
--   KEYS     one state key per limit
--   ARGV[1]  unix ms, or '' for the Redis server's clock (the default)
--   ARGV[2]  for a log of grants, the most grants to list (the soonest-freeing first)
--   then one per key: 'log' (a log of grants, zset_member.lua) or 'value' (a string: the other algorithms)
--
-- Reply: {now, then one entry per key}. An entry is {ms until the key expires (-2: no key, -1: no expiry), then
-- for 'value' the string ('' when there is none), for 'log' the permits held and then member, frees-at pairs of the
-- first grants}.

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
        -- A grant freeing at exactly `now` is free (zset_log.lua drops scores <= now): an open bound.
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
