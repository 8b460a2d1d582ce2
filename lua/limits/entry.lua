-- driver.lua's wrapper of an algorithm: its two sections in one function, returning the verdict and the grant as a
-- closure over the decision's locals, which the driver calls once every limit allows.
ALGORITHMS.__ALGORITHM__ = function(operation, key, permits, limit, interval, rate, lease, mark, now, grace)
    local allowed, retry_after, remaining, reset, reset_after, held, granted_mark, token -- luacheck: ignore token

--@decision

    return allowed, retry_after, remaining, reset, reset_after, held, function()

--@grant

        return token or string.format('%d:%d', permits, granted_mark)
    end
end
