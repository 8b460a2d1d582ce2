-- Permits of a sliding-log or concurrency limit reserved for one client to grant locally, with no round trip
-- (src/limit/reserved.rs): lua/reserve/sliding_log.lua and lua/reserve/concurrency.lua, each with its algorithm's
-- decision and grant spliced in. The script shares its state with the algorithm's single-limit script on the same key
-- (lua/sliding_log.lua or lua/concurrency.lua: the log of grants, lua/limits/zset_member.lua), so reserved and
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
-- (lua/limits/zset_log.lua, log_future). Each decision, at e, admits its permits, first used at f >= e, only if
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
--   ARGV[2]  '<block>:<lead ms>:<horizon ms>[:<pace ms>[:only]]' (lua/reserve/arguments.lua): the permits to
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
-- spliced in by build.rs.)
local BOOKS_AHEAD = '__ALGORITHM__' == 'sliding_log'
-- The longest return a client writes is about 500 bytes (16 groups of two numbers of up to 16 digits, a 64-byte id).
local MAX_RETURN_BYTES = 1024

check_call(3, 4 + 100) -- at most 100 returns
local key, request, id, time = KEYS[1], ARGV[1], ARGV[3], ARGV[4] or ''
--@request
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
-- lua/limits/<algorithm>.lua; log_decision checks the grant id).
local operation, lease, mark = 'limit', id, nil
-- luacheck: push ignore held granted_mark token
local allowed, retry_after, remaining, reset, reset_after, held, granted_mark, token
-- luacheck: pop

--@decision

-- (A call that reserves only takes nothing for the request.)
local granted = 0
if allowed and not only then
    granted = permits
--@grant
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
