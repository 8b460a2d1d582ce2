-- The layout of a log of grants in a zset (concurrency, sliding log), as far as reading it goes: after
-- prelude.lua, before lua/limits/zset_log.lua, which writes it; inspect.lua reads it too (see
-- build.rs).
--
-- One member per grant, whatever its permits: '<position>:<permits>:<run>:<grant id>', scored with the unix ms at
-- which the grant frees. The grant id is sealed (zset_log.lua's `sealed`): the receipt's id is not in the log.
--   position  Positions number the permits of the log: a grant of k permits at position p holds [p, p + k), and
--             positions grow with the score, gapless. The zset orders members by score, then by name, so the
--             position is written with 13 digits, zero-padded: among equal scores name order is position order too.
--   run       Where the run of one-permit grants that this grant ends (or starts after) begins: every grant from
--             position `run` up to this one holds one permit. It lets the common case, grants of one permit, count
--             what is held with ZCARD instead of reading the first grant (a ranked read costs 5 times a ZCARD).
-- So, whatever the weights:
--   permits held   = the end of the last grant - the position of the first; when the live grants all sit in the
--                    last grant's run, simply their number;
--   the wait for a denied request needing `need` more permits to free = until the grant holding position
--                    first + need - 1 frees: a search over ranks (one read when all grants have the same weight,
--                    O(log n) reads otherwise);
--   freed grants go by score range, and the key expires when its last grant frees.

-- A member's position, permits, run and grant id. A member in no known layout (state written by something else, or
-- by an older edgelimit that logged one member per permit) is a clean error, not a Lua error on nil.
local function parse_member(member)
    local position, permits, run, id = string.match(member, '^(%d+):(%d+):(%d+):(.+)$')
    if not position then
        error({ err = 'WRONGTYPE edgelimit: the log holds a member in no known layout (' .. member .. '): written '
            .. 'by something else or an older edgelimit; it expires by itself, or reset the identifier' })
    end
    return position + 0, permits + 0, run + 0, id
end
