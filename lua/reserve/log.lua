-- The `reserve/sliding_log` and `reserve/concurrency` scripts: permits of a log limit reserved for one client to
-- grant locally, with no round trip (src/limit/reserved.rs), on the `<algorithm>` script's log (zset_member.lua);
-- the algorithm's decision and grant are spliced in. A reserved permit's use is a grant (sliding log) or a lease
-- lent out (concurrency); the log treats both alike.
--
-- Reserved permits are logged as up to MAX_TRANCHES grants, tranches named '<id>+<start>', each usable from its
-- start for the horizon and freeing one interval after. A sliding log books tranches ahead, as earlier grants free,
-- paced at the client's request rate. A client done with a tranche returns it: its unused permits leave the log
-- and its used ones are logged again as groups '<id>.' freeing one interval after their last use. No refund can
-- name a tranche or a group (a receipt's mark has no '+' or '.'). Why this is exact: docs/design/reserve.md.
--
--   KEYS[1]  the state key (the one the `<algorithm>` script decides on)
--   ARGV[1]  the request and its quota, as that script's: '<permits>:<limit>:<interval ms>'
--   ARGV[2]  '<block>:<lead ms>:<horizon ms>[:<pace ms>[:only]]' (lua/reserve/arguments.lua): the permits to
--            reserve besides the request's, the least time from now they must be usable for, how far from now they
--            may be used, and the time between the client's requests (the pace); ':only' reserves without taking
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
-- granted (`granted`, all or 0) as the `<algorithm>` script decides them; `reserved` permits for the
-- caller in tranches, the first usable from now + `from` until now + `from` + the horizon, both included, and each
-- pair after the seventh number another tranche of `permits` (taken from `reserved`) and its `from`, later; then the
-- standing after the call: permits left now (none while reserved permits wait for their start), when the log frees
-- its last grant, and for a denied request the ms until it fits (before its block: the client waits for the first
-- tranche's start instead). A tranche holds a whole number of requests of the request's size, so that one tranche
-- answers a request.

local MAX_TRANCHES, MAX_GROUPS = 8, 16
-- Only a sliding log books ahead: a concurrency lease is mostly released well before its expiry, and a permit
-- booked for then would sit idle (counted from now) meanwhile. build.rs replaces the name.
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
-- The grant id, checked before any return writes (log_decision checks it again): a call refused writes nothing.
check_grant_id(id)

-- A return read, or nil: {expiry, id, permits, groups = {{count, last_use}…}}. Only anchored patterns: a searching
-- one is quadratic in a long run of digits, inside one C call the script timeout cannot interrupt. No use is put
-- before the tranche's span can have begun (expiry - interval - horizon): that would free its permits early.
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

-- The returns, all checked before any is applied (a call refused writes nothing), and applied before the request
-- is decided, so the permits they free count for it.
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

-- The request, decided and logged by lua/limits/<algorithm>.lua's decision and grant, spliced here.
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

-- The reserved permits in tranches of whole requests: as many as asked that start within the horizon. After a
-- denial the first tranche's start is the wait the client reports. The log's standing is read again after each
-- grant (a rare path: a client reserves when its permits run out).
local reply = { granted, now, 0, 0, remaining, reset, retry_after }
if block > 0 then
    local _, _, room, last_expiry, after, standing, first, tail_run, future, count =
        log_verdict(key, 0, limit, interval, now)
    -- Whole requests: those that fit now in one tranche, usable at once; a sliding log books the others ahead in the
    -- tranches left, each no earlier than this client's requests reach it at `pace`.
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
        -- A tranche starting later is named with its start (zset_log.lua).
        local name = from > 0 and string.format('%s+%d', id, start) or id .. '+'
        log_grant(key, size * permits, frees, name, now, grace, math.max(after, now + frees), standing, first,
            tail_run, last_expiry)
        -- At least 1 ms apart, so tranches differ in the expiry a return names them by: a return sent twice must
        -- not remove a second, alike tranche.
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
