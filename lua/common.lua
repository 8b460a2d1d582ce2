-- Shared by every edgelimit script (prepended at compile time, see src/script.rs): argument checks and the clock.
--
-- A script's text runs from the top on every call, so every function defined here (and in the files after it) is a
-- new closure per call: keep them few. What costs most inside Redis is calling C (tonumber, string functions, every
-- redis.call) and allocating (tables, closures, new strings); plain Lua arithmetic is cheap. `bench/` measures it.

-- Rejects an argument no edgelimit client sends (a hand-made call): a clean Redis error reply naming the argument,
-- instead of a Lua runtime error with a stack trace. The value is quoted up to 100 bytes, as the single-limit
-- scripts quote theirs: an argument may be a megabyte.
local function reject(what, value)
    error({ err = 'ERR edgelimit: invalid ' .. what .. ': ' .. string.sub(tostring(value), 1, 100) })
end

-- A whole number within [low, high] from an argument (nil, or text): decimal digits only (tonumber alone would take
-- '0x1A', ' 12', '1e12'), or nil.
local function whole_number(text, low, high)
    local n = text and string.find(text, '^%d+$') and text + 0
    if n and n >= low and n <= high then
        return n
    end
    return nil
end

-- A whole number within [low, high] from an argument, or a clean error.
local function whole(text, what, low, high)
    return whole_number(text, low, high) or reject(what, text)
end

-- Unix ms: `text` when a caller passed an explicit time (tests, clients sharing a limiter with a clock-based
-- client), else the Redis server's clock, the default, because callers' clocks are skewed.
local function clock(text)
    if text ~= '' then
        return whole(text, 'time (unix ms, or empty for server time)', 0, 2 ^ 53)
    end
    local time = redis.call('TIME')
    local micros = time[2] % 1000000
    return time[1] * 1000 + (micros - micros % 1000) / 1000
end
