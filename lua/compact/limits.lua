-- GENERATED, what edgelimit sends to Redis: lua/limits.lua without its comments (run scripts/lua).
local function reject(what, value)
    error({ err = 'ERR edgelimit: invalid ' .. what .. ': ' .. string.sub(tostring(value), 1, 100) })
end
local function whole_number(text, low, high)
    local n = text and string.find(text, '^%d+$') and text + 0
    if n and n >= low and n <= high then
        return n
    end
    return nil
end
local function whole(text, what, low, high)
    return whole_number(text, low, high) or reject(what, text)
end
local function clock(text)
    if text ~= '' then
        return whole(text, 'time (unix ms, or empty for server time)', 0, 2 ^ 53)
    end
    local time = redis.call('TIME')
    local micros = time[2] % 1000000
    return time[1] * 1000 + (micros - micros % 1000) / 1000
end
local MAX_COUNT = 2 ^ 32 - 1
local EXPLICIT_TIME_GRACE_MS = 60000
local RECEIPT_MARK = 'receipt mark (not a grant of this limit: a time or window after the server clock, or no number)'
local operation = ARGV[1]
if operation ~= 'limit' and operation ~= 'peek' and operation ~= 'refund' then
    reject('operation (limit, peek or refund)', operation)
end
local now = clock(ARGV[2])
local grace = ARGV[2] ~= '' and EXPLICIT_TIME_GRACE_MS or 0
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
local STRING_TAGS = { token_bucket = 'tb', gcra = 'gcra', fixed_window = 'fw', sliding_window = 'sw' }
local function string_algorithm_tag(value)
    local tag = string.match(value, '^(%l+):%d+:%d+$')
    if not (tag == 'tb' or tag == 'gcra' or tag == 'fw') then
        tag = string.find(value, '^sw:%d+:%d+:%d+$') and 'sw' or nil
    end
    return tag
end
local ALGORITHMS = {}
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
ALGORITHMS.token_bucket = function(operation, key, permits, limit, interval, rate, lease, mark, now, grace)
    local allowed, retry_after, remaining, reset, reset_after, held, granted_mark, token -- luacheck: ignore token
local full = limit * interval
local value = redis.call('GET', key) or ''
local units, at = string.match(value, '^tb:(%d+):(%d+)$')
if value ~= '' and not units then
    local tag = string.match(value, '^(%l+):%d+:%d+$')
    if not (tag == 'tb' or tag == 'gcra' or tag == 'fw') then
        tag = string.find(value, '^sw:%d+:%d+:%d+$') and 'sw' or nil
    end
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
    return allowed, retry_after, remaining, reset, reset_after, held, function()
redis.call('SET', key, string.format('tb:%d:%d', left, at), 'PX', at - now + reset_after - now + grace)
granted_mark = now
        return token or string.format('%d:%d', permits, granted_mark)
    end
end
ALGORITHMS.fixed_window = function(operation, key, permits, limit, interval, rate, lease, mark, now, grace)
    local allowed, retry_after, remaining, reset, reset_after, held, granted_mark, token -- luacheck: ignore token
local window = now / interval
window = window - window % 1
local value = redis.call('GET', key) or ''
local stored_text, count = string.match(value, '^fw:(%d+):(%d+)$')
if value ~= '' and not stored_text then
    local tag = string.match(value, '^(%l+):%d+:%d+$')
    if not (tag == 'tb' or tag == 'gcra' or tag == 'fw') then
        tag = string.find(value, '^sw:%d+:%d+:%d+$') and 'sw' or nil
    end
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
    return allowed, retry_after, remaining, reset, reset_after, held, function()
if stored then
    redis.call('SET', key, 'fw:' .. stored_text .. ':' .. count + permits, 'KEEPTTL')
else
    redis.call('SET', key, string.format('fw:%d:%d', window, count + permits), 'PX', window_end - now + grace)
end
granted_mark = window
        return token or string.format('%d:%d', permits, granted_mark)
    end
end
ALGORITHMS.sliding_window = function(operation, key, permits, limit, interval, rate, lease, mark, now, grace)
    local allowed, retry_after, remaining, reset, reset_after, held, granted_mark, token -- luacheck: ignore token
local window = now / interval
window = window - window % 1
local elapsed = now - window * interval
local value = redis.call('GET', key) or ''
local stored_text, current, previous_text = string.match(value, '^sw:(%d+):(%d+):(%d+)$')
if value ~= '' and not stored_text then
    local tag = string.match(value, '^(%l+):%d+:%d+$')
    if not (tag == 'tb' or tag == 'gcra' or tag == 'fw') then
        tag = string.find(value, '^sw:%d+:%d+:%d+$') and 'sw' or nil
    end
    if tag then
        error({ err = 'WRONGTYPE edgelimit: the key holds the state of another algorithm (' .. tag
            .. '): two limits share this name with different algorithms; give each its own name' })
    end
    error({ err = 'WRONGTYPE edgelimit: the key holds a value of no edgelimit algorithm '
        .. '(another program\'s, or damaged: ' .. #value .. ' bytes)' })
end
local stored, previous = stored_text and stored_text + 0, previous_text
if not stored or stored < window - 1 then
    stored, current, previous = false, 0, 0
elseif stored == window - 1 then
    stored, current, previous = false, 0, current + 0
else
    window, elapsed, current, previous = stored, now - stored * interval, current + 0, previous + 0
    elapsed, stored = elapsed > 0 and elapsed or 0, true
end
if operation == 'refund' then
    local granted_in = string.find(mark, '^%d+$') and mark + 0
    if not granted_in or granted_in > window then
        error({ err = 'ERR edgelimit: invalid ' .. RECEIPT_MARK .. ': ' .. mark })
    end
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
        if current <= 0 and previous <= 0 then
            redis.call('DEL', key)
        elseif stored then
            redis.call('SET', key, string.format('sw:%d:%d:%d', window, current, previous), 'KEEPTTL')
        else
            redis.call('SET', key, string.format('sw:%d:%d:%d', window, current, previous), 'PX',
                (window + 2) * interval - now + grace)
        end
        stored = current > 0 or previous > 0
    end
    permits = 1
end
local room = limit * interval - previous * (interval - elapsed) - current * interval
remaining = room - room % interval
allowed = room >= permits * interval
remaining = remaining > 0 and remaining / interval or 0
reset = current > 0 and (window + 2) * interval or previous > 0 and (window + 1) * interval or now
reset_after = (window + 2) * interval
retry_after = 0
if not allowed then
    local free = (limit - current - permits) * interval
    local at = interval
    if free >= 0 and previous > 0 then
        at = interval - (free - free % previous) / previous
    end
    if at < interval then
        retry_after = window * interval + at - now
    else
        at = 0
        if current > 0 then
            free = (limit - permits) * interval
            at = interval - (free - free % current) / current
            at = at > 0 and at or 0
        end
        retry_after = (at < interval and (window + 1) * interval + at or (window + 2) * interval) - now
    end
end
    return allowed, retry_after, remaining, reset, reset_after, held, function()
if stored then
    redis.call('SET', key, 'sw:' .. stored_text .. ':' .. current + permits .. ':' .. previous_text, 'KEEPTTL')
else
    redis.call('SET', key, string.format('sw:%d:%d:%d', window, current + permits, previous), 'PX',
        (window + 2) * interval - now + grace)
end
granted_mark = window
        return token or string.format('%d:%d', permits, granted_mark)
    end
end
ALGORITHMS.gcra = function(operation, key, permits, limit, interval, rate, lease, mark, now, grace)
    local allowed, retry_after, remaining, reset, reset_after, held, granted_mark, token -- luacheck: ignore token
local debt, floor = 0, 0
local value = redis.call('GET', key) or ''
local ms, rem = string.match(value, '^gcra:(%d+):(%d+)$')
if value ~= '' and not ms then
    local tag = string.match(value, '^(%l+):%d+:%d+$')
    if not (tag == 'tb' or tag == 'gcra' or tag == 'fw') then
        tag = string.find(value, '^sw:%d+:%d+:%d+$') and 'sw' or nil
    end
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
    local least = floor > now and math.min((floor - now) * rate, debt) or 0
    held = credit > 0 and debt > least
    if held then
        debt = debt - credit > least and debt - credit or least
        if debt <= 0 then
            redis.call('DEL', key)
        else
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
    return allowed, retry_after, remaining, reset, reset_after, held, function()
debt = full - left
local part = debt % rate
local whole_ms = now + (debt - part) / rate
if floor > now then
    part = part + rate * (FLOOR_MARK + whole_ms + 1 - floor)
end
local lifetime = debt + rate - 1
redis.call('SET', key, string.format('gcra:%d:%d', whole_ms, part), 'PX',
    (lifetime - lifetime % rate) / rate + grace)
granted_mark = now
        return token or string.format('%d:%d', permits, granted_mark)
    end
end
ALGORITHMS.concurrency = function(operation, key, permits, limit, interval, rate, lease, mark, now, grace)
    local allowed, retry_after, remaining, reset, reset_after, held, granted_mark, token -- luacheck: ignore token
local in_log, first_position, last_run
held, permits, allowed, retry_after, remaining, reset, reset_after, in_log, first_position, last_run =
    log_decision(operation, key, permits, limit, interval, lease, mark, now)
    return allowed, retry_after, remaining, reset, reset_after, held, function()
token = log_grant(key, permits, interval, lease, now, grace, reset_after, in_log, first_position, last_run, reset)
granted_mark = now + interval
        return token or string.format('%d:%d', permits, granted_mark)
    end
end
ALGORITHMS.sliding_log = function(operation, key, permits, limit, interval, rate, lease, mark, now, grace)
    local allowed, retry_after, remaining, reset, reset_after, held, granted_mark, token -- luacheck: ignore token
local in_log, first_position, last_run
held, permits, allowed, retry_after, remaining, reset, reset_after, in_log, first_position, last_run =
    log_decision(operation, key, permits, limit, interval, lease, mark, now)
    return allowed, retry_after, remaining, reset, reset_after, held, function()
token = log_grant(key, permits, interval, lease, now, grace, reset_after, in_log, first_position, last_run, reset)
granted_mark = now + interval
        return token or string.format('%d:%d', permits, granted_mark)
    end
end
local count = #KEYS / 2
if count < 1 or count % 1 ~= 0 then
    reject('number of keys (two per limit: config, state)', #KEYS)
end
if #ARGV ~= 2 + 6 * count then
    reject('number of arguments (2, then 6 per limit)', #ARGV)
end
if operation == 'refund' and count ~= 1 then
    reject('number of limits to refund (one per call)', count)
end
local function limit_of(i)
    local base = 6 * i - 4
    local name, limit, interval, rate = ARGV[base + 1], ARGV[base + 3], ARGV[base + 4], ARGV[base + 5]
    local stored_in
    if name == '' then
        stored_in = KEYS[2 * i - 1]
        local stored = redis.call('HMGET', stored_in, 'algorithm', 'limit', 'interval', 'rate')
        if not stored[1] then
            whole(ARGV[base + 2], 'permits', 1, MAX_COUNT)
            return { limit = 0, status = 'not_configured' }
        end
        name, limit, interval, rate = stored[1], stored[2], stored[3], stored[4]
    end
    local lease = ARGV[base + 6]
    local permits, n_limit, n_interval, n_rate, mark = request_of(ARGV[base + 2], limit, interval, rate, lease,
        stored_in)
    local algorithm = ALGORITHMS[name]
    if not algorithm then
        reject((stored_in and 'stored ' or '') .. 'algorithm (not in this script)', name)
    end
    if stored_in then
        local kind = redis.call('TYPE', KEYS[2 * i]).ok
        local logs = name == 'concurrency' or name == 'sliding_log'
        local other_string = false
        if kind == 'string' and not logs then
            local tag = string_algorithm_tag(redis.call('GET', KEYS[2 * i]))
            other_string = tag and tag ~= STRING_TAGS[name]
        end
        local prefix, limiter_name = string.match(stored_in, '^(.*):{([^{}]*)}$')
        local state = KEYS[2 * i]
        local own = prefix and (string.sub(state, 1, #stored_in + 1) == stored_in .. ':'
            or (string.sub(state, 1, #prefix + 4) == prefix .. ':v2{'
                and string.sub(state, -(#limiter_name + 2)) == '}:' .. limiter_name))
        local other = (kind == 'zset' and not logs) or (kind == 'string' and logs) or other_string
        if own and operation ~= 'peek' and other then
            redis.call('DEL', state)
        end
    end
    return {
        key = KEYS[2 * i], permits = permits, limit = n_limit, interval = n_interval, rate = n_rate,
        lease = lease, mark = mark, algorithm = algorithm,
        status = operation ~= 'refund' and permits > n_limit and 'exceeds_limit',
    }
end
local limits, commit, named = {}, operation == 'limit', {}
for i = 1, count do
    if named[KEYS[2 * i]] then
        reject('state key (named twice in one call: decide a limit once, with the permits summed)', KEYS[2 * i])
    end
    named[KEYS[2 * i]] = true
    local limit = limit_of(i)
    limits[i] = limit
    commit = commit and not limit.status
end
for _, limit in ipairs(limits) do
    if limit.status then
        limit.remaining, limit.reset, limit.retry_after = 0, 0, 0
    else
        local held
        limit.allowed, limit.retry_after, limit.remaining, limit.reset, limit.reset_after, held, limit.grant =
            limit.algorithm(operation, limit.key, limit.permits, limit.limit, limit.interval, limit.rate, limit.lease,
                limit.mark, now, grace)
        if operation == 'refund' then
            limit.status, limit.retry_after = held and 'refunded' or 'not_held', 0
        end
        commit = commit and limit.allowed
    end
end
local reply = {}
for i, limit in ipairs(limits) do
    local status, remaining, reset, token = limit.status, limit.remaining, limit.reset, ''
    if not status then
        if not limit.allowed then
            status = 'denied'
        elseif not commit then
            status = 'allowed'
        else
            token = limit.grant()
            status, remaining, reset = 'granted', remaining - limit.permits, limit.reset_after
        end
    end
    local at = 6 * i - 6
    reply[at + 1], reply[at + 2], reply[at + 3] = status, limit.limit, remaining
    reply[at + 4], reply[at + 5], reply[at + 6] = reset, limit.retry_after, token
end
return reply
