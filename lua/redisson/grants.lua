-- Redisson's layout, taking and giving back permits: after log.lua and window.lua, for acquire and release.

-- The limiter, and `text` as a number of permits; or, instead, the reply to return when no rate is set. Permits
-- that no edgelimit client sends (the clients check them first) are a clean error, as in the family's scripts.
local function limiter_and_permits(text)
    local limiter = load_limiter()
    if not limiter then
        return nil, nil, { 'not_configured', 0, 0, 0, 0, '' }
    end
    return limiter, whole(text, 'permits', 1, 2 ^ 32 - 1)
end
