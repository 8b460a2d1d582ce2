-- A string algorithm's check of its key's value, spliced at each line
-- `--@inline limits/foreign_value.lua` (see src/lua/compose.rs) where the value (`value`, '' for
-- no key) is not '' and not in the algorithm's own layout. No such value is decided on: read as
-- nothing counted, it would be granted on and overwritten. It is refused as Redis refuses a key of
-- another type (the caller's EDGELIMIT_FOREIGN_STATE):
--   - another string algorithm's state (token bucket 'tb:', GCRA 'gcra:', fixed window 'fw:',
--     sliding window 'sw:'): two limits that share a name with different algorithms, which would
--     otherwise reset each other's state on every call and limit nothing (a stored quota whose
--     algorithm changed has that state deleted by driver.lua before it gets here);
--   - anything else (another program's value, a damaged state), reported by its length, not its
--     bytes (another program's secret?).
local tag = string.match(value, '^(%l+):%d+:%d+$')
if tag == 'tb' or tag == 'gcra' or tag == 'fw' or string.find(value, '^sw:%d+:%d+:%d+$') then
    error({ err = 'WRONGTYPE edgelimit: the key holds the state of another algorithm ('
        .. string.match(value, '^%l+') .. '): two limits share this name with different '
        .. 'algorithms; give each its own name' })
end
error({ err = 'WRONGTYPE edgelimit: the key holds a value of no edgelimit algorithm '
    .. '(another program\'s, or damaged: ' .. #value .. ' bytes)' })
