-- Permits of a sliding-log limit reserved for one client to grant locally, with no round trip
-- (src/limit/reserved.rs). The script shares its state with lua/sliding_log.lua's decisions on the same key (the
-- log of grants, lua/parts/limits/zset_member.lua), so reserved and plain decisions mix.
--
-- Why it is exact. Each grant in the log frees one interval after the last moment it may be used: a plain grant at g
-- frees at g + interval; reserved permits, usable from f (now, or when as many permits have freed as they are) until
-- f + horizon, free at f + horizon + interval. And each decision, at e, admits its permits, first used at f ≥ e,
-- only if the permits in the log that free after f, plus these, stay within the limit (a plain decision: f = e).
-- Take any span (t − interval, t], the grants used in it, and among them the one Redis decided last, at e, first
-- used at f ≤ t. Every grant used in the span frees after t ≥ f, and every other one was in the log at e (decided
-- before it); so they are within what the decision at e counted, and within the limit.
--
-- Returns. Held to the horizon's end, reserved permits would free half an interval late at a client that uses them
-- at once (a hot identifier): a client that is done with a block (used up, or its span over) says how many of its
-- permits it used when it next asks for that identifier, and the block frees earlier. The unused ones are removed,
-- and the used ones are logged again to free one interval after the last use: every use came before the call that
-- returns them (so before now), and the client says the latest server time its last use may have had (from its own
-- clock: only ever later than now makes it free later, so the latest of the two is taken, and never later than the
-- block's own expiry). A span holding a use then ends before that time + interval, and in it the argument above
-- holds with the return's now for the reservation's. A return names the block by its grant ('<expiry>-<id>', as a
-- receipt does) and carries the absolute number used, not a difference: a return sent twice finds no block the
-- second time and changes nothing.
--
--   KEYS[1]  the state key (the one lua/sliding_log.lua decides on)
--   ARGV[1]  the request and its quota, as lua/sliding_log.lua's: '<permits>:<limit>:<interval ms>'
--   ARGV[2]  '<block>:<lead ms>:<horizon ms>' (lua/parts/reserve/arguments.lua): the permits to reserve besides the
--            request's, the least time from now they must be usable for, how far from now they may be used
--   ARGV[3]  a fresh grant id (letters, digits, _ or -), as lua/sliding_log.lua's: the request's grant and the
--            reserved permits are logged under it
--   ARGV[4]  unix ms, or '' (the default) for the Redis server's clock
--   ARGV[5…] returns, each '<expiry>-<id>:<permits>:<used>:<last use>': the block reserved as the grant
--            '<expiry>-<id>' of `permits` (the expiry and id its reservation logged), of which `used` were used (0 to
--            permits), the last at `last use` (unix ms) at the latest
--
-- Reply {granted, now, reserved, from, remaining, reset, retry_after}: the request's permits granted (`granted`,
-- all or 0) as lua/sliding_log.lua decides them; `reserved` permits for the caller, each usable from now + `from`
-- until now + `from` + the horizon, both included; then the standing after the call: permits left now (none while
-- reserved permits wait for their start), when the log frees its last grant, and for a denied request the ms until
-- it fits (before its block: the client waits for the block's start instead).

check_call(3, 4 + 100) -- at most 100 returns
local key, request, id, time = KEYS[1], ARGV[1], ARGV[3], ARGV[4] or ''
--@request
check_within_limit(request, permits, limit)
local block, _, horizon = block_of(ARGV[2], limit)
local now = clock(time)
local grace = time == '' and 0 or EXPLICIT_TIME_GRACE_MS

-- The returns, before the request is decided, so that the permits they free count for it.
for i = 5, #ARGV do
    local expiry, returned_id, returned, used, last_use =
        string.match(ARGV[i], '^(%d+)%-([%w_%-]+):(%d+):(%d+):(%d+)$')
    if not expiry or used + 0 > returned + 0 then
        error({ err = 'ERR edgelimit: invalid return (<expiry>-<grant id>:<permits>:<used>:<last use ms>, used at '
            .. 'most the permits): ' .. string.sub(ARGV[i], 1, 100) })
    end
    expiry, returned, used = expiry + 0, returned + 0, used + 0
    local frees = math.max(now, last_use + 0) + interval
    -- Only a block still logged, and only if it frees earlier for it.
    if expiry > now and (used == 0 or frees < expiry) then
        for _, member in ipairs(redis.call('ZRANGEBYSCORE', key, expiry, expiry)) do
            local position, member_permits, _, member_id = parse_member(member)
            if member_id == returned_id and member_permits == returned then
                local rank = redis.call('ZRANK', key, member)
                redis.call('ZREM', key, member)
                shift_positions(key, rank, -member_permits, position)
                if used > 0 then
                    local _, _, _, reset, reset_after, held, first_position, last_run =
                        log_verdict(key, used, limit, interval, now)
                    log_grant(key, used, frees - now, returned_id, now, grace, math.max(reset_after, frees), held,
                        first_position, last_run, reset)
                end
                break
            end
        end
    end
end

-- The request, decided and logged as lua/sliding_log.lua does (log_decision checks the grant id).
local _, _, allowed, retry_after, remaining, reset, reset_after, held, first_position, last_run =
    log_decision('limit', key, permits, limit, interval, id, nil, now)
local granted = 0
if allowed then
    granted = permits
    log_grant(key, permits, interval, id, now, grace, reset_after, held, first_position, last_run, reset)
    remaining = remaining - permits
    reset = reset_after
end

-- The reserved permits, as one grant: usable from `from` ms after now, when that many permits have freed (at once
-- if they are free now), until `horizon` ms after that, and freeing one interval after their last use may be. As
-- many as asked, or fewer: those that free within the horizon. After a denial, only a block that holds the request
-- (its wait is then the block's start, which the client reports), so that a denial's retry_after stays exact. The
-- log's standing is read again after the request's grant (this path is rare: a client reserves when its permits
-- run out).
local reserved, from = 0, 0
if block > 0 then
    local _, wait, _, last_expiry, after, standing, first, run = log_verdict(key, block, limit, interval, now)
    local count = block
    if wait > horizon then
        -- The permits held beyond the horizon stay held; the others have freed by then.
        local beyond = redis.call('ZRANGEBYSCORE', key, '(' .. (now + horizon), '+inf', 'LIMIT', '0', '1')
        count = limit - (beyond[1] and first + standing - parse_member(beyond[1]) or 0)
        if count > 0 then
            _, wait, _, last_expiry, after, standing, first, run = log_verdict(key, count, limit, interval, now)
        end
    end
    if count > 0 and (allowed or count >= permits) then
        reserved, from = count, wait
        local frees = from + horizon + interval
        log_grant(key, count, frees, id, now, grace, math.max(after, now + frees), standing, first, run, last_expiry)
        remaining, reset = math.max(limit - standing - count, 0), math.max(reset, now + frees)
    end
end

return { granted, now, reserved, from, remaining, reset, retry_after }
