-- Inline piece: GCRA's state write (gcra.lua) from `debt` (units owed, > 0) and `floor` (reserved slots' end, or 0):
-- TAT = now + debt / rate, the floor marked in the remainder while ahead. The key expires when TAT passes.
local part = debt % rate
local whole_ms = now + (debt - part) / rate
if floor > now then
    part = part + rate * (FLOOR_MARK + whole_ms + 1 - floor)
end
local lifetime = debt + rate - 1
redis.call('SET', key, string.format('gcra:%d:%d', whole_ms, part), 'PX',
    (lifetime - lifetime % rate) / rate + grace)
