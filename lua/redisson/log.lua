-- Redisson's layout, the log of grants: after prelude.lua, for every script that reads or rewrites the log.

-- A log member's grant id and permits, struct.pack('Bc0I', #id, id, permits) as Redisson writes them (a grant of 0
-- from tryAcquire(0) counts nothing). Any other shape is refused as foreign state (EDGELIMIT_FOREIGN_STATE) before
-- the call changes anything.
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

-- The counter rebuilt from the log (only grants still in the window): rate - permits logged. Past a lowered rate
-- the oldest permits beyond it leave the log and the counter is 0, never negative: while they would still count,
-- the rest fill the rate anyway. Returns the counter and what left, as 'score:permits' texts (set_rate.lua keeps
-- them for a later raise). O(log), for rare cases.
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
