-- Redisson's layout, the log of grants: after prelude.lua, for every script that reads or rewrites the log.

-- A log member's grant id and permits, as log_grant() and Redisson write them: struct.pack('Bc0I', #id, id,
-- permits). Redisson logs a grant of 0 permits too (its tryAcquire(0) succeeds), which counts nothing. A member of
-- any other shape (written by hand, or damaged) is refused as state no Redisson client wrote, the caller's
-- EDGELIMIT_FOREIGN_STATE, before the call changes anything it read it for.
local function grant_of(member)
    local length = string.byte(member, 1)
    local id, permits
    if length and #member == length + 5 then
        id, permits = struct.unpack('Bc0I', member)
    end
    if not permits then
        error({ err = 'WRONGTYPE edgelimit: the rate limiter\'s log holds a member that is no grant (' .. #member
            .. ' bytes): a grant is struct.pack(\'Bc0I\', #id, id, permits)' })
    end
    return id, permits
end

-- Adds a grant to the log. Members are unique per (id, permits); NX with a suffix keeps two equal grants in the
-- same millisecond from collapsing into one (which would under-count).
local function log_grant(limiter, now, id, permits)
    local candidate, attempt = id, 0
    while redis.call('ZADD', limiter.log_key, 'NX', now, struct.pack('Bc0I', #candidate, candidate, permits)) == 0 do
        attempt = attempt + 1
        candidate = id .. '#' .. attempt
    end
end

-- The counter rebuilt from the log (the log must hold only grants still in the window): rate - permits logged. When
-- the log holds more than the rate (the rate was lowered below what is in use), the oldest permits beyond the rate
-- leave the log and the counter is 0, never negative (Redisson reads it as is): while any of those permits would
-- still be in the window, the rest alone fill the rate, so nothing is granted either way, and once they would have
-- expired the log is what it would have been. Returns the counter, and what left the log as 'score:permits' texts
-- (set_rate.lua keeps them, so that raising the rate again still counts them). O(log), for the rare cases that
-- need it.
local function rebuild(limiter)
    local members = redis.call('ZRANGE', limiter.log_key, 0, -1, 'WITHSCORES')
    local used = 0
    for i = 1, #members, 2 do
        local _, permits = grant_of(members[i])
        used = used + permits
    end
    local excess, trimmed, i = used - limiter.rate, {}, 1
    while excess > 0 do
        local id, permits = grant_of(members[i])
        redis.call('ZREM', limiter.log_key, members[i])
        local cut = math.min(permits, excess)
        if cut < permits then
            log_grant(limiter, tonumber(members[i + 1]), id, permits - cut)
        end
        trimmed[#trimmed + 1] = members[i + 1] .. ':' .. cut
        excess = excess - cut
        i = i + 2
    end
    local value = math.max(limiter.rate - used, 0)
    -- KEEPTTL: the counter keeps whatever lifetime it had (touch() sets it as Redisson would).
    redis.call('SET', limiter.value_key, value, 'KEEPTTL')
    return value, trimmed
end
