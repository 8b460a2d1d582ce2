-- Which string algorithm wrote `value`, spliced at each line `--@inline limits/string_tag.lua`
-- (see build.rs): `tag` is the tag its state starts with in that algorithm's layout
-- (token bucket 'tb', GCRA 'gcra', fixed window 'fw', sliding window 'sw'), or nil for a value in
-- none of these layouts (another program's, a damaged state).
local tag = string.match(value, '^(%l+):%d+:%d+$')
if not (tag == 'tb' or tag == 'gcra' or tag == 'fw') then
    tag = string.find(value, '^sw:%d+:%d+:%d+$') and 'sw' or nil
end
