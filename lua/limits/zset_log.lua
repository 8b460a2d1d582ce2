-- Writing and deciding on a log of grants (concurrency, sliding log; layout in zset_member.lua). Positions stay
-- gapless: removing a grant early moves the later ones down, logging one that frees before others moves those up,
-- O(grants moved). Readers only a denial or a booked-ahead log needs are made on first use (log_readers), and
-- numbers go to Redis as text via string.format('%d'): both for cost (docs/design/scripts.md, "Cost").

-- Positions stay below this (13 digits; see log_grant).
local MAX_POSITION = 8e12

local function member_of(position, permits, run, id)
    return string.format('%013d:%d:%d:%s', position, permits, run, id)
end

-- The name a grant is logged under: its id sealed (the first 16 hex digits of its SHA-1), then the rest as it is (a
-- tranche's '+<start>', a returned group's '.'). A receipt is all a refund needs, so the log must not show ids to
-- whoever reads the state; refunds and returns seal the id they are given and look for that.
local function sealed(name)
    local id, rest = string.match(name, '^([%w_%-]+)(.*)$')
    -- A name with no id (only a hand-made call sends one) is left as it is: it matches no grant.
    return id and string.sub(redis.sha1hex(id), 1, 16) .. rest or name
end

-- Moves the grants from rank `from` on by `delta` positions, renaming them. Their runs follow why they move: a grant
-- of -delta permits at `at` was removed, one of delta permits was put at `at`, or (`at` nil) all restart from 0.
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
    -- All removed before any is added (a new name may be a later grant's old name), in batches: unpack has a stack
    -- limit.
    for first = 1, #old, 1000 do
        redis.call('ZREM', key, unpack(old, first, math.min(first + 999, #old)))
    end
    for first = 1, #new, 2000 do
        redis.call('ZADD', key, unpack(new, first, math.min(first + 1999, #new)))
    end
end

-- Tranches booked ahead (the `reserve/sliding_log` script) are named '<grant id>+<start>' and count in a window
-- (t - interval, t] only from their start. A window counts the permits freeing after t less those of tranches
-- starting after t, so the most any window counts from `f` on is at `f` or at a later start. Only grants freeing
-- more than an interval after now can be tranches; one without a start counts from now (longer, never shorter).
-- The argument: docs/design/reserve.md, "Tranches".

-- The readers a denial or a log with tranches needs (`log_readers().future`, `.fit`), made on first use: most
-- decisions need none, and a function defined at the top would be a closure on every call.
local readers
local function log_readers()
    if readers then
        return readers
    end

    -- The permits that free after unix ms `t` (at or after now): from the first grant freeing after `t` to the end.
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

    -- The unix ms at which the grant holding `position` frees (first_position <= position < first_position + held).
    -- The first guess assumes equal weights (then it is right at once); otherwise a binary search over ranks.
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

    -- The earliest unix ms from `from` (at or after now) at which `need` permits (at most the limit) fit: every window
    -- a use from then on falls in counts at most limit - need. After the last tranche from `from` on whose window
    -- has no room (none: `from`), it is when enough grants have freed, or the next tranche's start. Exact if nothing
    -- frees early.
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

-- After dropping freed grants: the verdict on `permits` (at most the limit) at `now` (allowed, retry_after,
-- remaining, reset, reset_after), then the standing log_grant and log_fit take (permits held, the first position,
-- the last run, the tranches starting later, the number of grants). Allowed while every window the use falls in
-- stays within the limit (with no tranche ahead: held + permits <= limit). `reset` is when the last grant frees.
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

-- Logs a grant of `permits` named `id` (sealed), freeing at now + interval, on log_verdict's standing (`last_run`
-- -1 when nothing is held); the key then expires at `reset_after`. Returns the receipt '<permits>:<expiry>-<id>'.
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
        -- Positions grow while the key lives: they restart from 0 once per 8 * 10^12 permits.
        shift_positions(key, 0, -first_position, nil)
        position, last_run = held, math.max(last_run - first_position, 0)
    end
    -- A grant of one permit continues the last grant's run (or starts one); a larger grant ends any run.
    local run = permits > 1 and position + permits or last_run >= 0 and last_run or position
    local receipt = string.format('%d:%d-%s', permits, expiry, id)
    -- The score is the expiry as the receipt prints it: the number would be printed again, as a double.
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

-- Removes the grant of `permits` logged as '<expiry>-<id>' if still held (expiry after `now`), moving later grants
-- down. Returns whether it was held. For refunds and reserved tranches' returns (lua/reserve/log.lua).
local function remove_grant(key, expiry, id, permits, now)
    if expiry > now then
        id = sealed(id)
        for _, member in ipairs(redis.call('ZRANGEBYSCORE', key, expiry, expiry)) do
            local position, member_permits, _, member_id = parse_member(member)
            -- A tranche is logged as '<id>+<start>', and a return names it '<id>+' (a refund's id has no '+').
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

-- The --@decision of a log algorithm (prelude.lua). A grant's `lease` is its fresh id, checked before any write. A
-- refund's `mark`, '<expiry>-<id>', names the grant to remove if still held; the decision is then on one permit.
-- Returns held, the permits decided on, and log_verdict's values.
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
