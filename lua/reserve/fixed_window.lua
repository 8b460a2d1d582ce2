-- lua/reserve/fixed_window.lua: GENERATED from lua/parts/ (src/lua/compose.rs). Edit the parts, then run scripts/lua.

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

-- Permits of a fixed-window limit reserved for one client to grant locally, with no round trip
-- (src/limit/reserved.rs). The script shares its state with lua/fixed_window.lua's decisions on the same key
-- ('fw:<window>:<count>', see lua/parts/limits/fixed_window.lua), so reserved and plain decisions mix.
--
-- Why it is exact. Reserved permits are counted in the current window when they are reserved, and the client uses
-- them before that window ends (or the horizon, whichever comes first). So every permit used in a window was
-- counted in it, and no window counts more than the limit. What is not used by then is lost: under-admission,
-- never over.
--
--   KEYS[1]  the state key (the one lua/fixed_window.lua decides on)
--   ARGV[1]  the request and its quota, as lua/fixed_window.lua's: '<permits>:<limit>:<interval ms>'
--   ARGV[2]  '<block>:<lead ms>:<horizon ms>[:<pace ms>[:only]]' (lua/parts/reserve/arguments.lua): the permits to
--            reserve besides the request's, the least time from now they must be usable for, how far from now they
--            may be used (a pace is read and not used); ':only' reserves without taking the request
--   ARGV[3]  unix ms, or '' (the default) for the Redis server's clock
--
-- Reply {granted, now, reserved, usable, remaining, reset, retry_after}: the request's permits granted (`granted`,
-- all or 0) as lua/fixed_window.lua decides them; `reserved` permits for the caller, each usable from now until
-- now + `usable` ms, both included (the window's last ms, or the horizon); then the standing after the call:
-- permits left in the window, when the limit is whole again, and for a denied request the ms until it fits.

check_call(2, 3)
local key, request, time = KEYS[1], ARGV[1], ARGV[3] or ''
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
local block, lead, horizon, _, only = block_of(ARGV[2], limit)
local now = clock(time)
local grace = time == '' and 0 or EXPLICIT_TIME_GRACE_MS

-- The request, decided by lua/fixed_window.lua's own decision (spliced here from
-- lua/parts/limits/fixed_window.lua, so the two read the state and judge a request alike): the current window
-- (`window`, ending at `window_end`) and the permits counted in it (`count`), then the verdict. Its refund branch
-- never runs here.
local operation, mark = 'limit', nil
-- (The verdict's other fields and `stored` are for lua/fixed_window.lua's reply and grant: luacheck need not say
-- this script reads none.)
-- luacheck: push ignore remaining reset reset_after held stored
local allowed, retry_after, remaining, reset, reset_after, held

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

-- luacheck: pop

-- (A call that reserves only takes nothing for the request.)
local granted = allowed and not only and permits or 0
count = count + granted

-- The reserved permits: what is asked and left in the window, if the window leaves the client `lead` ms to use them.
-- The window's last ms is window_end - 1: a permit used at window_end would count in the next window.
local usable = math.min(window_end - 1 - now, horizon)
local left = limit - count
local reserved = usable >= lead and left > 0 and math.min(block, left) or 0
count = count + reserved
if granted + reserved > 0 then
    redis.call('SET', key, string.format('fw:%d:%d', window, count), 'PX', window_end - now + grace)
end

-- The count may exceed a limit lowered since: nothing is left then.
return { granted, now, reserved, usable, math.max(limit - count, 0), count > 0 and window_end or now, retry_after }
