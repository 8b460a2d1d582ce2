-- The algorithm family, shared prelude: before the algorithms' files and the helpers they share (bucket.lua;
-- zset_member.lua and zset_log.lua). build.rs composes two kinds of script from the same files:
--   single.lua  one limit with its quota in the arguments, the common call: the algorithm's code runs inline,
--               straight-line, because inside Redis every function a script defines is a new closure on every call
--               and every Lua call, argument and table costs (bench/instructions.mjs counts it). These scripts do
--               not start with lua/common.lua, and the token bucket, fixed window, sliding window and GCRA
--               scripts define no function at all (the logs' scripts do, for their helpers).
--   driver.lua  several limits at once, or a quota stored in Redis: after lua/common.lua; entry.lua wraps each
--               algorithm in a function.
--
-- So an algorithm's sections below call no function of common.lua: what they need on a cold path (a refund's
-- receipt) they write inline, and they report a bad receipt with error() directly.
--
-- An algorithm file is its helpers (local functions), then two sections, each opened by a marker line:
--   --@decision  the verdict on `permits` at `now`. Before it, on a refund, it gives back what the receipt's grant
--                took and the algorithm's rule still allows (see its file; `held` false when that is nothing) and
--                then decides on one permit (lease ''): the standing after the refund. Otherwise it records nothing (a
--                permit log drops permits that have freed, which changes no verdict), so that every limit of a call
--                is decided before any is recorded; it checks the request's `lease` first.
--   --@grant     records the grant the decision allowed (run only when every limit of the call allows).
-- In scope (locals of the script, or the wrapping function's):
--   operation                                 'limit' (decide and record), 'peek' (decide only), 'refund'
--   key, permits, limit, interval, rate       the state key, the request, its quota (checked numbers)
--   lease                                     a concurrency or sliding log grant's fresh id ('limit'); the receipt
--                                             to refund ('refund'); else ''
--   mark                                      on a refund, the receipt's mark (checked by the frame: its form is
--                                             '<permits>:<mark>', its permits the refund's): what names the grant in
--                                             the algorithm's terms; else nil
--   now, grace                                unix ms; extra ms of expiry for state written at an explicit time
-- and the verdict, which the decision sets:
--   allowed, retry_after                      retry_after = ms until it could be allowed (0 if it is)
--   remaining, reset                          the standing without this request: permits left, and the unix ms at
--                                             which the limit is whole again if no request comes
--   reset_after                               `reset` with the grant (remaining is then remaining - permits)
--   held                                      false when a refund gave nothing back (the grant's permits had
--                                             freed, refilled or left the counted windows; a lease not held)
--   granted_mark, token                       set by the grant: its receipt is '<permits>:<mark>', the mark the
--                                             grant's unix ms (token bucket, GCRA), its window's index (fixed and
--                                             sliding window), both as the number granted_mark; for a log
--                                             (concurrency, sliding log) '<expiry>-<grant id>', granted_mark the
--                                             expiry and token the whole receipt. A refund names the grant by it, so
--                                             it gives back exactly what that grant took.
-- Locals the decision declares are the grant's to use.
--
-- All arithmetic is on whole numbers below 2^53, where Lua's doubles are exact: quotas are checked so that
-- limit × interval stays below 2^52 (by the frame), and no product below grows past that.

local MAX_COUNT = 2 ^ 32 - 1

-- State of a request made at an explicit time lives this much longer than it matters: that caller's clock may run
-- behind Redis's, and state must not expire in Redis's time while it still counts in the caller's. Under server
-- time (the default) keys vanish exactly when they stop mattering.
local EXPLICIT_TIME_GRACE_MS = 60000

-- Why a refund's receipt mark is refused by the algorithm that reads it (a whole number for the time and window
-- algorithms, never after the server's clock): a hand-made receipt, or another algorithm's.
-- Reported with error() as common.lua's reject does: 'ERR edgelimit: invalid ' .. RECEIPT_MARK .. ': ' .. mark.
local RECEIPT_MARK = 'receipt mark (not a grant of this limit: a time or window after the server clock, or no number)'
