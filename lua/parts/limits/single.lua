-- One limit whose quota comes with the request: the common call, and the cheapest script of the family. The
-- algorithm's file is spliced in at the markers (src/lua/compose.rs), so its code runs straight through, with
-- no closures, tables or calls besides its own helpers'.
--
--   KEYS[1]  the state key
--   ARGV     operation and time (read by prelude.lua), then permits, limit, interval (ms), rate, lease (a grant id,
--            or the receipt to refund)
--
-- The reply is driver.lua's for one limit: status, limit, remaining, reset, retry_after, receipt or ''.

if #KEYS ~= 1 or #ARGV ~= 7 then
    reject('call (1 key, the state key; 7 arguments)', #KEYS .. ' keys, ' .. #ARGV .. ' arguments')
end
local key, lease = KEYS[1], ARGV[7]
local permits, limit, interval, rate, mark = request_of(ARGV[3], ARGV[4], ARGV[5], ARGV[6], lease)
if operation ~= 'refund' and permits > limit then
    return { 'exceeds_limit', limit, 0, 0, 0, '' }
end
-- The verdict, set by the decision (held only on a refund: unset, it reads as nothing given back), and the receipt,
-- set by the grant.
local allowed, retry_after, remaining, reset, reset_after, held, token

--@helpers

--@decision

if operation == 'refund' then
    return { held and 'refunded' or 'not_held', limit, remaining, reset, 0, '' }
elseif operation == 'peek' or not allowed then
    return { allowed and 'allowed' or 'denied', limit, remaining, reset, retry_after, '' }
end

--@grant

return { 'granted', limit, remaining - permits, reset_after, 0, token }
