-- lua/limits.lua: GENERATED from lua/parts/ (src/lua/compose.rs). Edit the parts, then run scripts/lua.

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

-- The algorithm family's driver, for several limits in one call or a quota stored in Redis (one limit with its quota
-- in the arguments runs single.lua instead); the algorithms are spliced in at the marker, each wrapped by entry.lua.
-- One call decides them atomically: every limit gives a verdict first, and only if all allow are all of them
-- recorded. A request denied by one limit consumes from none.
--
--   KEYS     two per limit: its config hash (read only when the limit's algorithm argument is ''), its state key
--   ARGV[1]  'limit' (decide and record), 'peek' (decide, record nothing), 'refund' (give a grant back)
--   ARGV[2]  unix ms, or '' for the Redis server's clock (the default); both read by prelude.lua
--   then six per limit: algorithm ('' = read the config hash), permits, limit, interval (ms), rate, lease
--     lease: for a concurrency or sliding log limit, a fresh random id naming the grant ('limit'); the receipt of
--            the grant to give back ('refund', permits then being the receipt's)
--
-- The reply is flat, six entries per limit, in order: status, limit, remaining, reset, retry_after, receipt or ''
-- (one array, not one per limit: each table costs Redis an allocation and a conversion).
--   granted        allowed and recorded; its receipt names the grant for a refund (see prelude.lua)
--   allowed        would be allowed, recorded nothing (a peek, or another limit denied)
--   denied         not allowed; retry_after is the exact wait (an upper bound for concurrency)
--   refunded       permits given back; not_held: nothing was (the grant's permits had freed, refilled or left the
--                  counted windows, or its lease was released)
--   exceeds_limit  more permits than the limit can ever grant; not_configured: no stored config
-- Either of the last two makes the whole call record nothing.

-- The call: ARGV[1] is the operation, ARGV[2] unix ms or '' for the server's clock.
local operation = ARGV[1]
if operation ~= 'limit' and operation ~= 'peek' and operation ~= 'refund' then
    reject('operation (limit, peek or refund)', operation)
end
local now = clock(ARGV[2])
local grace = ARGV[2] ~= '' and EXPLICIT_TIME_GRACE_MS or 0

-- The request's permits and quota as numbers, checked with one test (each check is a call, and calls cost); when
-- it fails, a clean error names the first bad field and where it came from: `stored_in`, the config hash, or nil
-- for arguments. On a refund it also checks the receipt (`lease`) and returns its mark (see `mark` above): a receipt
-- of another form, of other permits than the refund's or of more than the limit was not made by a grant of this
-- limit, and is refused before anything is written.
local function request_of(permits, limit, interval, rate, lease, stored_in)
    local n_permits, n_limit, n_interval, n_rate = tonumber(permits), tonumber(limit), tonumber(interval),
        tonumber(rate)
    if n_permits and n_limit and n_interval and n_rate and n_permits % 1 == 0 and n_limit % 1 == 0
        and n_interval % 1 == 0 and n_rate % 1 == 0 and n_permits >= 1 and n_permits <= MAX_COUNT and n_limit >= 1
        and n_limit <= MAX_COUNT and n_interval >= 1 and n_rate >= 1 and n_rate <= MAX_COUNT
        and n_limit * n_interval <= 2 ^ 52 then
        if operation == 'refund' then
            local receipt_permits, mark = string.match(lease, '^(%d+):([%w_%-]+)$')
            if not mark or #mark > 64 or receipt_permits + 0 ~= n_permits or n_permits > n_limit then
                reject('receipt (as a grant returned it: "<permits>:<mark>", its permits the refund\'s and at most '
                    .. 'the limit ' .. n_limit .. ')', string.sub(lease, 1, 100))
            end
            return n_permits, n_limit, n_interval, n_rate, mark
        end
        return n_permits, n_limit, n_interval, n_rate
    end
    whole(permits, 'permits', 1, MAX_COUNT)
    local source = stored_in and ('stored config in ' .. stored_in .. ', field ') or 'argument '
    for _, field in ipairs({ { 'limit', limit, MAX_COUNT }, { 'interval (ms)', interval, 2 ^ 52 },
                             { 'rate', rate, MAX_COUNT } }) do
        if not whole_number(field[2], 1, field[3]) then
            reject(source .. field[1], field[2])
        end
    end
    reject('limit × interval (must stay below 2^52 for exact arithmetic)', limit)
end

-- The tag each string algorithm's state starts with.
local STRING_TAGS = { token_bucket = 'tb', gcra = 'gcra', fixed_window = 'fw', sliding_window = 'sw' }

-- Which string algorithm wrote `value`, by its tag; nil for a value no edgelimit algorithm writes.
local function string_algorithm_tag(value)
    -- Which string algorithm wrote `value`, spliced at each line `--@inline limits/string_tag.lua`
    -- (see src/lua/compose.rs): `tag` is the tag its state starts with in that algorithm's layout
    -- (token bucket 'tb', GCRA 'gcra', fixed window 'fw', sliding window 'sw'), or nil for a value in
    -- none of these layouts (another program's, a damaged state).
    local tag = string.match(value, '^(%l+):%d+:%d+$')
    if not (tag == 'tb' or tag == 'gcra' or tag == 'fw') then
        tag = string.find(value, '^sw:%d+:%d+:%d+$') and 'sw' or nil
    end
    return tag
end

-- Each algorithm's function (entry.lua), by the name the arguments and stored configs use.
local ALGORITHMS = {}

-- What token bucket and GCRA share: after prelude.lua, before those algorithms' files (see src/lua/compose.rs).
--
-- They are one decision over "units": a permit is `interval` units, `rate` units come back per ms (so refill is
-- continuous and exact: no step quantisation, no rounding drift), and the limit holds limit × interval units. With
-- `available` units at `now` (negative when the limit was lowered under existing state) and `left` = available −
-- permits × interval:
--   allowed      left >= 0
--   retry_after  ceil(−left / rate) when not allowed, else 0
--   remaining    floor(available / interval), at least 0
--   reset        now + ceil((full − available) / rate); reset_after the same with `left`
-- Each algorithm writes this out inline, ceil(a / b) as (a + b − 1 − (a + b − 1) % b) / b: a function would be a
-- closure made on every call (see prelude.lua).

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

-- Token bucket: `limit` tokens of capacity, refilled continuously at `rate` tokens per `interval` ms; a new bucket
-- starts full. A request takes `permits` tokens if the bucket holds them; tokens never go negative.
--
-- State: string 'tb:<units>:<at>', units = tokens × interval as of unix ms `at`: one GET to read, one SET … PX to
-- write (Redis commands dominate a script's cost). A missing key is a full bucket, so the key expires exactly when
-- the bucket would be full again. The tag 'tb:' says whose value it is: another algorithm's value, or one of no
-- edgelimit algorithm, is refused (foreign_value.lua; a stored quota that changed its algorithm has the old state
-- dropped first, by driver.lua).
--
-- A grant's receipt is '<permits>:<unix ms of the grant>'. A refund of it at `now` gives back what the grant took
-- less what has refilled since, permits × interval − (now − granted) × rate units, when that is positive: those
-- are the units the grant still keeps out of the bucket, so a refund never lets through more than if the grant had
-- never been made (the full permits × interval, refunded after a refill, would).

-- How driver.lua runs an algorithm: its file's two sections (see prelude.lua) spliced into one function per
-- algorithm (src/lua/compose.rs names it). The function returns the verdict and the grant, as a closure over the
-- decision's locals, for the driver to call once every limit of the call allows.
ALGORITHMS.token_bucket = function(operation, key, permits, limit, interval, rate, lease, mark, now, grace)
    local allowed, retry_after, remaining, reset, reset_after, held, granted_mark, token -- luacheck: ignore token


-- Units in the bucket at `now`, refilled since `at`. A stored `at` after `now` (a caller's clock behind Redis's)
-- refills nothing and keeps the later time. ceil(a / b) is written out as (a + b - 1 - (a + b - 1) % b) / b: a
-- function for it would be a closure made on every call (see prelude.lua).
local full = limit * interval
local value = redis.call('GET', key) or ''
local units, at = string.match(value, '^tb:(%d+):(%d+)$')
if value ~= '' and not units then
    -- Which string algorithm wrote `value`, spliced at each line `--@inline limits/string_tag.lua`
    -- (see src/lua/compose.rs): `tag` is the tag its state starts with in that algorithm's layout
    -- (token bucket 'tb', GCRA 'gcra', fixed window 'fw', sliding window 'sw'), or nil for a value in
    -- none of these layouts (another program's, a damaged state).
    local tag = string.match(value, '^(%l+):%d+:%d+$')
    if not (tag == 'tb' or tag == 'gcra' or tag == 'fw') then
        tag = string.find(value, '^sw:%d+:%d+:%d+$') and 'sw' or nil
    end
    -- A string algorithm's check of its key's value, spliced at each line
    -- `--@inline limits/foreign_value.lua` (see src/lua/compose.rs) after limits/string_tag.lua, where
    -- the value (`value`, '' for no key) is not '' and not in the algorithm's own layout. No such
    -- value is decided on: read as nothing counted, it would be granted on and overwritten. It is
    -- refused as Redis refuses a key of another type (the caller's EDGELIMIT_FOREIGN_STATE):
    --   - another string algorithm's state (`tag`): two limits that share a name with different
    --     algorithms, which would otherwise reset each other's state on every call and limit nothing
    --     (a stored quota whose algorithm changed has that state deleted by driver.lua before it gets
    --     here);
    --   - anything else (another program's value, a damaged state), reported by its length, not its
    --     bytes (another program's secret?).
    if tag then
        error({ err = 'WRONGTYPE edgelimit: the key holds the state of another algorithm (' .. tag
            .. '): two limits share this name with different algorithms; give each its own name' })
    end
    error({ err = 'WRONGTYPE edgelimit: the key holds a value of no edgelimit algorithm '
        .. '(another program\'s, or damaged: ' .. #value .. ' bytes)' })
end
if units then
    units, at = units + 0, at + 0
    units = units < full and units or full
    if now > at then
        -- Only multiply when the bucket does not fill up anyway: the product stays below full + rate.
        local fill = full - units + rate - 1
        if now - at >= (fill - fill % rate) / rate then
            units = full
        else
            units = units + (now - at) * rate
        end
        at = now
    end
else
    units, at = full, now
end
if operation == 'refund' then
    local granted = string.find(mark, '^%d+$') and mark + 0
    if not granted or granted > now then
        error({ err = 'ERR edgelimit: invalid ' .. RECEIPT_MARK .. ': ' .. mark })
    end
    local taken, elapsed = permits * interval, now - granted
    -- elapsed × rate < taken + rate here: no product past 2^53.
    local span = taken + rate - 1
    local credit = elapsed < (span - span % rate) / rate and taken - elapsed * rate or 0
    held = credit > 0 and units < full
    if held then
        units = units + credit < full and units + credit or full
        if units >= full then
            redis.call('DEL', key)
        else
            local fill = full - units + rate - 1
            redis.call('SET', key, string.format('tb:%d:%d', units, at), 'PX',
                at - now + (fill - fill % rate) / rate + grace)
        end
    end
    permits = 1
end
-- The verdict over units (bucket.lua): the units left after the grant, and the ms until each standing is reached.
local left = units - permits * interval
local fill = full - units + rate - 1
allowed, remaining, reset = left >= 0, units - units % interval, now + (fill - fill % rate) / rate
remaining = remaining > 0 and remaining / interval or 0
fill = full - left + rate - 1
reset_after = now + (fill - fill % rate) / rate
if allowed then
    retry_after = 0
else
    fill = rate - 1 - left
    retry_after = (fill - fill % rate) / rate
end


    return allowed, retry_after, remaining, reset, reset_after, held, function()


-- The key expires when the bucket is full again: at `reset_after` from `at` (later than now on a caller's clock
-- behind Redis's). A grant takes at least one permit, so the bucket is never full after it.
redis.call('SET', key, string.format('tb:%d:%d', left, at), 'PX', at - now + reset_after - now + grace)
granted_mark = now


        return token or string.format('%d:%d', permits, granted_mark)
    end
end

-- Fixed window: at most `limit` permits in each window [k × interval, (k + 1) × interval) of unix ms. Cheap and
-- simple, but a client can take `limit` at the end of one window and `limit` again at the start of the next.
--
-- State: string 'fw:<k>:<count>'. The window is in the value, not in the key's name, because only the script knows
-- the server's time. The key expires when its window ends. A denied request counts nothing (one GET); a grant adds
-- one SET, which keeps the key's expiry (KEEPTTL: setting one costs about as much as the SET itself) unless it
-- starts the window. The tag 'fw:' says whose value it is: another algorithm's value, or one of no edgelimit
-- algorithm, is refused (foreign_value.lua; a stored quota that changed its algorithm has the old state dropped
-- first, by driver.lua).
--
-- Why this layout stays (instructions per decision, bench/instructions.mjs, thousands, granted / denied: this one
-- 52.1 / 41.3; @upstash/ratelimit's one INCRBY 32.1 / 33.4, and the goal that plus one TIME, 8.3). A number per window
-- (tag × 2^33 + count, exact in Lua below 2^53) counts with one INCRBY, but a denial must then take it back (a
-- DECRBY): 45.6 / 47.4; read first (GET, then INCRBY), about 49 / 43. Either way one path pays two commands where the
-- peer pays one (about 4–4.5 each), and a new layout pays a key of its own plus the previous layout's key in every
-- call, so that clients of a release before count the same grants during a rolling upgrade (about 2). The one
-- conditional increment Redis has, BITFIELD … OVERFLOW FAIL on the permits left, costs about 8 more than INCRBY.
--
-- A grant's receipt is '<permits>:<k>', its window. A refund gives the permits back to that window only while it is
-- the current one: a window that has ended no longer limits anything, and giving its permits to the current window
-- would let the current window count more than the limit.

-- How driver.lua runs an algorithm: its file's two sections (see prelude.lua) spliced into one function per
-- algorithm (src/lua/compose.rs names it). The function returns the verdict and the grant, as a closure over the
-- decision's locals, for the driver to call once every limit of the call allows.
ALGORITHMS.fixed_window = function(operation, key, permits, limit, interval, rate, lease, mark, now, grace)
    local allowed, retry_after, remaining, reset, reset_after, held, granted_mark, token -- luacheck: ignore token


-- The current window, the permits counted in it, and whether that is the stored window. A stored window after
-- `now`'s (a caller's clock behind Redis's) stays the current one.
local window = now / interval
window = window - window % 1
local value = redis.call('GET', key) or ''
local stored_text, count = string.match(value, '^fw:(%d+):(%d+)$')
if value ~= '' and not stored_text then
    -- Which string algorithm wrote `value`, spliced at each line `--@inline limits/string_tag.lua`
    -- (see src/lua/compose.rs): `tag` is the tag its state starts with in that algorithm's layout
    -- (token bucket 'tb', GCRA 'gcra', fixed window 'fw', sliding window 'sw'), or nil for a value in
    -- none of these layouts (another program's, a damaged state).
    local tag = string.match(value, '^(%l+):%d+:%d+$')
    if not (tag == 'tb' or tag == 'gcra' or tag == 'fw') then
        tag = string.find(value, '^sw:%d+:%d+:%d+$') and 'sw' or nil
    end
    -- A string algorithm's check of its key's value, spliced at each line
    -- `--@inline limits/foreign_value.lua` (see src/lua/compose.rs) after limits/string_tag.lua, where
    -- the value (`value`, '' for no key) is not '' and not in the algorithm's own layout. No such
    -- value is decided on: read as nothing counted, it would be granted on and overwritten. It is
    -- refused as Redis refuses a key of another type (the caller's EDGELIMIT_FOREIGN_STATE):
    --   - another string algorithm's state (`tag`): two limits that share a name with different
    --     algorithms, which would otherwise reset each other's state on every call and limit nothing
    --     (a stored quota whose algorithm changed has that state deleted by driver.lua before it gets
    --     here);
    --   - anything else (another program's value, a damaged state), reported by its length, not its
    --     bytes (another program's secret?).
    if tag then
        error({ err = 'WRONGTYPE edgelimit: the key holds the state of another algorithm (' .. tag
            .. '): two limits share this name with different algorithms; give each its own name' })
    end
    error({ err = 'WRONGTYPE edgelimit: the key holds a value of no edgelimit algorithm '
        .. '(another program\'s, or damaged: ' .. #value .. ' bytes)' })
end
local stored = stored_text and stored_text + 0
if stored and stored >= window then
    window, count, stored = stored, count + 0, true
else
    count, stored = 0, false
end
if operation == 'refund' then
    local granted_in = string.find(mark, '^%d+$') and mark + 0
    if not granted_in or granted_in > window then
        error({ err = 'ERR edgelimit: invalid ' .. RECEIPT_MARK .. ': ' .. mark })
    end
    held = granted_in == window and count > 0
    if held then
        count = count > permits and count - permits or 0
        if count <= 0 then
            redis.call('DEL', key)
        else
            redis.call('SET', key, string.format('fw:%d:%d', window, count), 'KEEPTTL')
        end
        stored = count > 0
    end
    permits = 1
end
local window_end = (window + 1) * interval
remaining = limit - count
allowed = permits <= remaining
retry_after = allowed and 0 or window_end - now
remaining = remaining > 0 and remaining or 0
reset = count > 0 and window_end or now
reset_after = window_end


    return allowed, retry_after, remaining, reset, reset_after, held, function()


if stored then
    -- The stored window as it was read: only the count is printed (a concatenated number prints as '%.14g', exact
    -- for counts below 2^32), which costs less than string.format.
    redis.call('SET', key, 'fw:' .. stored_text .. ':' .. count + permits, 'KEEPTTL')
else
    redis.call('SET', key, string.format('fw:%d:%d', window, count + permits), 'PX', window_end - now + grace)
end
granted_mark = window


        return token or string.format('%d:%d', permits, granted_mark)
    end
end

-- Sliding window counter (Cloudflare's and Upstash's approximation): the previous fixed window's count, weighted
-- by how much of it the sliding window still covers, plus the current window's count, must stay within `limit`.
-- O(1) memory whatever the rate. It assumes the previous window's requests were spread evenly: under steady
-- overload it holds the limit exactly, but a burst at the very end of one window followed by steady traffic lets
-- up to nearly twice the limit through in one interval-long span (measured: 1.95×, tests/tests/over_admission.rs).
-- Use GCRA or the sliding log where that matters.
--
-- Exactness of the arithmetic itself: with e ms elapsed in the current window, a request is allowed when
--   previous × (interval − e) + (current + permits) × interval <= limit × interval
-- all in whole numbers, so there is no rounding (Upstash floors the weighted count, which admits a little more).
--
-- State: one string 'sw:<k>:<current>:<previous>': both windows in one key, so in one Cluster slot by construction,
-- read with one GET and written with one SET (… PX when it starts a window, else KEEPTTL: the expiry only moves with
-- the window). The key expires when its current window stops counting, at the end of the next window. The tag 'sw:'
-- says whose value it is: another algorithm's value, or one of no edgelimit algorithm, is refused (foreign_value.lua;
-- a stored quota that changed its algorithm has the old state dropped first, by driver.lua).
--
-- A grant's receipt is '<permits>:<k>', its window. A refund gives the permits back to that window's count while it
-- still counts: the current window, or the previous one (whose count is weighted); never to another window.

-- How driver.lua runs an algorithm: its file's two sections (see prelude.lua) spliced into one function per
-- algorithm (src/lua/compose.rs names it). The function returns the verdict and the grant, as a closure over the
-- decision's locals, for the driver to call once every limit of the call allows.
ALGORITHMS.sliding_window = function(operation, key, permits, limit, interval, rate, lease, mark, now, grace)
    local allowed, retry_after, remaining, reset, reset_after, held, granted_mark, token -- luacheck: ignore token


-- The window, elapsed ms in it, the two counts at `now`, and whether the stored window is this one. A stored
-- window after `now`'s (a caller's clock behind Redis's) stays the current one.
local window = now / interval
window = window - window % 1
local elapsed = now - window * interval
local value = redis.call('GET', key) or ''
local stored_text, current, previous_text = string.match(value, '^sw:(%d+):(%d+):(%d+)$')
if value ~= '' and not stored_text then
    -- Which string algorithm wrote `value`, spliced at each line `--@inline limits/string_tag.lua`
    -- (see src/lua/compose.rs): `tag` is the tag its state starts with in that algorithm's layout
    -- (token bucket 'tb', GCRA 'gcra', fixed window 'fw', sliding window 'sw'), or nil for a value in
    -- none of these layouts (another program's, a damaged state).
    local tag = string.match(value, '^(%l+):%d+:%d+$')
    if not (tag == 'tb' or tag == 'gcra' or tag == 'fw') then
        tag = string.find(value, '^sw:%d+:%d+:%d+$') and 'sw' or nil
    end
    -- A string algorithm's check of its key's value, spliced at each line
    -- `--@inline limits/foreign_value.lua` (see src/lua/compose.rs) after limits/string_tag.lua, where
    -- the value (`value`, '' for no key) is not '' and not in the algorithm's own layout. No such
    -- value is decided on: read as nothing counted, it would be granted on and overwritten. It is
    -- refused as Redis refuses a key of another type (the caller's EDGELIMIT_FOREIGN_STATE):
    --   - another string algorithm's state (`tag`): two limits that share a name with different
    --     algorithms, which would otherwise reset each other's state on every call and limit nothing
    --     (a stored quota whose algorithm changed has that state deleted by driver.lua before it gets
    --     here);
    --   - anything else (another program's value, a damaged state), reported by its length, not its
    --     bytes (another program's secret?).
    if tag then
        error({ err = 'WRONGTYPE edgelimit: the key holds the state of another algorithm (' .. tag
            .. '): two limits share this name with different algorithms; give each its own name' })
    end
    error({ err = 'WRONGTYPE edgelimit: the key holds a value of no edgelimit algorithm '
        .. '(another program\'s, or damaged: ' .. #value .. ' bytes)' })
end
local stored, previous = stored_text and stored_text + 0, previous_text
if not stored or stored < window - 1 then
    stored, current, previous = false, 0, 0
elseif stored == window - 1 then
    stored, current, previous = false, 0, current + 0
else
    window, elapsed, current, previous = stored, now - stored * interval, current + 0, previous + 0
    elapsed, stored = elapsed > 0 and elapsed or 0, true
end
if operation == 'refund' then
    local granted_in = string.find(mark, '^%d+$') and mark + 0
    if not granted_in or granted_in > window then
        error({ err = 'ERR edgelimit: invalid ' .. RECEIPT_MARK .. ': ' .. mark })
    end
    if granted_in == window then
        held = current > 0
        current = current > permits and current - permits or 0
    elseif granted_in == window - 1 then
        held = previous > 0
        previous = previous > permits and previous - permits or 0
    else
        held = false
    end
    if held then
        if current <= 0 and previous <= 0 then
            redis.call('DEL', key)
        elseif stored then
            redis.call('SET', key, string.format('sw:%d:%d:%d', window, current, previous), 'KEEPTTL')
        else
            redis.call('SET', key, string.format('sw:%d:%d:%d', window, current, previous), 'PX',
                (window + 2) * interval - now + grace)
        end
        stored = current > 0 or previous > 0
    end
    permits = 1
end
-- Room left, in units of 1 / interval permits, with the current count and with this request.
local room = limit * interval - previous * (interval - elapsed) - current * interval
remaining = room - room % interval
allowed = room >= permits * interval
remaining = remaining > 0 and remaining / interval or 0
reset = current > 0 and (window + 2) * interval or previous > 0 and (window + 1) * interval or now
reset_after = (window + 2) * interval
retry_after = 0
if not allowed then
    -- The exact ms until `permits` fit: later in this window as the previous window's weight falls; else in the
    -- next window, where the current count becomes the weighted one; else two windows on.
    local free = (limit - current - permits) * interval
    local at = interval
    if free >= 0 and previous > 0 then
        at = interval - (free - free % previous) / previous
    end
    if at < interval then
        retry_after = window * interval + at - now
    else
        at = 0
        if current > 0 then
            free = (limit - permits) * interval
            at = interval - (free - free % current) / current
            at = at > 0 and at or 0
        end
        retry_after = (at < interval and (window + 1) * interval + at or (window + 2) * interval) - now
    end
end


    return allowed, retry_after, remaining, reset, reset_after, held, function()


if stored then
    -- The stored window and previous count as they were read: only the current count is printed (a concatenated
    -- number prints as '%.14g', exact for counts below 2^32), which costs less than string.format.
    redis.call('SET', key, 'sw:' .. stored_text .. ':' .. current + permits .. ':' .. previous_text, 'KEEPTTL')
else
    redis.call('SET', key, string.format('sw:%d:%d:%d', window, current + permits, previous), 'PX',
        (window + 2) * interval - now + grace)
end
granted_mark = window


        return token or string.format('%d:%d', permits, granted_mark)
    end
end

-- GCRA (generic cell rate algorithm, as redis-cell): a burst of `limit` permits, then `rate` permits per `interval`
-- ms. The whole state is one timestamp, the theoretical arrival time (TAT): the cheapest exact limiter. Its
-- decisions equal a token bucket's with the same numbers (a property test checks this on the reference model).
--
-- State: string 'gcra:<ms>:<rem>', TAT = ms + rem / rate, so that an emission interval of interval / rate ms need not
-- be a whole number of ms (3 per second stays exact). The key expires when TAT passes. If `rate` is changed, a
-- stored `rem` is capped at rate - 1: the TAT moves by less than 1 ms. The tag 'gcra:' says whose value it is:
-- another algorithm's value, or one of no edgelimit algorithm, is refused (foreign_value.lua; a stored quota that
-- changed its algorithm has the old state dropped first, by driver.lua).
--
-- A grant's receipt is '<permits>:<unix ms of the grant>'; a refund of it gives back the debt the grant added less
-- what has been paid off since, as token_bucket.lua does (there, with the same reason), but never moves TAT back
-- over permits reserved for a client (lua/parts/reserve/gcra.lua). Those are used at times Redis does not see, up
-- to their slot's start: a later grant given their slots would be used in the same span as they are. (A plain
-- grant is used when it is decided, before any refund after it, so a later grant may take its slot's place.) So the
-- reserve script marks the end of its slots, `floor` (whole ms, rounded up), in `rem`, and every writer keeps the
-- mark until it passes: rem = part + rate × (FLOOR_MARK + TAT's whole ms + 1 − floor), FLOOR_MARK = ⌊2^32 / rate⌋ + 1,
-- so that a marked rem is at least 2^32 and an unmarked one (below rate, below 2^32) is read as before. An edgelimit
-- from before the mark reads a marked rem as rate − 1 (TAT less than 1 ms later: it admits no more).

-- How driver.lua runs an algorithm: its file's two sections (see prelude.lua) spliced into one function per
-- algorithm (src/lua/compose.rs names it). The function returns the verdict and the grant, as a closure over the
-- decision's locals, for the driver to call once every limit of the call allows.
ALGORITHMS.gcra = function(operation, key, permits, limit, interval, rate, lease, mark, now, grace)
    local allowed, retry_after, remaining, reset, reset_after, held, granted_mark, token -- luacheck: ignore token


-- Debt at `now`, in units (see bucket.lua): (TAT - now) × rate, never negative; and the reserved slots' end,
-- `floor` (0 when none is marked).
local debt, floor = 0, 0
local value = redis.call('GET', key) or ''
local ms, rem = string.match(value, '^gcra:(%d+):(%d+)$')
if value ~= '' and not ms then
    -- Which string algorithm wrote `value`, spliced at each line `--@inline limits/string_tag.lua`
    -- (see src/lua/compose.rs): `tag` is the tag its state starts with in that algorithm's layout
    -- (token bucket 'tb', GCRA 'gcra', fixed window 'fw', sliding window 'sw'), or nil for a value in
    -- none of these layouts (another program's, a damaged state).
    local tag = string.match(value, '^(%l+):%d+:%d+$')
    if not (tag == 'tb' or tag == 'gcra' or tag == 'fw') then
        tag = string.find(value, '^sw:%d+:%d+:%d+$') and 'sw' or nil
    end
    -- A string algorithm's check of its key's value, spliced at each line
    -- `--@inline limits/foreign_value.lua` (see src/lua/compose.rs) after limits/string_tag.lua, where
    -- the value (`value`, '' for no key) is not '' and not in the algorithm's own layout. No such
    -- value is decided on: read as nothing counted, it would be granted on and overwritten. It is
    -- refused as Redis refuses a key of another type (the caller's EDGELIMIT_FOREIGN_STATE):
    --   - another string algorithm's state (`tag`): two limits that share a name with different
    --     algorithms, which would otherwise reset each other's state on every call and limit nothing
    --     (a stored quota whose algorithm changed has that state deleted by driver.lua before it gets
    --     here);
    --   - anything else (another program's value, a damaged state), reported by its length, not its
    --     bytes (another program's secret?).
    if tag then
        error({ err = 'WRONGTYPE edgelimit: the key holds the state of another algorithm (' .. tag
            .. '): two limits share this name with different algorithms; give each its own name' })
    end
    error({ err = 'WRONGTYPE edgelimit: the key holds a value of no edgelimit algorithm '
        .. '(another program\'s, or damaged: ' .. #value .. ' bytes)' })
end
local FLOOR_MARK = (2 ^ 32 - 2 ^ 32 % rate) / rate + 1
ms = ms and ms + 0
if ms and ms >= now then
    rem = rem + 0
    if rem < 2 ^ 32 then
        debt = (ms - now) * rate + (rem < rate and rem or rate - 1)
    else
        local part = rem % rate
        debt = (ms - now) * rate + part
        floor = ms + 1 + FLOOR_MARK - (rem - part) / rate
    end
end
if operation == 'refund' then
    local granted = string.find(mark, '^%d+$') and mark + 0
    if not granted or granted > now then
        error({ err = 'ERR edgelimit: invalid ' .. RECEIPT_MARK .. ': ' .. mark })
    end
    local taken, elapsed = permits * interval, now - granted
    local span = taken + rate - 1
    local credit = elapsed < (span - span % rate) / rate and taken - elapsed * rate or 0
    -- The debt a refund leaves at least: the reserved slots' (never more than there is).
    local least = floor > now and math.min((floor - now) * rate, debt) or 0
    held = credit > 0 and debt > least
    if held then
        debt = debt - credit > least and debt - credit or least
        if debt <= 0 then
            redis.call('DEL', key)
        else
            -- GCRA's state write (see gcra.lua), one piece for every writer, spliced at each line
            -- `--@inline limits/gcra_write.lua` (see src/lua/compose.rs). From `debt` (units owed, more than 0)
            -- and `floor` (the reserved slots' end, or 0): TAT = now + debt / rate, the slots' end marked in the
            -- remainder while ahead; the key expires when TAT passes.
            local part = debt % rate
            local whole_ms = now + (debt - part) / rate
            if floor > now then
                part = part + rate * (FLOOR_MARK + whole_ms + 1 - floor)
            end
            local lifetime = debt + rate - 1
            redis.call('SET', key, string.format('gcra:%d:%d', whole_ms, part), 'PX',
                (lifetime - lifetime % rate) / rate + grace)
        end
    end
    permits = 1
end
-- The verdict over units (bucket.lua), with `available` = full − debt.
local full = limit * interval
local available = full - debt
local left = available - permits * interval
local fill = debt + rate - 1
allowed, remaining, reset = left >= 0, available - available % interval, now + (fill - fill % rate) / rate
remaining = remaining > 0 and remaining / interval or 0
fill = full - left + rate - 1
reset_after = now + (fill - fill % rate) / rate
if allowed then
    retry_after = 0
else
    fill = rate - 1 - left
    retry_after = (fill - fill % rate) / rate
end


    return allowed, retry_after, remaining, reset, reset_after, held, function()


-- The debt after the grant (at least one permit's: never none), due when TAT passes: at `reset_after`.
debt = full - left
-- GCRA's state write (see gcra.lua), one piece for every writer, spliced at each line
-- `--@inline limits/gcra_write.lua` (see src/lua/compose.rs). From `debt` (units owed, more than 0)
-- and `floor` (the reserved slots' end, or 0): TAT = now + debt / rate, the slots' end marked in the
-- remainder while ahead; the key expires when TAT passes.
local part = debt % rate
local whole_ms = now + (debt - part) / rate
if floor > now then
    part = part + rate * (FLOOR_MARK + whole_ms + 1 - floor)
end
local lifetime = debt + rate - 1
redis.call('SET', key, string.format('gcra:%d:%d', whole_ms, part), 'PX',
    (lifetime - lifetime % rate) / rate + grace)
granted_mark = now


        return token or string.format('%d:%d', permits, granted_mark)
    end
end

-- Concurrency limiter (Stripe's "N in flight"): at most `limit` permits held at once. A grant is a lease that the
-- holder gives back with release; a lease not given back expires `interval` ms after it was granted, so a crashed
-- holder cannot leak capacity.
--
-- State: a log of grants (zset_member.lua, zset_log.lua) where each lease frees when it expires, unless released
-- sooner.
-- The lease token given to the holder is its receipt, '<permits>:<expiry>-<lease id>'. The wait for a denied request
-- is an upper bound: holders may release sooner. After the interval was lowered, older leases still run to their
-- own expiry (log_grant keeps the log in expiry order).

-- How driver.lua runs an algorithm: its file's two sections (see prelude.lua) spliced into one function per
-- algorithm (src/lua/compose.rs names it). The function returns the verdict and the grant, as a closure over the
-- decision's locals, for the driver to call once every limit of the call allows.
ALGORITHMS.concurrency = function(operation, key, permits, limit, interval, rate, lease, mark, now, grace)
    local allowed, retry_after, remaining, reset, reset_after, held, granted_mark, token -- luacheck: ignore token


local in_log, first_position, last_run
held, permits, allowed, retry_after, remaining, reset, reset_after, in_log, first_position, last_run =
    log_decision(operation, key, permits, limit, interval, lease, mark, now)


    return allowed, retry_after, remaining, reset, reset_after, held, function()


-- A grant is a lease: its receipt is the token that releases it.
token = log_grant(key, permits, interval, lease, now, grace, reset_after, in_log, first_position, last_run, reset)
granted_mark = now + interval


        return token or string.format('%d:%d', permits, granted_mark)
    end
end

-- Sliding log: a request of `permits` at `now` is allowed while the permits granted in (now - interval, now] plus
-- these stay within `limit`. Exact over every interval-long span, at the cost of one zset member per grant in the
-- window, whatever its permits.
--
-- State: a log of grants (zset_member.lua, zset_log.lua) where every grant frees at exactly grant time + interval: a
-- concurrency lease that is never released early. So the wait for a denied request is exact, and the key expires
-- when the newest grant leaves the window. Unlike src/redisson (Redisson's layout, one config shared by name),
-- the quota comes with each request, so one script limits any identifier next to the other algorithms.

-- How driver.lua runs an algorithm: its file's two sections (see prelude.lua) spliced into one function per
-- algorithm (src/lua/compose.rs names it). The function returns the verdict and the grant, as a closure over the
-- decision's locals, for the driver to call once every limit of the call allows.
ALGORITHMS.sliding_log = function(operation, key, permits, limit, interval, rate, lease, mark, now, grace)
    local allowed, retry_after, remaining, reset, reset_after, held, granted_mark, token -- luacheck: ignore token


local in_log, first_position, last_run
held, permits, allowed, retry_after, remaining, reset, reset_after, in_log, first_position, last_run =
    log_decision(operation, key, permits, limit, interval, lease, mark, now)


    return allowed, retry_after, remaining, reset, reset_after, held, function()


-- The receipt names the grant, to give it back exactly.
token = log_grant(key, permits, interval, lease, now, grace, reset_after, in_log, first_position, last_run, reset)
granted_mark = now + interval


        return token or string.format('%d:%d', permits, granted_mark)
    end
end


local count = #KEYS / 2
if count < 1 or count % 1 ~= 0 then
    reject('number of keys (two per limit: config, state)', #KEYS)
end
if #ARGV ~= 2 + 6 * count then
    reject('number of arguments (2, then 6 per limit)', #ARGV)
end
-- A refund writes as it decides (see prelude.lua): with one limit per call, nothing is written before every check.
if operation == 'refund' and count ~= 1 then
    reject('number of limits to refund (one per call)', count)
end

-- The i-th limit: a record of its checked request, quota and algorithm, from its arguments or its stored config,
-- and its status when it cannot be decided ('not_configured', 'exceeds_limit'), else false.
local function limit_of(i)
    local base = 6 * i - 4
    local name, limit, interval, rate = ARGV[base + 1], ARGV[base + 3], ARGV[base + 4], ARGV[base + 5]
    local stored_in
    if name == '' then
        stored_in = KEYS[2 * i - 1]
        local stored = redis.call('HMGET', stored_in, 'algorithm', 'limit', 'interval', 'rate')
        if not stored[1] then
            whole(ARGV[base + 2], 'permits', 1, MAX_COUNT)
            return { limit = 0, status = 'not_configured' }
        end
        name, limit, interval, rate = stored[1], stored[2], stored[3], stored[4]
    end
    local lease = ARGV[base + 6]
    local permits, n_limit, n_interval, n_rate, mark = request_of(ARGV[base + 2], limit, interval, rate, lease,
        stored_in)
    local algorithm = ALGORITHMS[name]
    if not algorithm then
        reject((stored_in and 'stored ' or '') .. 'algorithm (not in this script)', name)
    end
    if stored_in then
        -- A stored quota whose algorithm changed may find another algorithm's state: a permit log (a zset) under a
        -- string algorithm, a string under a log, or another string algorithm's value (each is tagged with its
        -- algorithm). It means nothing to the new algorithm, so it starts fresh. The one write before every check:
        -- if the call then fails, that state is gone a little sooner, which is what the next grant would have
        -- done. Any other type (hash, list, ...) or untagged string was written by no edgelimit algorithm: foreign
        -- state, left as it is for Redis's WRONGTYPE (or foreign_value.lua) to report. Only this path forgives
        -- another algorithm's state: under a quota in the arguments it is two limits sharing a name with different
        -- algorithms, which would reset each other on every call, and is refused (foreign_value.lua).
        local kind = redis.call('TYPE', KEYS[2 * i]).ok
        local logs = name == 'concurrency' or name == 'sliding_log'
        local other_string = false
        if kind == 'string' and not logs then
            local tag = string_algorithm_tag(redis.call('GET', KEYS[2 * i]))
            other_string = tag and tag ~= STRING_TAGS[name]
        end
        -- Dropped only by a decision (a peek writes nothing), and only when the state key is this config's limiter's
        -- (`<prefix>:{<name>}:<id>`, or `<prefix>:v2{<id>}:<name>`): a caller pairing any stored config of another
        -- algorithm with any state key had wiped sliding logs, GCRA and leases with one peek (review).
        local prefix, limiter_name = string.match(stored_in, '^(.*):{([^{}]*)}$')
        local state = KEYS[2 * i]
        local own = prefix and (string.sub(state, 1, #stored_in + 1) == stored_in .. ':'
            or (string.sub(state, 1, #prefix + 4) == prefix .. ':v2{'
                and string.sub(state, -(#limiter_name + 2)) == '}:' .. limiter_name))
        local other = (kind == 'zset' and not logs) or (kind == 'string' and logs) or other_string
        if own and operation ~= 'peek' and other then
            redis.call('DEL', state)
        end
    end
    return {
        key = KEYS[2 * i], permits = permits, limit = n_limit, interval = n_interval, rate = n_rate,
        lease = lease, mark = mark, algorithm = algorithm,
        status = operation ~= 'refund' and permits > n_limit and 'exceeds_limit',
    }
end

-- Every limit is read and checked before any is decided. A state key named twice is refused: both would be decided
-- on one reading of it and both granted, twice its permits past one check (20 permits on a limit of 10).
local limits, commit, named = {}, operation == 'limit', {}
for i = 1, count do
    if named[KEYS[2 * i]] then
        reject('state key (named twice in one call: decide a limit once, with the permits summed)', KEYS[2 * i])
    end
    named[KEYS[2 * i]] = true
    local limit = limit_of(i)
    limits[i] = limit
    commit = commit and not limit.status
end

for _, limit in ipairs(limits) do
    if limit.status then
        -- Not decided (see limit_of): nothing to report but the limit, when it is known.
        limit.remaining, limit.reset, limit.retry_after = 0, 0, 0
    else
        local held
        limit.allowed, limit.retry_after, limit.remaining, limit.reset, limit.reset_after, held, limit.grant =
            limit.algorithm(operation, limit.key, limit.permits, limit.limit, limit.interval, limit.rate, limit.lease,
                limit.mark, now, grace)
        if operation == 'refund' then
            limit.status, limit.retry_after = held and 'refunded' or 'not_held', 0
        end
        commit = commit and limit.allowed
    end
end

local reply = {}
for i, limit in ipairs(limits) do
    -- A status already set was decided above: a refund, or a limit that could not be decided.
    local status, remaining, reset, token = limit.status, limit.remaining, limit.reset, ''
    if not status then
        if not limit.allowed then
            status = 'denied'
        elseif not commit then
            status = 'allowed'
        else
            token = limit.grant()
            status, remaining, reset = 'granted', remaining - limit.permits, limit.reset_after
        end
    end
    local at = 6 * i - 6
    reply[at + 1], reply[at + 2], reply[at + 3] = status, limit.limit, remaining
    reply[at + 4], reply[at + 5], reply[at + 6] = reset, limit.retry_after, token
end
return reply
