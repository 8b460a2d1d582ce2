-- Several decisions of one algorithm in one call: what concurrent callers of one limiter decide at once
-- (src/limit/merged.rs), each as lua/<algorithm>.lua decides its common call (operation 'limit', one limit whose
-- quota comes with the request, on the server's clock), one after the other, each on the state the ones before it
-- left. What the call costs besides the decisions (the call itself, reading its arguments, TIME) is paid once for
-- all of them, which is most of a single call's cost for the cheap algorithms (bench/instructions.mjs).
--
--   KEYS[i]            the i-th decision's state key
--   ARGV[i]            its request and quota, as lua/<algorithm>.lua's ARGV[1]
--   ARGV[#KEYS + i]    its grant id, for an algorithm that logs grants (concurrency, sliding log); absent otherwise
--
-- The reply has one entry per decision: what lua/<algorithm>.lua replies to that call, or for a decision the script
-- refuses (a request no client sends, state in no known layout) the text '!' followed by the error: a decision's
-- error is its own, and the others are still decided.

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
    -- The verdict, set by the decision, and the grant's mark, set by the grant (see single.lua); not every reply
    -- reads each.
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
