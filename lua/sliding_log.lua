-- lua/sliding_log.lua: GENERATED from lua/parts/ (src/lua/compose.rs). Edit the parts, then run scripts/lua.

-- The algorithm family, shared prelude: before the algorithms' files and the helpers they share (bucket.lua;
-- zset_member.lua and zset_log.lua). src/lua/compose.rs composes two kinds of script from the same files:
--   single.lua  one limit with its quota in the arguments, the common call: the algorithm's code runs inline,
--               straight-line, because inside Redis every function a script defines is a new closure on every call
--               and every Lua call, argument and table costs (bench/instructions.mjs counts it). These scripts do
--               not start with lua/parts/common.lua, and the token bucket, fixed window, sliding window and GCRA
--               scripts define no function at all (the logs' scripts do, for their helpers).
--   driver.lua  several limits at once, or a quota stored in Redis: after lua/parts/common.lua; entry.lua wraps each
--               algorithm in a function.
--
-- So an algorithm's sections below call no function of common.lua: what they need on a cold path (a refund's
-- receipt) they write inline, and they report a bad receipt with error() directly.
--
-- An algorithm file is its helpers (local functions), then two sections, each opened by a marker line:
--   --@decision  the verdict on `permits` at `now`. Before it, on a refund, it gives back what the receipt's grant
--                took and the algorithm's rule still allows (see its file; `held` false when that is nothing) and
--                then decides on one permit (lease ''): the standing after the refund. Otherwise it records nothing (a
--                permit log drops permits that have freed, which changes no verdict), so that every limit of a call
--                is decided before any is recorded; it checks the request's `lease` first.
--   --@grant     records the grant the decision allowed (run only when every limit of the call allows).
-- In scope (locals of the script, or the wrapping function's):
--   operation                                 'limit' (decide and record), 'peek' (decide only), 'refund'
--   key, permits, limit, interval, rate       the state key, the request, its quota (checked numbers)
--   lease                                     a concurrency or sliding log grant's fresh id ('limit'); the receipt
--                                             to refund ('refund'); else ''
--   mark                                      on a refund, the receipt's mark (checked by the frame: its form is
--                                             '<permits>:<mark>', its permits the refund's): what names the grant in
--                                             the algorithm's terms; else nil
--   now, grace                                unix ms; extra ms of expiry for state written at an explicit time
-- and the verdict, which the decision sets:
--   allowed, retry_after                      retry_after = ms until it could be allowed (0 if it is)
--   remaining, reset                          the standing without this request: permits left, and the unix ms at
--                                             which the limit is whole again if no request comes
--   reset_after                               `reset` with the grant (remaining is then remaining - permits)
--   held                                      false when a refund gave nothing back (the grant's permits had
--                                             freed, refilled or left the counted windows; a lease not held)
--   granted_mark, token                       set by the grant: its receipt is '<permits>:<mark>', the mark the
--                                             grant's unix ms (token bucket, GCRA), its window's index (fixed and
--                                             sliding window), both as the number granted_mark; for a log
--                                             (concurrency, sliding log) '<expiry>-<grant id>', granted_mark the
--                                             expiry and token the whole receipt. A refund names the grant by it, so
--                                             it gives back exactly what that grant took.
-- Locals the decision declares are the grant's to use.
--
-- All arithmetic is on whole numbers below 2^53, where Lua's doubles are exact: quotas are checked so that
-- limit × interval stays below 2^52 (by the frame), and no product below grows past that.

local MAX_COUNT = 2 ^ 32 - 1

-- State of a request made at an explicit time lives this much longer than it matters: that caller's clock may run
-- behind Redis's, and state must not expire in Redis's time while it still counts in the caller's. Under server
-- time (the default) keys vanish exactly when they stop mattering.
local EXPLICIT_TIME_GRACE_MS = 60000

-- Why a refund's receipt mark is refused by the algorithm that reads it (a whole number for the time and window
-- algorithms, never after the server's clock): a hand-made receipt, or another algorithm's.
-- Reported with error() as common.lua's reject does: 'ERR edgelimit: invalid ' .. RECEIPT_MARK .. ': ' .. mark.
local RECEIPT_MARK = 'receipt mark (not a grant of this limit: a time or window after the server clock, or no number)'

-- One limit whose quota comes with the request: the common call, and the cheapest script of the family. The
-- algorithm's file is spliced in at the markers (src/lua/compose.rs), so its code runs straight through. What a call
-- costs Redis is mostly per argument, per C call (tonumber, string functions, redis.call), per table and per
-- closure (bench/instructions.mjs counts it), so the common call (a decision on the server's clock) sends one
-- argument, or two for a log's grant id, and gets back four whole numbers:
--
--   KEYS[1]  the state key
--   ARGV[1]  the request and its quota, '<permits>:<limit>:<interval ms>' and, for token bucket and GCRA, ':<rate>'
--   ARGV[2]  the lease: a concurrency or sliding log grant's fresh id; on a refund the receipt to give back; or ''
--   ARGV[3]  the operation: 'limit' (decide and record; the default when absent), 'peek' (decide only), 'refund'
--   ARGV[4]  unix ms, or '' (the default when absent) for the Redis server's clock
--
-- The reply is {status, remaining, reset, x}: status 1 granted, 0 denied, 2 allowed (a peek), 3 refunded,
-- 4 not_held (a refund that gave nothing back), 5 exceeds_limit (more permits than the limit); remaining and
-- reset as driver.lua's; x is the grant's mark (see prelude.lua: its receipt is '<permits>:<x>', with
-- '-<grant id>' after it for a log) when granted, else retry_after (0 for a refund). The caller knows the limit.
-- But a grant or denial ('limit') of an algorithm that keeps a string (token bucket, fixed and sliding window,
-- GCRA) replies with text instead, what the decision read: 'g' (granted) or 'd' (denied), then the seconds of
-- TIME, ':', its microseconds, ':' (both '' at an explicit time) and the state key's value before the call ('' for
-- none). Turning numbers into a reply is what costs most after the commands (a table of them, or
-- their text), and from these the caller's model of the algorithm (src/limit/model) derives remaining, reset,
-- retry_after and the receipt exactly as the decision did; it checks that its verdict is the script's.

local key, request, lease = KEYS[1], ARGV[1], ARGV[2]
local operation, time, extra = 'limit', '', nil
if lease then
    operation, time, extra = ARGV[3] or operation, ARGV[4] or time, ARGV[5]
else
    lease = ''
end
if not key or not request or extra then
    error({ err = 'ERR edgelimit: invalid call (1 key, the state key; 1 to 4 arguments): ' .. #KEYS .. ' keys, '
        .. #ARGV .. ' arguments' })
end
local permits, limit, interval = string.match(request, '^(%d+):(%d+):(%d+)$')
local rate = 1
if permits then
    permits, limit, interval = permits + 0, limit + 0, interval + 0
end
-- The request's check, after its numbers are read from `request` (see src/lua/compose.rs): shared by the
-- single-limit frame (single.lua), the frame that decides several requests in one call (batch.lua) and the scripts
-- that reserve permits (lua/parts/reserve/).
if not permits or permits < 1 or permits > MAX_COUNT or limit < 1 or limit > MAX_COUNT or interval < 1
    or rate < 1 or rate > MAX_COUNT or limit * interval > 2 ^ 52 then
    error({ err = 'ERR edgelimit: invalid request (<permits>:<limit>:<interval ms>[:<rate>], whole numbers from 1, '
        .. 'permits, limit and rate below 2^32, limit × interval at most 2^52): ' .. string.sub(request, 1, 100) })
end
local now, mark
-- The server's clock as TIME gave it (seconds, microseconds), for a reply that carries it as text.
local seconds, micros, grace = '', '', 0 -- luacheck: ignore seconds micros
if time == '' then
    local server_time = redis.call('TIME')
    seconds, micros = server_time[1], server_time[2]
    local us = micros + 0
    now = seconds * 1000 + (us - us % 1000) / 1000
else
    now = string.find(time, '^%d+$') and time + 0
    if not now or now > 2 ^ 53 then
        error({ err = 'ERR edgelimit: invalid time (unix ms, or empty for server time): ' .. string.sub(time, 1, 100) })
    end
    grace = EXPLICIT_TIME_GRACE_MS
end
if operation == 'refund' then
    -- The receipt, as a grant returned it: '<permits>:<mark>', its permits the refund's and at most the limit.
    local receipt_permits
    receipt_permits, mark = string.match(lease, '^(%d+):([%w_%-]+)$')
    if not mark or #mark > 64 or receipt_permits + 0 ~= permits or permits > limit then
        error({ err = 'ERR edgelimit: invalid receipt (as a grant returned it: "<permits>:<mark>", its permits the '
            .. 'refund\'s and at most the limit ' .. limit .. '): ' .. string.sub(lease, 1, 100) })
    end
elseif operation ~= 'limit' and operation ~= 'peek' then
    error({ err = 'ERR edgelimit: invalid operation (limit, peek or refund): ' .. string.sub(operation, 1, 100) })
elseif permits > limit then
    return { 5, 0, 0, 0 }
end
-- The verdict, set by the decision (held only on a refund: unset, it reads as nothing given back), and the grant's
-- mark, set by the grant (a log's grant also sets its whole receipt, token, which the reply leaves to the caller).
-- (Some of them the reply of this script does not read, which is no fault: luacheck need not say so.)
-- luacheck: push ignore reset_after granted_mark token
local allowed, retry_after, remaining, reset, reset_after, held, granted_mark, token
-- luacheck: pop

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

-- A log of grants in a zset, shared by the algorithms that keep one (concurrency, sliding log): after
-- zset_member.lua, before those algorithms' files (see src/lua/compose.rs).
--
-- Its layout, one member per grant, is in zset_member.lua, which comes first.
--
-- Positions stay gapless: a grant removed before it frees (a refund, a released lease) moves the positions of the
-- grants after it down, and a grant that frees before some already logged (an explicit clock that went back, a
-- lowered interval) moves theirs up. Each costs O(grants moved); on the server clock with a steady quota only a
-- refund or a release moves any, and only those granted after it.
--
-- Every function defined here is a closure made on every call (see lua/parts/common.lua), so code that only some calls
-- need (the removal of a grant) is written inline where it runs, and the readers that only a denial or a log with
-- tranches booked ahead needs are made when first needed (log_readers). And a number that
-- becomes text by itself (an argument of redis.call, a concatenation) is printed as a double ('%.14g'), the most
-- expensive step of a decision here: constant arguments are written as text, and numbers as text go through one
-- string.format('%d'), which prints integers.

-- Positions stay below this (13 digits; see log_grant).
local MAX_POSITION = 8e12

local function member_of(position, permits, run, id)
    return string.format('%013d:%d:%d:%s', position, permits, run, id)
end

-- The name a grant is logged under (zset_member.lua): the grant id its receipt carries, sealed (the first 16 hex digits
-- of its SHA-1), then the rest of the name as it is (a tranche's '+<start>', a returned group's '.'). A receipt is all
-- a refund needs, so a log holding the ids themselves would hand every grant's receipt to whoever reads the state
-- (a read-only token, the state view): a holder of one lease could read the others' and release them. Refunds and
-- returns seal the id they are given and look for that.
local function sealed(name)
    local id, rest = string.match(name, '^([%w_%-]+)(.*)$')
    -- (A name of no id, which only a hand-made call sends, names no grant: left as it is, it matches none.)
    return id and string.sub(redis.sha1hex(id), 1, 16) .. rest or name
end

-- Moves the grants from rank `from` on by `delta` positions, renaming their members: O(grants moved). What that
-- does to their runs depends on why they move: a grant of -delta permits at position `at` was removed, a grant of
-- delta permits was put at `at` before them, or (`at` nil) every grant moves down to start from 0.
local function shift_positions(key, from, delta, at)
    local items = redis.call('ZRANGE', key, from, '-1', 'WITHSCORES')
    local old, new = {}, {}
    for i = 1, #items, 2 do
        local position, permits, run, id = parse_member(items[i])
        if not at then
            run = math.max(run + delta, 0)
        elseif delta < 0 then
            -- A run that began after the removed grant (at its end, at the latest) moves with the grants.
            run = run > at and run + delta or run
        elseif run >= at then
            run = run + delta
        elseif delta > 1 then
            -- A grant of several permits now stands inside this grant's run: the run begins after it.
            run = at + delta
        end
        old[#old + 1] = items[i]
        new[#new + 1] = items[i + 1]
        new[#new + 1] = member_of(position + delta, permits, run, id)
    end
    -- All removed before any is added (a new name may be the old name of a grant further on), in batches: unpack
    -- has a stack limit.
    for first = 1, #old, 1000 do
        redis.call('ZREM', key, unpack(old, first, math.min(first + 999, #old)))
    end
    for first = 1, #new, 2000 do
        redis.call('ZADD', key, unpack(new, first, math.min(first + 1999, #new)))
    end
end

-- Tranches booked ahead. A client reserving permits on a full sliding log books tranches that start later, as the
-- grants before them free (lua/parts/reserve/log.lua), each named '<grant id>+<start>' (unix ms). A tranche's permits
-- are used from its start on, so they count in a window (t - interval, t] only when t is at or after the start: a
-- grant's use keeps every window within the limit if, in each window its use may fall in, the permits that may be
-- used there (every grant logged whose start is at or before the window's end and which frees after it) stay within
-- the limit. Counted at a time t: the permits freeing after t less those of the tranches starting after t. That count
-- only falls between two starts (grants free) and rises at a start, so its most over the windows a use from `f` on
-- falls in is at `f` or at a tranche's start after `f` (every start is within a reservation's horizon, at most half an
-- interval, so all fall before such a window ends).
--
-- Every grant but a tranche frees at most one interval after `now` (a plain grant at its time + interval, a returned
-- group one interval after its last use), so only the grants freeing later are read to find the tranches, and a log
-- with none (the last grant frees within an interval) is decided as if every grant counted from now, with no read
-- more. A grant found there without a start (an edgelimit from before, a quota whose interval grew) counts from now:
-- counted for longer, never shorter.

-- The readers of a log with tranches booked ahead, and of a denied request's wait, made on the first call that needs
-- them (`log_readers().future`, `.fit`): a function defined at the top of a script is a closure made on every call,
-- and most decisions need none of these.
local readers
local function log_readers()
    if readers then
        return readers
    end

    -- The permits that free after unix ms `t` (at or after now): those from the position of the first grant freeing
    -- after `t` to the end of the log.
    local function held_after(key, t, first_position, held)
        local item = redis.call('ZRANGEBYSCORE', key, string.format('(%d', t), '+inf', 'LIMIT', '0', '1')[1]
        return item and first_position + held - parse_member(item) or 0
    end

    -- The tranches that start after `now`, by start, or nil when none does: each with its `start`, `permits`, `waiting`
    -- (the permits of the tranches starting after it) and `counted` (what a window ending at its start counts), and the
    -- list's `waiting` (all their permits) and `most` (the most any window ending from now on counts).
    local function log_future(key, now, interval, first_position, held)
        local future = {}
        for _, member in ipairs(redis.call('ZRANGEBYSCORE', key, string.format('(%d', now + interval), '+inf')) do
            local _, permits, _, id = parse_member(member)
            local start = string.match(id, '^[%w_%-]+%+(%d+)$')
            if start and start + 0 > now then
                future[#future + 1] = { start = start + 0, permits = permits }
            end
        end
        if #future == 0 then
            return nil
        end
        table.sort(future, function(a, b)
            return a.start < b.start
        end)
        -- From the last start back: what starts strictly later (tranches starting together count each other).
        local waiting, together = 0, 0
        for i = #future, 1, -1 do
            if i < #future and future[i].start < future[i + 1].start then
                waiting, together = waiting + together, 0
            end
            future[i].waiting = waiting
            together = together + future[i].permits
        end
        future.waiting = waiting + together
        future.most = held - future.waiting
        for i, tranche in ipairs(future) do
            if i > 1 and tranche.start == future[i - 1].start then
                tranche.counted = future[i - 1].counted
            else
                tranche.counted = held_after(key, tranche.start, first_position, held) - tranche.waiting
            end
            future.most = math.max(future.most, tranche.counted)
        end
        return future
    end

    -- The unix ms at which the grant holding `position` frees (first_position <= position < first_position + held): the
    -- first guess is where it would be if every grant had the same weight, then it is the answer; otherwise a binary
    -- search over ranks.
    local function frees_at(key, position, first_position, held, count)
        local low, high = 0, count - 1
        local rank = (position - first_position) * count / held
        rank = math.min(rank - rank % 1, high)
        while true do
            local item = redis.call('ZRANGE', key, rank, rank, 'WITHSCORES')
            local at, weight = parse_member(item[1])
            if position < at then
                high = rank - 1
            elseif position >= at + weight then
                low = rank + 1
            else
                return item[2] + 0
            end
            rank = (low + high - (low + high) % 2) / 2
        end
    end

    -- The earliest unix ms from `from` (at or after now) at which `need` permits (at most the limit) fit: when every
    -- window a use from then on falls in counts at most limit - need. After the last tranche starting from `from` on
    -- whose window has no such room (none: `from` itself), it is when enough of the soonest-freeing grants have freed,
    -- or the next tranche's start, whose window has room. Exact if nothing frees early.
    local function log_fit(key, need, limit, from, now, first_position, held, count, future)
        -- counted: what the window ending at `start` counts, once known (a tranche's is; it has no room).
        local room, start, counted, next_start, waiting = limit - need, from, nil, nil, 0
        if future then
            for i = #future, 1, -1 do
                local tranche = future[i]
                if tranche.start < from then
                    break
                elseif tranche.counted > room then
                    start, counted = tranche.start, tranche.counted
                    break
                end
                next_start = tranche.start
            end
            for _, tranche in ipairs(future) do
                if tranche.start > start then
                    waiting = waiting + tranche.permits
                end
            end
        end
        counted = counted or (start > now and held_after(key, start, first_position, held) or held) - waiting
        if counted <= room then
            return start
        end
        local frees = frees_at(key, first_position + held - room - waiting - 1, first_position, held, count)
        return next_start and math.min(frees, next_start) or frees
    end

    readers = { future = log_future, fit = log_fit }
    return readers
end

-- The verdict on `permits` (at most the limit) at `now` (allowed, retry_after, remaining, reset, reset_after), and the
-- log's standing that log_grant and log_fit take (permits held, the first grant's position, the last grant's run, the
-- tranches starting later, the number of grants), after dropping the grants that have freed: allowed while every
-- window the use falls in counts at most the limit with these (see above; with no tranche starting later, while the
-- permits held plus these stay within the limit). The wait for a denied request is log_fit's. `reset` is when the
-- last grant frees.
local function log_verdict(key, permits, limit, interval, now)
    redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
    local count = redis.call('ZCARD', key)
    local held, first_position, reset, last_run, future = 0, 0, now, -1, nil
    if count > 0 then
        local last = redis.call('ZRANGE', key, '-1', '-1', 'WITHSCORES')
        local last_position, last_permits
        last_position, last_permits, last_run = parse_member(last[1])
        local last_end = last_position + last_permits
        if count <= last_end - last_run then
            -- Every grant held is in the last grant's run: one permit each.
            held = count
        else
            held = last_end - parse_member(redis.call('ZRANGE', key, '0', '0')[1])
        end
        first_position, reset = last_end - held, last[2] + 0
        if reset > now + interval then
            future = log_readers().future(key, now, interval, first_position, held)
        end
    end
    local remaining = limit - (future and future.most or held)
    local allowed = permits <= remaining
    local retry_after = 0
    if not allowed then
        retry_after = log_readers().fit(key, permits, limit, now, now, first_position, held, count, future) - now
    end
    return allowed, retry_after, remaining > 0 and remaining or 0, reset, math.max(reset, now + interval), held,
        first_position, last_run, future, count
end

-- Logs a grant of `permits` named `id` (sealed), freeing at now + interval, after the log's standing at `now`
-- (log_verdict's: `held` permits from `first_position`, the last grant's run `last_run` (-1 when none is held), the
-- last freeing at `last_expiry`); the key then expires at `reset_after`. Returns the grant's receipt,
-- '<permits>:<expiry>-<id>', which finds it again (log_decision).
local function log_grant(key, permits, interval, id, now, grace, reset_after, held, first_position, last_run,
                         last_expiry)
    local expiry = now + interval
    local position = first_position + held
    if expiry < last_expiry then
        -- It frees before grants already logged: it goes before them, and they move up.
        local rank = redis.call('ZCOUNT', key, '-inf', expiry)
        position = parse_member(redis.call('ZRANGE', key, rank, rank)[1])
        shift_positions(key, rank, permits, position)
        last_run = -1
    elseif position + permits > MAX_POSITION then
        -- Positions grow with every grant while the key lives: they start again from 0, once per 8 * 10^12 permits.
        shift_positions(key, 0, -first_position, nil)
        position, last_run = held, math.max(last_run - first_position, 0)
    end
    -- A grant of one permit continues the last grant's run (or starts one); a larger grant ends any run.
    local run = permits > 1 and position + permits or last_run >= 0 and last_run or position
    local receipt = string.format('%d:%d-%s', permits, expiry, id)
    -- The score is the expiry as the receipt already prints it: the number itself would be printed again, as a double.
    redis.call('ZADD', key, string.match(receipt, ':(%d+)'), member_of(position, permits, run, sealed(id)))
    redis.call('PEXPIRE', key, reset_after - now + grace)
    return receipt
end

-- Raises a clean error unless `id` is a fresh grant id as clients make them: letters, digits, _ or -, at most 64.
local function check_grant_id(id)
    if #id > 64 or not string.match(id, '^[%w_%-]+$') then
        error({ err = 'ERR edgelimit: invalid grant id (letters, digits, _ or -, at most 64): '
            .. string.sub(id, 1, 100) })
    end
end

-- Removes the grant of `permits` logged as '<expiry>-<id>' if it is still held (its expiry after `now`), moving the
-- grants after it down so that what is held stays exact. Returns whether it was held. (A refund's and a reserved
-- tranche's return, lua/parts/reserve/log.lua.)
local function remove_grant(key, expiry, id, permits, now)
    if expiry > now then
        id = sealed(id)
        for _, member in ipairs(redis.call('ZRANGEBYSCORE', key, expiry, expiry)) do
            local position, member_permits, _, member_id = parse_member(member)
            -- A tranche booked ahead is named with its start after the '+' (see log_future); a return names it
            -- without (a refund's id has no '+', so it never names a tranche).
            member_id = string.match(member_id, '^([%w_%-]+%+)%d+$') or member_id
            if member_id == id and member_permits == permits then
                local rank = redis.call('ZRANK', key, member)
                redis.call('ZREM', key, member)
                shift_positions(key, rank, -member_permits, position)
                return true
            end
        end
    end
    return false
end

-- The decision of an algorithm that keeps a log (the --@decision section, see prelude.lua). A grant's `lease` is
-- its fresh id: letters, digits, _ or -, checked before anything is written. A refund's `mark` (from its receipt,
-- '<permits>:<expiry>-<id>', whose permits are `permits`) names the grant to give back: it is removed if it is still
-- held (`held`: whether it was), the grants after it move down so that what is held stays exact, and the decision
-- is then on one permit. Returns held, the permits decided on, and log_verdict's values.
local function log_decision(operation, key, permits, limit, interval, lease, mark, now)
    local held = true
    if operation == 'refund' then
        local expiry, id = string.match(mark, '^(%d+)%-(.+)$')
        if not expiry then
            error({ err = 'ERR edgelimit: invalid receipt mark (not a grant of this limit: "<expiry>-<grant id>"): '
                .. mark })
        end
        held = remove_grant(key, expiry + 0, id, permits, now)
        permits = 1
    elseif operation == 'limit' then
        check_grant_id(lease)
    end
    return held, permits, log_verdict(key, permits, limit, interval, now)
end

-- Sliding log: a request of `permits` at `now` is allowed while the permits granted in (now - interval, now] plus
-- these stay within `limit`. Exact over every interval-long span, at the cost of one zset member per grant in the
-- window, whatever its permits.
--
-- State: a log of grants (zset_member.lua, zset_log.lua) where every grant frees at exactly grant time + interval: a
-- concurrency lease that is never released early. So the wait for a denied request is exact, and the key expires
-- when the newest grant leaves the window. Unlike src/redisson (Redisson's layout, one config shared by name),
-- the quota comes with each request, so one script limits any identifier next to the other algorithms.



local in_log, first_position, last_run
held, permits, allowed, retry_after, remaining, reset, reset_after, in_log, first_position, last_run =
    log_decision(operation, key, permits, limit, interval, lease, mark, now)

if operation == 'refund' then
    return { held and 3 or 4, remaining, reset, 0 }
elseif operation == 'peek' then
    return { allowed and 2 or 0, remaining, reset, retry_after }
elseif not allowed then
    return { 0, remaining, reset, retry_after }
end


-- The receipt names the grant, to give it back exactly.
token = log_grant(key, permits, interval, lease, now, grace, reset_after, in_log, first_position, last_run, reset)
granted_mark = now + interval

return { 1, remaining - permits, reset_after, granted_mark }
