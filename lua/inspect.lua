-- lua/inspect.lua: GENERATED from lua/parts/ (src/lua/compose.rs). Edit the parts, then run scripts/lua.

-- Shared by every edgelimit script (prepended at compile time, see src/script.rs): argument checks and the clock.
--
-- A script's text runs from the top on every call, so every function defined here (and in the files after it) is a
-- new closure per call: keep them few. What costs most inside Redis is calling C (tonumber, string functions, every
-- redis.call) and allocating (tables, closures, new strings); plain Lua arithmetic is cheap. `bench/` measures it.

-- Rejects an argument no edgelimit client sends (a hand-made call): a clean Redis error reply naming the argument,
-- instead of a Lua runtime error with a stack trace. The value is quoted up to 100 bytes, as the single-limit
-- scripts quote theirs: an argument may be a megabyte.
local function reject(what, value)
    error({ err = 'ERR edgelimit: invalid ' .. what .. ': ' .. string.sub(tostring(value), 1, 100) })
end

-- A whole number within [low, high] from an argument (nil, or text): decimal digits only (tonumber alone would take
-- '0x1A', ' 12', '1e12'), or nil.
local function whole_number(text, low, high)
    local n = text and string.find(text, '^%d+$') and text + 0
    if n and n >= low and n <= high then
        return n
    end
    return nil
end

-- A whole number within [low, high] from an argument, or a clean error.
local function whole(text, what, low, high)
    return whole_number(text, low, high) or reject(what, text)
end

-- Unix ms: `text` when a caller passed an explicit time (tests, clients sharing a limiter with a clock-based
-- client), else the Redis server's clock, the default, because callers' clocks are skewed.
local function clock(text)
    if text ~= '' then
        return whole(text, 'time (unix ms, or empty for server time)', 0, 2 ^ 53)
    end
    local time = redis.call('TIME')
    local micros = time[2] % 1000000
    return time[1] * 1000 + (micros - micros % 1000) / 1000
end

-- The layout of a log of grants in a zset (concurrency, sliding log), as far as reading it goes: after
-- prelude.lua, before lua/parts/limits/zset_log.lua, which writes it; inspect.lua reads it too (see
-- src/lua/compose.rs).
--
-- One member per grant, whatever its permits: '<position>:<permits>:<run>:<grant id>', scored with the unix ms at
-- which the grant frees. The grant id is sealed (zset_log.lua's `sealed`): the receipt's id is not in the log.
--   position  Positions number the permits of the log: a grant of k permits at position p holds [p, p + k), and
--             positions grow with the score, gapless. The zset orders members by score, then by name, so the
--             position is written with 13 digits, zero-padded: among equal scores name order is position order too.
--   run       Where the run of one-permit grants that this grant ends (or starts after) begins: every grant from
--             position `run` up to this one holds one permit. It lets the common case, grants of one permit, count
--             what is held with ZCARD instead of reading the first grant (a ranked read costs 5 times a ZCARD).
-- So, whatever the weights:
--   permits held   = the end of the last grant - the position of the first; when the live grants all sit in the
--                    last grant's run, simply their number;
--   the wait for a denied request needing `need` more permits to free = until the grant holding position
--                    first + need - 1 frees: a search over ranks (one read when all grants have the same weight,
--                    O(log n) reads otherwise);
--   freed grants go by score range, and the key expires when its last grant frees.

-- A member's position, permits, run and grant id. A member in no known layout (state written by something else, or
-- by an older edgelimit that logged one member per permit) is a clean error, not a Lua error on nil.
local function parse_member(member)
    local position, permits, run, id = string.match(member, '^(%d+):(%d+):(%d+):(.+)$')
    if not position then
        error({ err = 'WRONGTYPE edgelimit: the log holds a member in no known layout (' .. member .. '): written '
            .. 'by something else or an older edgelimit; it expires by itself, or reset the identifier' })
    end
    return position + 0, permits + 0, run + 0, id
end

-- Reads limits' state, writing nothing: for tools that show it (the playground, through Ratelimit.state). One call
-- reads the clock and every key together, so what it returns is one consistent moment of the server's time. It
-- comes after lua/parts/limits/zset_member.lua, whose member layout it reads.
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
        -- A grant freeing at exactly `now` is free (zset_log.lua drops scores <= now), hence the open bound.
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
