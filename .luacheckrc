-- luacheck settings for the scripts under lua/ (scripts/lua runs it on the generated files; the pieces under
-- lua/parts/ are not scripts on their own). Redis's Lua 5.1 sandbox gives a script these globals, and a script
-- defines none of its own.
std = "lua51"
read_globals = { "KEYS", "ARGV", "redis", "struct", "cjson", "cmsgpack", "bit" }
max_line_length = 120
exclude_files = { "lua/parts/**" }
ignore = {
    -- Shared helpers take the request's fields as parameters with the script's own names (`key`, `limit`, `now`),
    -- because the same helper runs inside limits.lua's per-algorithm functions too.
    "431",
    -- Every algorithm's function in limits.lua has the same signature; not each reads every argument.
    "212",
}
files["lua/*.lua"] = {
    -- The single-limit frame reads every quota field and the prelude's receipt-mark message for every algorithm;
    -- not each algorithm uses the rate or that message.
    ignore = { "211/rate", "211/RECEIPT_MARK" },
}
files["lua/redisson/lifetime.lua"] = {
    -- Changing a lifetime reads no clock and sets every key's lifetime itself; lua/parts/common.lua defines `clock`
    -- for every script, the prelude `touch` for every Redisson one.
    ignore = { "211/clock", "211/touch" },
}
-- What Redis runs, lua/compact/, is the same code without its comments (build.rs): the same settings apply.
files["lua/compact/*.lua"] = files["lua/*.lua"]
files["lua/compact/redisson/lifetime.lua"] = files["lua/redisson/lifetime.lua"]
-- Several decisions in one call (lua/parts/limits/batch.lua) decide only 'limit' calls on the server's clock: the
-- prelude's explicit-time grace and receipt-mark message go unused, and so does the part of a decision's verdict
-- that only a refund's or a peek's reply reads (a string algorithm's reply is what its decision read).
files["lua/batch/*.lua"] = {
    ignore = { "211/EXPLICIT_TIME_GRACE_MS", "211/RECEIPT_MARK", "231/retry_after", "231/reset", "311/remaining" },
}
files["lua/compact/batch/*.lua"] = files["lua/batch/*.lua"]
-- The scripts that reserve blocks use the prelude's constants but its receipt-mark message, and read their request as
-- the single-limit scripts do, rate and all.
files["lua/reserve/*.lua"] = { ignore = { "211/RECEIPT_MARK", "211/rate" } }
files["lua/compact/reserve/*.lua"] = files["lua/reserve/*.lua"]
