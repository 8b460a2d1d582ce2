-- GCRA's state write (see gcra.lua), one piece for every writer, spliced at each line
-- `--@inline limits/gcra_write.lua` (see build.rs). From `debt` (units owed, more than 0)
-- and `floor` (the reserved slots' end, or 0): TAT = now + debt / rate, the slots' end marked in the
-- remainder while ahead; the key expires when TAT passes.
local part = debt % rate
local whole_ms = now + (debt - part) / rate
if floor > now then
    part = part + rate * (FLOOR_MARK + whole_ms + 1 - floor)
end
local lifetime = debt + rate - 1
redis.call('SET', key, string.format('gcra:%d:%d', whole_ms, part), 'PX',
    (lifetime - lifetime % rate) / rate + grace)
