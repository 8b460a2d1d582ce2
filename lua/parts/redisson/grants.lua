-- Redisson's layout, taking and giving back permits: after log.lua and window.lua, for acquire and release.

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
