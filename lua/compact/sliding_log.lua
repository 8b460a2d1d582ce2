-- GENERATED, what edgelimit sends to Redis: lua/sliding_log.lua without its comments (run scripts/lua).
local MAX_COUNT = 2 ^ 32 - 1
local EXPLICIT_TIME_GRACE_MS = 60000
local RECEIPT_MARK = 'receipt mark (not a grant of this limit: a time or window after the server clock, or no number)'
local key, request, lease = KEYS[1], ARGV[1], ARGV[2]
local operation, time, extra = 'limit', '', nil
if lease then
    operation, time, extra = ARGV[3] or operation, ARGV[4] or time, ARGV[5]
else
    lease = ''
end
if not key or not request or extra then
    error({ err = 'ERR edgelimit: invalid call (1 key, the state key; 1 to 4 arguments): ' .. #KEYS .. ' keys, '
        .. #ARGV .. ' arguments' })
end
local permits, limit, interval = string.match(request, '^(%d+):(%d+):(%d+)$')
local rate = 1
if permits then
    permits, limit, interval = permits + 0, limit + 0, interval + 0
end
if not permits or permits < 1 or permits > MAX_COUNT or limit < 1 or limit > MAX_COUNT or interval < 1
    or rate < 1 or rate > MAX_COUNT or limit * interval > 2 ^ 52 then
    error({ err = 'ERR edgelimit: invalid request (<permits>:<limit>:<interval ms>[:<rate>], whole numbers from 1, '
        .. 'permits, limit and rate below 2^32, limit × interval at most 2^52): ' .. string.sub(request, 1, 100) })
end
local now, mark
local seconds, micros, grace = '', '', 0 -- luacheck: ignore seconds micros
if time == '' then
    local server_time = redis.call('TIME')
    seconds, micros = server_time[1], server_time[2]
    local us = micros + 0
    now = seconds * 1000 + (us - us % 1000) / 1000
else
    now = string.find(time, '^%d+$') and time + 0
    if not now or now > 2 ^ 53 then
        error({ err = 'ERR edgelimit: invalid time (unix ms, or empty for server time): ' .. string.sub(time, 1, 100) })
    end
    grace = EXPLICIT_TIME_GRACE_MS
end
if operation == 'refund' then
    local receipt_permits
    receipt_permits, mark = string.match(lease, '^(%d+):([%w_%-]+)$')
    if not mark or #mark > 64 or receipt_permits + 0 ~= permits or permits > limit then
        error({ err = 'ERR edgelimit: invalid receipt (as a grant returned it: "<permits>:<mark>", its permits the '
            .. 'refund\'s and at most the limit ' .. limit .. '): ' .. string.sub(lease, 1, 100) })
    end
elseif operation ~= 'limit' and operation ~= 'peek' then
    error({ err = 'ERR edgelimit: invalid operation (limit, peek or refund): ' .. string.sub(operation, 1, 100) })
elseif permits > limit then
    return { 5, 0, 0, 0 }
end
-- luacheck: push ignore reset_after granted_mark token
local allowed, retry_after, remaining, reset, reset_after, held, granted_mark, token
-- luacheck: pop
local function parse_member(member)
    local position, permits, run, id = string.match(member, '^(%d+):(%d+):(%d+):(.+)$')
    if not position then
        error({ err = 'WRONGTYPE edgelimit: the log holds a member in no known layout (' .. member .. '): written '
            .. 'by something else or an older edgelimit; it expires by itself, or reset the identifier' })
    end
    return position + 0, permits + 0, run + 0, id
end
local MAX_POSITION = 8e12
local function member_of(position, permits, run, id)
    return string.format('%013d:%d:%d:%s', position, permits, run, id)
end
local function sealed(name)
    local id, rest = string.match(name, '^([%w_%-]+)(.*)$')
    return id and string.sub(redis.sha1hex(id), 1, 16) .. rest or name
end
local function shift_positions(key, from, delta, at)
    local items = redis.call('ZRANGE', key, from, '-1', 'WITHSCORES')
    local old, new = {}, {}
    for i = 1, #items, 2 do
        local position, permits, run, id = parse_member(items[i])
        if not at then
            run = math.max(run + delta, 0)
        elseif delta < 0 then
            run = run > at and run + delta or run
        elseif run >= at then
            run = run + delta
        elseif delta > 1 then
            run = at + delta
        end
        old[#old + 1] = items[i]
        new[#new + 1] = items[i + 1]
        new[#new + 1] = member_of(position + delta, permits, run, id)
    end
    for first = 1, #old, 1000 do
        redis.call('ZREM', key, unpack(old, first, math.min(first + 999, #old)))
    end
    for first = 1, #new, 2000 do
        redis.call('ZADD', key, unpack(new, first, math.min(first + 1999, #new)))
    end
end
local readers
local function log_readers()
    if readers then
        return readers
    end
    local function held_after(key, t, first_position, held)
        local item = redis.call('ZRANGEBYSCORE', key, string.format('(%d', t), '+inf', 'LIMIT', '0', '1')[1]
        return item and first_position + held - parse_member(item) or 0
    end
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
    local function log_fit(key, need, limit, from, now, first_position, held, count, future)
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
local function log_grant(key, permits, interval, id, now, grace, reset_after, held, first_position, last_run,
                         last_expiry)
    local expiry = now + interval
    local position = first_position + held
    if expiry < last_expiry then
        local rank = redis.call('ZCOUNT', key, '-inf', expiry)
        position = parse_member(redis.call('ZRANGE', key, rank, rank)[1])
        shift_positions(key, rank, permits, position)
        last_run = -1
    elseif position + permits > MAX_POSITION then
        shift_positions(key, 0, -first_position, nil)
        position, last_run = held, math.max(last_run - first_position, 0)
    end
    local run = permits > 1 and position + permits or last_run >= 0 and last_run or position
    local receipt = string.format('%d:%d-%s', permits, expiry, id)
    redis.call('ZADD', key, string.match(receipt, ':(%d+)'), member_of(position, permits, run, sealed(id)))
    redis.call('PEXPIRE', key, reset_after - now + grace)
    return receipt
end
local function check_grant_id(id)
    if #id > 64 or not string.match(id, '^[%w_%-]+$') then
        error({ err = 'ERR edgelimit: invalid grant id (letters, digits, _ or -, at most 64): '
            .. string.sub(id, 1, 100) })
    end
end
local function remove_grant(key, expiry, id, permits, now)
    if expiry > now then
        id = sealed(id)
        for _, member in ipairs(redis.call('ZRANGEBYSCORE', key, expiry, expiry)) do
            local position, member_permits, _, member_id = parse_member(member)
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
local in_log, first_position, last_run
held, permits, allowed, retry_after, remaining, reset, reset_after, in_log, first_position, last_run =
    log_decision(operation, key, permits, limit, interval, lease, mark, now)
if operation == 'refund' then
    return { held and 3 or 4, remaining, reset, 0 }
elseif operation == 'peek' then
    return { allowed and 2 or 0, remaining, reset, retry_after }
elseif not allowed then
    return { 0, remaining, reset, retry_after }
end
token = log_grant(key, permits, interval, lease, now, grace, reset_after, in_log, first_position, last_run, reset)
granted_mark = now + interval
return { 1, remaining - permits, reset_after, granted_mark }
