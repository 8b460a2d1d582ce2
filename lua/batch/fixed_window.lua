-- lua/batch/fixed_window.lua: GENERATED from lua/parts/ (src/lua/compose.rs). Edit the parts, then run scripts/lua.

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


local function decide(key, request, lease)
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
    if permits > limit then
        return { 5, 0, 0, 0 }
    end
    -- The verdict, set by the decision, and the grant's mark, set by the grant (see single.lua); not every reply
    -- reads each.
    -- luacheck: push ignore reset_after granted_mark token held
    local allowed, retry_after, remaining, reset, reset_after, held, granted_mark, token
    -- luacheck: pop


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

    if not allowed then
        return 'd' .. seconds .. ':' .. micros .. ':' .. value
    end


    if stored then
        -- The stored window as it was read: only the count is printed (a concatenated number prints as '%.14g', exact
        -- for counts below 2^32), which costs less than string.format.
        redis.call('SET', key, 'fw:' .. stored_text .. ':' .. count + permits, 'KEEPTTL')
    else
        redis.call('SET', key, string.format('fw:%d:%d', window, count + permits), 'PX', window_end - now + grace)
    end
    granted_mark = window

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
