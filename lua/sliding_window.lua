-- lua/sliding_window.lua: GENERATED from lua/parts/ (src/lua/compose.rs). Edit the parts, then run scripts/lua.

-- Shared by every edgelimit script (prepended at compile time, see src/script.rs): argument checks and the clock.
--
-- A script's text runs from the top on every call, so every function defined here (and in the files after it) is a
-- new closure per call: keep them few. What costs most inside Redis is calling C (tonumber, string functions, every
-- redis.call) and allocating (tables, closures, new strings); plain Lua arithmetic is cheap. `bench/` measures it.

-- Rejects an argument no edgelimit client sends (a hand-made call): a clean Redis error reply naming the argument,
-- instead of a Lua runtime error with a stack trace.
local function reject(what, value)
    error({ err = 'ERR edgelimit: invalid ' .. what .. ': ' .. tostring(value) })
end

-- A whole number within [low, high] from an argument (nil, or text), or nil.
local function whole_number(text, low, high)
    local n = text and tonumber(text)
    if n and n % 1 == 0 and n >= low and n <= high then
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

-- The algorithm family, shared prelude: after lua/parts/common.lua, before the algorithms' files and the helpers they
-- share (bucket.lua; zset_member.lua and zset_log.lua). src/lua/compose.rs composes two kinds of script from the same
-- files:
--   single.lua  one limit with its quota in the arguments, the common call: the algorithm's code runs inline,
--               straight-line, because inside Redis every function a script defines is a new closure on every call
--               and every Lua call and table costs (bench/ measures it);
--   driver.lua  several limits at once, or a quota stored in Redis: entry.lua wraps each algorithm in a function.
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
--   mark                                      on a refund, the receipt's mark (checked by request_of, below): what
--                                             names the grant in the algorithm's terms; else nil
--   now, grace                                unix ms; extra ms of expiry for state written at an explicit time
-- and the verdict, which the decision sets:
--   allowed, retry_after                      retry_after = ms until it could be allowed (0 if it is)
--   remaining, reset                          the standing without this request: permits left, and the unix ms at
--                                             which the limit is whole again if no request comes
--   reset_after                               `reset` with the grant (remaining is then remaining - permits)
--   held                                      false when a refund gave nothing back (the grant's permits had
--                                             freed, refilled or left the counted windows; a lease not held)
--   token                                     set by the grant: its receipt, '<permits>:<mark>', the mark a grant
--                                             id (concurrency, sliding log), the grant's unix ms (token bucket,
--                                             GCRA) or its window's index (fixed and sliding window). A refund names
--                                             the grant by it, so it gives back exactly what that grant took.
-- Locals the decision declares are the grant's to use.
--
-- All arithmetic is on whole numbers below 2^53, where Lua's doubles are exact: quotas are checked so that
-- limit × interval stays below 2^52 (request_of, below), and no product below grows past that.

local MAX_COUNT = 2 ^ 32 - 1

-- State of a request made at an explicit time lives this much longer than it matters: that caller's clock may run
-- behind Redis's, and state must not expire in Redis's time while it still counts in the caller's. Under server
-- time (the default) keys vanish exactly when they stop mattering.
local EXPLICIT_TIME_GRACE_MS = 60000

-- Why a refund's receipt mark is refused by the algorithm that reads it (a whole number for the time and window
-- algorithms, never after the server's clock): a hand-made receipt, or another algorithm's.
local RECEIPT_MARK = 'receipt mark (not a grant of this limit: a time or window after the server clock, or no number)'

-- The call, the same in both frames: ARGV[1] is the operation, ARGV[2] unix ms or '' for the server's clock.
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


-- One limit whose quota comes with the request: the common call, and the cheapest script of the family. The
-- algorithm's file is spliced in at the markers (src/lua/compose.rs), so its code runs straight through, with
-- no closures, tables or calls besides its own helpers'.
--
--   KEYS[1]  the state key
--   ARGV     operation and time (read by prelude.lua), then permits, limit, interval (ms), rate, lease (a grant id,
--            or the receipt to refund)
--
-- The reply is driver.lua's for one limit: status, limit, remaining, reset, retry_after, receipt or ''.

if #KEYS ~= 1 or #ARGV ~= 7 then
    reject('call (1 key, the state key; 7 arguments)', #KEYS .. ' keys, ' .. #ARGV .. ' arguments')
end
local key, lease = KEYS[1], ARGV[7]
local permits, limit, interval, rate, mark = request_of(ARGV[3], ARGV[4], ARGV[5], ARGV[6], lease)
if operation ~= 'refund' and permits > limit then
    return { 'exceeds_limit', limit, 0, 0, 0, '' }
end
-- The verdict, set by the decision (held only on a refund: unset, it reads as nothing given back), and the receipt,
-- set by the grant.
local allowed, retry_after, remaining, reset, reset_after, held, token

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
-- says whose value it is: another algorithm's (a stored quota that changed its algorithm) matches no pattern here
-- and is read as nothing counted.
--
-- A grant's receipt is '<permits>:<k>', its window. A refund gives the permits back to that window's count while it
-- still counts: the current window, or the previous one (whose count is weighted); never to another window.

-- Exact ms until `permits` fit, when they do not fit now: later in this window as the previous window's weight
-- falls; else in the next window, where the current count becomes the weighted one; else two windows on.
local function sliding_retry_after(permits, limit, interval, now, window, current, previous)
    local room = (limit - current - permits) * interval
    if room >= 0 and previous > 0 then
        local elapsed = interval - (room - room % previous) / previous
        if elapsed < interval then
            return window * interval + elapsed - now
        end
    end
    local elapsed = 0
    if current > 0 then
        local weighted = (limit - permits) * interval
        elapsed = interval - (weighted - weighted % current) / current
        elapsed = elapsed > 0 and elapsed or 0
    end
    if elapsed < interval then
        return (window + 1) * interval + elapsed - now
    end
    return (window + 2) * interval - now
end

local function write_sliding(key, interval, window, current, previous, stored, now, grace)
    if current <= 0 and previous <= 0 then
        redis.call('DEL', key)
    elseif stored then
        redis.call('SET', key, string.format('sw:%d:%d:%d', window, current, previous), 'KEEPTTL')
    else
        redis.call('SET', key, string.format('sw:%d:%d:%d', window, current, previous), 'PX',
            (window + 2) * interval - now + grace)
    end
end



-- The window, elapsed ms in it, the two counts at `now`, and whether the stored window is this one. A stored
-- window after `now`'s (a caller's clock behind Redis's) stays the current one.
local window = now / interval
window = window - window % 1
local elapsed = now - window * interval
local stored, current, previous = string.match(redis.call('GET', key) or '', '^sw:(%d+):(%d+):(%d+)$')
stored = stored and stored + 0
if not stored or stored < window - 1 then
    stored, current, previous = false, 0, 0
elseif stored == window - 1 then
    stored, current, previous = false, 0, current + 0
else
    window, elapsed, current, previous = stored, now - stored * interval, current + 0, previous + 0
    elapsed, stored = elapsed > 0 and elapsed or 0, true
end
if operation == 'refund' then
    local granted_in = string.find(mark, '^%d+$') and whole_number(mark, 0, window) or reject(RECEIPT_MARK, mark)
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
        write_sliding(key, interval, window, current, previous, stored, now, grace)
        stored = current > 0 or previous > 0
    end
    permits = 1
end
-- Room left, in units of 1 / interval permits, with the current count and with this request.
local room = limit * interval - previous * (interval - elapsed) - current * interval
local room_after = room - permits * interval
remaining = room - room % interval
allowed = room_after >= 0
retry_after = allowed and 0 or sliding_retry_after(permits, limit, interval, now, window, current, previous)
remaining = remaining > 0 and remaining / interval or 0
reset = current > 0 and (window + 2) * interval or previous > 0 and (window + 1) * interval or now
reset_after = (window + 2) * interval


if operation == 'refund' then
    return { held and 'refunded' or 'not_held', limit, remaining, reset, 0, '' }
elseif operation == 'peek' or not allowed then
    return { allowed and 'allowed' or 'denied', limit, remaining, reset, retry_after, '' }
end


write_sliding(key, interval, window, current + permits, previous, stored, now, grace)
token = string.format('%d:%d', permits, window)


return { 'granted', limit, remaining - permits, reset_after, 0, token }
