-- How driver.lua runs an algorithm: its file's two sections (see prelude.lua) spliced into one function per
-- algorithm (build.rs names it). The function returns the verdict and the grant, as a closure over the
-- decision's locals, for the driver to call once every limit of the call allows.
ALGORITHMS.__ALGORITHM__ = function(operation, key, permits, limit, interval, rate, lease, mark, now, grace)
    local allowed, retry_after, remaining, reset, reset_after, held, granted_mark, token -- luacheck: ignore token

--@decision

    return allowed, retry_after, remaining, reset, reset_after, held, function()

--@grant

        return token or string.format('%d:%d', permits, granted_mark)
    end
end
