-- A log of grants in a zset (concurrency, sliding log), for reading: zset_log.lua writes it, inspect.lua reads it.
-- One member per grant, '<position>:<permits>:<run>:<grant id>', scored with the unix ms the grant frees at:
--   position  a grant of k permits at p holds [p, p + k); gapless, growing with the score; 13 digits zero-padded,
--             so name order is position order among equal scores
--   run       where the run of one-permit grants this grant ends begins, so one-permit logs count with ZCARD
--   grant id  sealed (zset_log.lua's `sealed`): the receipt's id is not in the log
-- Permits held = the last grant's end - the first grant's position. More: docs/design/scripts.md, "The log of
-- grants".

-- A member's position, permits, run and grant id. A member in no known layout (another writer's, or an older
-- edgelimit's) is a clean error, not a Lua error on nil.
local function parse_member(member)
    local position, permits, run, id = string.match(member, '^(%d+):(%d+):(%d+):(.+)$')
    if not position then
        error({ err = 'WRONGTYPE edgelimit: the log holds a member in no known layout (' .. member .. '): written '
            .. 'by something else or an older edgelimit; it expires by itself, or reset the identifier' })
    end
    return position + 0, permits + 0, run + 0, id
end
