-- A string algorithm's check of its key's value, spliced at each line
-- `--@inline limits/foreign_value.lua` (see src/lua/compose.rs) where the value (`value`, '' for
-- no key) is not '' and not in the algorithm's own layout. Another string algorithm's state
-- (token bucket 'tb:', GCRA 'gcra:', fixed window 'fw:', sliding window 'sw:') is no state to it:
-- a stored quota whose algorithm changed starts afresh. Anything else no edgelimit algorithm
-- wrote (another program's value, a damaged state) would, read as nothing counted, be granted on
-- and overwritten: it is refused as Redis refuses a key of another type (the caller's
-- EDGELIMIT_FOREIGN_STATE), with the value's length, not its bytes (another program's secret?).
local tag = string.match(value, '^(%l+):%d+:%d+$')
if not (tag == 'tb' or tag == 'gcra' or tag == 'fw'
    or string.find(value, '^sw:%d+:%d+:%d+$')) then
    error({ err = 'WRONGTYPE edgelimit: the key holds a value of no edgelimit algorithm '
        .. '(another program\'s, or damaged: ' .. #value .. ' bytes)' })
end
