-- Argument checks and the clock: first in every script but `<algorithm>` and `batch/<algorithm>` (build.rs).
-- Every function here is a new closure on every call: keep them few (docs/design/scripts.md, "Cost").

-- A clean error naming an argument no edgelimit client sends, instead of a Lua stack trace.
-- The value is quoted up to 100 bytes: an argument may be a megabyte.
local function reject(what, value)
    error({ err = 'ERR edgelimit: invalid ' .. what .. ': ' .. string.sub(tostring(value), 1, 100) })
end

-- A whole number within [low, high] from an argument, or nil. Digits only: tonumber would take '0x1A', ' 12', '1e12'.
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

-- Unix ms: `text` when the caller passed an explicit time, else the Redis server's clock (callers' clocks are skewed).
local function clock(text)
    if text ~= '' then
        return whole(text, 'time (unix ms, or empty for server time)', 0, 2 ^ 53)
    end
    local time = redis.call('TIME')
    local micros = time[2] % 1000000
    return time[1] * 1000 + (micros - micros % 1000) / 1000
end
