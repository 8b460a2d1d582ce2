-- luacheck settings for the scripts Redis runs, as `edgelimit scripts --out target/lua` writes them (scripts/lua).
-- The sources under lua/ are pieces, not scripts. Redis's Lua 5.1 sandbox gives these globals; scripts define none.
std = "lua51"
read_globals = { "KEYS", "ARGV", "redis", "struct", "cjson", "cmsgpack", "bit" }
max_line_length = 120
ignore = {
    -- Shared helpers take the request's fields as parameters with the script's own names (`key`, `limit`, `now`).
    "431",
    -- Every algorithm's function in the driver has the same signature; not each reads every argument.
    "212",
}
-- One limit: the frame reads every quota field and the prelude's receipt-mark message for every algorithm.
files["target/lua/*.lua"] = { ignore = { "211/rate", "211/RECEIPT_MARK" } }
-- Changing a lifetime reads no clock and sets every key's lifetime itself.
files["target/lua/redisson/lifetime.lua"] = { ignore = { "211/clock", "211/touch" } }
-- Several decisions in one call decide only 'limit' calls on the server's clock.
files["target/lua/batch/*.lua"] = {
    ignore = { "211/EXPLICIT_TIME_GRACE_MS", "211/RECEIPT_MARK" },
}
-- Reserving scripts read their request as the single-limit ones do, rate and all.
files["target/lua/reserve/*.lua"] = { ignore = { "211/RECEIPT_MARK", "211/rate" } }
