-- lua/reserve/concurrency.lua: GENERATED from lua/parts/ (src/lua/compose.rs). Edit the parts, then run scripts/lua.

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

-- A reserve script's request, read and checked as the single-limit scripts read theirs (lua/parts/limits/request.lua,
-- spliced in at the script's --@request line), is also at most the limit: the client refuses a larger one before
-- sending, where a single-limit script answers it as exceeds_limit.
local function check_within_limit(request, permits, limit)
    if permits > limit then
        error({ err = 'ERR edgelimit: invalid request (permits at most the limit, ' .. limit .. '): '
            .. string.sub(request, 1, 100) })
    end
end

-- The block a client asks for with its request, ARGV[2]: '<block>:<lead ms>:<horizon ms>[:<pace ms>[:only]]', the
-- permits to reserve besides the request's (0 to the limit), the least time from now that a reserved permit must
-- leave the client to use it (1 to the horizon: a round trip at least), how far from now reserved permits may reach
-- (at most 60000 ms): the client asks for what it expects to use in that time, and (a sliding log's, else 0) the time
-- between this client's requests (at most the horizon), the pace at which permits booked ahead start. With ':only' the
-- call reserves and does not take the request: a request under several limits is decided by lua/limits.lua, all
-- or nothing, in the same round trip before this call (src/limit/reserved/several.rs), and the request here only
-- sizes the block (tranches of whole requests). Returns the four numbers and whether the call reserves only, or
-- raises a clean error.
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

-- Permits of a sliding-log or concurrency limit reserved for one client to grant locally, with no round trip
-- (src/limit/reserved.rs): lua/reserve/sliding_log.lua and lua/reserve/concurrency.lua, each with its algorithm's
-- decision and grant spliced in. The script shares its state with the algorithm's single-limit script on the same key
-- (lua/sliding_log.lua or lua/concurrency.lua: the log of grants, lua/parts/limits/zset_member.lua), so reserved and
-- plain decisions mix.
--
-- What a use is. For a sliding log, a grant: it counts in every span of one interval that holds its moment. For
-- concurrency, a lease lent out: it is held from that moment until it is released or one interval has passed,
-- whichever comes first (a client lends a reserved permit again once its lease is given back, within the span). A
-- lease held at t was lent within (t − interval, t], so the leases held at t are at most the uses in that span, which
-- the argument below keeps within the limit for either algorithm: the log treats both alike.
--
-- Why it is exact. Each grant in the log frees one interval after the last moment it may be used: a plain grant at g
-- frees at g + interval; reserved permits, usable from f (now, or later: see Tranches) until f + horizon, free at f +
-- horizon + interval. A window (t - interval, t] can hold the use of a grant only if the grant starts (may first be
-- used) at or before t and frees after t; what the log counts for the window is the permits of those grants
-- (lua/parts/limits/zset_log.lua, log_future). Each decision, at e, admits its permits, first used at f >= e, only if
-- every window their use may fall in counts at most the limit less these. Take any window, the grants used in it,
-- and among them the one Redis decided last, at e: every other one was in the log at e (decided before it, freeing
-- after t >= e) and starts at or before t, so the decision at e counted it in this window, and they are within the
-- limit. (A grant that starts at once, a plain one, is counted from now in every window: with no tranche starting
-- later the rule is simply that the permits held plus these stay within the limit.)
--
-- Tranches. On a full log, a block's permits start as the grants they take the place of free: one by one, not all
-- when the last of them has. So a block is logged as up to MAX_TRANCHES grants, its tranches, each usable from when
-- it fits (as above) and freeing one interval after its own span: a client that uses its permits as they come holds
-- none idle for long. Each tranche is a grant as above, decided after the ones before it, which it counts.
--
-- Pacing. A client uses its permits at the pace its own requests come (`pace`, ms between them), slower than a full
-- limit frees them when other clients share it. Tranches booked ahead would otherwise take the permits that free
-- next, one after another, and the later ones would wait unused for this client's requests, held against the limit
-- (about 2.5% of a busy limit's capacity in bench/reserved.mjs, with 500 ms blocks). So each tranche booked ahead
-- starts no earlier than the one before it started plus `pace` for each request that one holds, and the permits
-- freeing in between are left to the other clients: a tranche counts only from its start, so a decision before it
-- may use them.
--
-- Returns. Held to their span's end, reserved permits would free up to a span late at a client that uses them at once
-- (a hot identifier). So a client that is done with a tranche (used up, or its span over) says when it used its
-- permits when it next asks for that identifier, and the tranche frees earlier. The unused permits are removed (for
-- concurrency, also those whose leases were given back). The used ones (for concurrency, the leases still out) are
-- logged again in groups, each freeing one interval after its last use: the latest server time the
-- client says that use may have had (its own clock's reading moved to the server's, with a margin for drift), and
-- never later than the tranche's own expiry (a group that has freed by now is not logged). Why that stays exact: the
-- tranche was admitted for any use within its span, and every decision before the return counted it until its expiry;
-- a decision after the return, first used at f >= now, counts the uses in (f - interval, f], and a group with a use
-- there frees after f, so it is still in the log. The time is the client's: an error of its clock moves a use as it
-- moves the end of the span the client keeps (src/limit/reserved.rs). (The return's own time bounds a use too, since
-- every use came before it; it is not taken, so that a use frees one interval after the latest time the client can
-- name for it, which is what a check of the client's grants counts.) A return names the tranche by its grant
-- ('<expiry>-<id>', as a receipt does) and carries absolute numbers, not differences: a return sent twice finds no
-- tranche the second time and changes nothing. The groups are logged under the grant id with a '.' after it, a name
-- no return can give.
--
-- Names no refund can give. The request's grant is logged under the grant id, and its receipt,
-- '<permits>:<expiry>-<id>', is handed to the caller, who may refund (release) it. The tranches are logged under the
-- id with a '+' after it, and the groups with a '.': a receipt's mark is letters, digits, '_' and '-' only (the
-- frames check it), so no refund can name them. Otherwise a caller could work a tranche's name out from its own
-- receipt (the id, and the expiry plus the block's length) and refund the whole tranche while the client that holds
-- it still uses it: over-admission. A return names the tranche by the plain id; the script adds the '+'.
--
--   KEYS[1]  the state key (the one the algorithm's single-limit script decides on)
--   ARGV[1]  the request and its quota, as that script's: '<permits>:<limit>:<interval ms>'
--   ARGV[2]  '<block>:<lead ms>:<horizon ms>[:<pace ms>[:only]]' (lua/parts/reserve/arguments.lua): the permits to
--            reserve besides the request's, the least time from now they must be usable for, how far from now they
--            may be used, and the time between the client's requests (see Pacing); ':only' reserves without taking
--            the request
--   ARGV[3]  a fresh grant id (letters, digits, _ or -), as that script's: the request's grant (for concurrency,
--            its lease: '<permits>:<now + interval>-<id>' is its receipt) and the reserved tranches are logged under it
--   ARGV[4]  unix ms, or '' (the default) for the Redis server's clock
--   ARGV[5…] returns, each '<expiry>-<id>:<permits>:<used>:<last use>[:<used>:<last use>]…' (at most MAX_GROUPS
--            pairs): the tranche reserved as the grant '<expiry>-<id>' of `permits` (the expiry and id its reservation
--            logged), of which the groups were used (together at most its permits; for concurrency, the leases still
--            out), each group's last use at `last use` (unix ms) at the latest; '0:<any time>' when none was (is)
--
-- Reply {granted, now, reserved, from, remaining, reset, retry_after, [permits, from]…}: the request's permits
-- granted (`granted`, all or 0) as the algorithm's single-limit script decides them; `reserved` permits for the
-- caller in tranches, the first usable from now + `from` until now + `from` + the horizon, both included, and each
-- pair after the seventh number another tranche of `permits` (taken from `reserved`) and its `from`, later; then the
-- standing after the call: permits left now (none while reserved permits wait for their start), when the log frees
-- its last grant, and for a denied request the ms until it fits (before its block: the client waits for the first
-- tranche's start instead). A tranche holds a whole number of requests of the request's size, so that one tranche
-- answers a request.

local MAX_TRANCHES, MAX_GROUPS = 8, 16
-- Whether permits are booked ahead, as the grants before them free (see Tranches): for a sliding log, whose grants
-- free at their expiry. A concurrency lease is mostly released well before its expiry, and a permit booked for then
-- would sit idle meanwhile (it counts from now), so concurrency reserves only the permits free now. (The name is
-- spliced in by src/lua/compose.rs.)
local BOOKS_AHEAD = 'concurrency' == 'sliding_log'
-- The longest return a client writes is about 500 bytes (16 groups of two numbers of up to 16 digits, a 64-byte id).
local MAX_RETURN_BYTES = 1024

check_call(3, 4 + 100) -- at most 100 returns
local key, request, id, time = KEYS[1], ARGV[1], ARGV[3], ARGV[4] or ''
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

check_within_limit(request, permits, limit)
local block, _, horizon, pace, only = block_of(ARGV[2], limit)
local now = clock(time)
local grace = time == '' and 0 or EXPLICIT_TIME_GRACE_MS
-- The grant id, checked here before any return writes (log_decision checks it again): a call refused writes nothing.
check_grant_id(id)

-- A return read, or nil: {expiry, id, permits, groups = {{count, last_use}…}}. Read left to right with patterns
-- anchored at the reading position: a pattern that searches (gsub, gmatch, or a find without '^') retries at every
-- position and takes time quadratic in a long run of digits, all inside one C call that Redis's script timeout cannot
-- interrupt. No use is put before the tranche's span can have begun, one interval and the horizon before its expiry
-- (a client's use never is; a return that says so would free its permits early).
local function return_of(text)
    if #text > MAX_RETURN_BYTES then
        return nil
    end
    local expiry, returned_id, returned, at = string.match(text, '^(%d+)%-([%w_%-]+):(%d+)()')
    if not expiry then
        return nil
    end
    expiry = expiry + 0
    local earliest_use = expiry - interval - horizon
    local tranche, used = { expiry = expiry, id = returned_id, permits = returned + 0, groups = {} }, 0
    while at <= #text do
        local count, last_use
        count, last_use, at = string.match(text, '^:(%d+):(%d+)()', at)
        if not count or #tranche.groups == MAX_GROUPS then
            return nil
        end
        used = used + count
        tranche.groups[#tranche.groups + 1] = { count = count + 0, last_use = math.max(last_use + 0, earliest_use) }
    end
    if #tranche.groups == 0 or used > tranche.permits then
        return nil
    end
    return tranche
end

-- The returns, all read and checked before any is applied (so that a call refused writes nothing), and applied
-- before the request is decided, so that the permits they free count for it.
local returned = {}
for i = 5, #ARGV do
    returned[#returned + 1] = return_of(ARGV[i]) or error({ err = 'ERR edgelimit: invalid return (<expiry>-<grant '
        .. 'id>:<permits>:<used>:<last use ms>, then up to ' .. (MAX_GROUPS - 1) .. ' more <used>:<last use ms>, used '
        .. 'together at most the permits, at most ' .. MAX_RETURN_BYTES .. ' bytes): ' .. string.sub(ARGV[i], 1, 100) })
end
for _, tranche in ipairs(returned) do
    -- Only a tranche still logged; its used permits are logged again, group by group.
    if remove_grant(key, tranche.expiry, tranche.id .. '+', tranche.permits, now) then
        for _, group in ipairs(tranche.groups) do
            local frees = math.min(group.last_use + interval, tranche.expiry)
            if group.count > 0 and frees > now then
                local _, _, _, reset, reset_after, held, first_position, last_run =
                    log_verdict(key, 0, limit, interval, now)
                log_grant(key, group.count, frees - now, tranche.id .. '.', now, grace,
                    math.max(reset_after, frees), held, first_position, last_run, reset)
            end
        end
    end
end

-- The request, decided and logged by the algorithm's own code (its decision and grant, spliced here from
-- lua/parts/limits/<algorithm>.lua; log_decision checks the grant id).
local operation, lease, mark = 'limit', id, nil
-- luacheck: push ignore held granted_mark token
local allowed, retry_after, remaining, reset, reset_after, held, granted_mark, token
-- luacheck: pop


local in_log, first_position, last_run
held, permits, allowed, retry_after, remaining, reset, reset_after, in_log, first_position, last_run =
    log_decision(operation, key, permits, limit, interval, lease, mark, now)


-- (A call that reserves only takes nothing for the request.)
local granted = 0
if allowed and not only then
    granted = permits

    -- A grant is a lease: its receipt is the token that releases it.
    token = log_grant(key, permits, interval, lease, now, grace, reset_after, in_log, first_position, last_run, reset)
    granted_mark = now + interval
    remaining = remaining - permits
    reset = reset_after
end

-- The reserved permits, in tranches (see above): as many as asked, or fewer, those that start within the horizon, in
-- whole requests. After a denial, only a block that holds the request (its wait is then the first tranche's start,
-- which the client reports), so that a denial's retry_after stays exact; a tranche holds whole requests, so any block
-- does. The log's standing is read again after each grant (this path is rare: a client reserves when its permits
-- run out).
local reply = { granted, now, 0, 0, remaining, reset, retry_after }
if block > 0 then
    local _, _, room, last_expiry, after, standing, first, tail_run, future, count =
        log_verdict(key, 0, limit, interval, now)
    -- Whole requests: those that fit now in one tranche, usable at once; the others (a sliding log's) booked ahead
    -- in the tranches left, each no earlier than this client's requests reach it at `pace` (see Pacing).
    local fitting = math.min(block, math.max(room, 0))
    local at_once = (fitting - fitting % permits) / permits
    local requests = (block - block % permits) / permits
    local per_tranche = math.ceil((requests - at_once) / (MAX_TRANCHES - (at_once > 0 and 1 or 0)))
    local booked, index, next_from = 0, 0, now
    while booked < requests do
        local size, start = at_once, now
        if index > 0 or at_once == 0 then
            if not BOOKS_AHEAD then
                break
            end
            size = math.min(per_tranche, requests - booked)
            start = log_readers().fit(key, size * permits, limit, next_from, now, first, standing, count, future)
            if start - now > horizon then
                break
            end
        end
        index = index + 1
        local from = start - now
        local frees = from + horizon + interval
        -- A tranche starting later is named with its start (see log_future).
        local name = from > 0 and string.format('%s+%d', id, start) or id .. '+'
        log_grant(key, size * permits, frees, name, now, grace, math.max(after, now + frees), standing, first,
            tail_run, last_expiry)
        -- At least 1 ms apart: tranches of one call then differ in their expiry, which a return names them by (two
        -- alike would let a return sent twice remove the second while its client still uses it).
        booked, next_from = booked + size, start + math.max(size * pace, 1)
        if index == 1 then
            reply[4] = from
        else
            reply[#reply + 1] = size * permits
            reply[#reply + 1] = from
        end
        reply[6] = math.max(reply[6], now + frees)
        if booked < requests then
            _, _, _, last_expiry, after, standing, first, tail_run, future, count =
                log_verdict(key, 0, limit, interval, now)
        end
    end
    reply[3] = booked * permits
    reply[5] = math.max(room - at_once * permits, 0)
end

return reply
