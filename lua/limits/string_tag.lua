-- Inline piece: `tag`, the string algorithm whose layout `value` is in ('tb', 'gcra', 'fw', 'sw'), or nil for
-- none (another program's value, a damaged state).
local tag = string.match(value, '^(%l+):%d+:%d+$')
if not (tag == 'tb' or tag == 'gcra' or tag == 'fw') then
    tag = string.find(value, '^sw:%d+:%d+:%d+$') and 'sw' or nil
end
