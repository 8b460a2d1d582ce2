-- lua/batch/gcra.lua: GENERATED from lua/parts/ (src/lua/compose.rs). Edit the parts, then run scripts/lua.

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

-- Several decisions of one algorithm in one call: what concurrent callers of one limiter decide at once
-- (src/limit/merged.rs), each as lua/<algorithm>.lua decides its common call (operation 'limit', one limit whose
-- quota comes with the request, on the server's clock), one after the other, each on the state the ones before it
-- left. What the call costs besides the decisions (the call itself, reading its arguments, TIME) is paid once for
-- all of them, which is most of a single call's cost for the cheap algorithms (bench/instructions.mjs).
--
--   KEYS[i]            the i-th decision's state key
--   ARGV[i]            its request and quota, as lua/<algorithm>.lua's ARGV[1]
--   ARGV[#KEYS + i]    its grant id, for an algorithm that logs grants (concurrency, sliding log); absent otherwise
--
-- The reply has one entry per decision: what lua/<algorithm>.lua replies to that call, or for a decision the script
-- refuses (a request no client sends, state in no known layout) the text '!' followed by the error: a decision's
-- error is its own, and the others are still decided.

local server_time = redis.call('TIME')
-- The server's clock as TIME gave it (seconds, microseconds), for a reply that carries it as text.
local seconds, micros = server_time[1], server_time[2] -- luacheck: ignore seconds micros
local now = micros + 0
now = seconds * 1000 + (now - now % 1000) / 1000
local operation, mark, grace = 'limit', nil, 0

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


local function decide(key, request, lease)
    local permits, limit, interval, rate = string.match(request, '^(%d+):(%d+):(%d+):(%d+)$')
    if permits then
        permits, limit, interval, rate = permits + 0, limit + 0, interval + 0, rate + 0
    end
    -- The request's check, after its numbers are read from `request` (see src/lua/compose.rs): shared by the
    -- single-limit frame (single.lua), the frame that decides several requests in one call (batch.lua) and the scripts
    -- that reserve permits (lua/parts/reserve/).
    if not permits or permits < 1 or permits > MAX_COUNT or limit < 1 or limit > MAX_COUNT or interval < 1
        or rate < 1 or rate > MAX_COUNT or limit * interval > 2 ^ 52 then
        error({ err = 'ERR edgelimit: invalid request (<permits>:<limit>:<interval ms>[:<rate>], whole numbers from 1, '
            .. 'permits, limit and rate below 2^32, limit × interval at most 2^52): ' .. string.sub(request, 1, 100) })
    end
    if permits > limit then
        return { 5, 0, 0, 0 }
    end
    -- The verdict, set by the decision, and the grant's mark, set by the grant (see single.lua); not every reply
    -- reads each.
    -- luacheck: push ignore reset_after granted_mark token held
    local allowed, retry_after, remaining, reset, reset_after, held, granted_mark, token
    -- luacheck: pop


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

    if not allowed then
        return 'd' .. seconds .. ':' .. micros .. ':' .. value
    end


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

    return 'g' .. seconds .. ':' .. micros .. ':' .. value
end

local replies, count = {}, #KEYS
for i = 1, count do
    local decided, reply = pcall(decide, KEYS[i], ARGV[i], ARGV[count + i] or '')
    if not decided then
        reply = '!' .. (type(reply) == 'table' and reply.err or tostring(reply))
    end
    replies[i] = reply
end
return replies
