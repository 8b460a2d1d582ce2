-- Inline piece, after string_tag.lua: refuses a `value` not in the algorithm's own layout (read as nothing counted,
-- it would be overwritten), as Redis refuses a key of another type (the caller's EDGELIMIT_FOREIGN_STATE).
-- Another algorithm's state means two limits share a name (a stored quota's old state driver.lua drops first);
-- anything else is reported by its length, not its bytes, which may be another program's secret.
if tag then
    error({ err = 'WRONGTYPE edgelimit: the key holds the state of another algorithm (' .. tag
        .. '): two limits share this name with different algorithms; give each its own name' })
end
error({ err = 'WRONGTYPE edgelimit: the key holds a value of no edgelimit algorithm '
    .. '(another program\'s, or damaged: ' .. #value .. ' bytes)' })
