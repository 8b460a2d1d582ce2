-- lua/batch/token_bucket.lua: GENERATED from lua/parts/ (src/lua/compose.rs). Edit the parts, then run scripts/lua.

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

    if not allowed then
        return 'd' .. seconds .. ':' .. micros .. ':' .. value
    end


    -- The key expires when the bucket is full again: at `reset_after` from `at` (later than now on a caller's clock
    -- behind Redis's). A grant takes at least one permit, so the bucket is never full after it.
    redis.call('SET', key, string.format('tb:%d:%d', left, at), 'PX', at - now + reset_after - now + grace)
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
