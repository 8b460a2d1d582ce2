-- A string algorithm's check of its key's value, spliced at each line
-- `--@inline limits/foreign_value.lua` (see build.rs) after limits/string_tag.lua, where
-- the value (`value`, '' for no key) is not '' and not in the algorithm's own layout. No such
-- value is decided on: read as nothing counted, it would be granted on and overwritten. It is
-- refused as Redis refuses a key of another type (the caller's EDGELIMIT_FOREIGN_STATE):
--   - another string algorithm's state (`tag`): two limits that share a name with different
--     algorithms, which would otherwise reset each other's state on every call and limit nothing
--     (a stored quota whose algorithm changed has that state deleted by driver.lua before it gets
--     here);
--   - anything else (another program's value, a damaged state), reported by its length, not its
--     bytes (another program's secret?).
if tag then
    error({ err = 'WRONGTYPE edgelimit: the key holds the state of another algorithm (' .. tag
        .. '): two limits share this name with different algorithms; give each its own name' })
end
error({ err = 'WRONGTYPE edgelimit: the key holds a value of no edgelimit algorithm '
    .. '(another program\'s, or damaged: ' .. #value .. ' bytes)' })
