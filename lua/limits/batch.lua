-- The `batch/<algorithm>` scripts: several decisions of one algorithm in one call, for concurrent callers of one
-- limiter (src/rest/coalesce.rs). Each is the `<algorithm>` script's common call (operation 'limit', server clock),
-- in turn, on the state the ones before it left; the call's fixed cost (arguments, TIME) is paid once.
--
--   KEYS[i]            the i-th decision's state key
--   ARGV[i]            its request and quota, as the `<algorithm>` script's ARGV[1]
--   ARGV[#KEYS + i]    its grant id, for an algorithm that logs grants (concurrency, sliding log); absent otherwise
--
-- Reply: one entry per decision, the `<algorithm>` script's reply, or '!' and the error for a decision refused (a
-- request no client sends, state in no known layout): its error is its own, the others are still decided.

local server_time = redis.call('TIME')
local now = server_time[2] + 0
now = server_time[1] * 1000 + (now - now % 1000) / 1000
local operation, mark, grace = 'limit', nil, 0

--@helpers

local function decide(key, request, lease)
--@request
    if permits > limit then
        return { 5, 0, 0, 0 }
    end
    -- Set by the decision and the grant (see single.lua); not every reply reads each.
    -- luacheck: push ignore token held
    local allowed, retry_after, remaining, reset, reset_after, held, granted_mark, token
    -- luacheck: pop

--@decision

    if not allowed then
        return { 0, remaining, reset, retry_after }
    end

--@grant

    return { 1, remaining - permits, reset_after, granted_mark }
end

local replies, count = {}, #KEYS
for i = 1, count do
    local decided, reply = pcall(decide, KEYS[i], ARGV[i], ARGV[count + i] or '')
    if not decided then
        reply = '!' .. (type(reply) == 'table' and reply.err or tostring(reply))
    end
    replies[i] = reply
end
return replies
