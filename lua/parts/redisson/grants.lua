-- Redisson's layout, taking and giving back permits: after window.lua, for acquire and release.

-- The limiter, and `text` as a number of permits; or, instead, the status reply to return (no rate, bad permits).
local function limiter_and_permits(text)
    local limiter = load_limiter()
    if not limiter then
        return nil, nil, { 'not_initialized', 0, 0, 0, 0 }
    end
    local permits = whole_number(text, 1, 2 ^ 32 - 1)
    if not permits then
        return nil, nil, { 'invalid_permits', limiter.rate, 0, 0, 0 }
    end
    return limiter, permits
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
