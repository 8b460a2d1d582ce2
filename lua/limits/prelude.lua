-- First in every algorithm script: the constants the algorithms share. build.rs puts the algorithms' files in two
-- frames: single.lua and batch.lua (one limit, quota in the arguments: the code runs inline and calls nothing of
-- common.lua) and driver.lua (several limits or a stored quota: each algorithm wrapped by entry.lua). So the
-- sections call no function of common.lua and report a bad receipt with error() directly.
--
-- An algorithm file is its helpers (local functions), then two sections, each opened by a marker line:
--   --@decision  the verdict on `permits` at `now`, recording nothing, so every limit of a call is decided before
--                any is recorded (a log may drop grants that have freed: no verdict changes). It checks `lease`
--                first. On a refund it first gives back what the receipt's grant still holds (`held` false when
--                nothing), then decides on one permit: the standing after the refund.
--   --@grant     records the grant (run only when every limit of the call allows).
-- In scope (locals of the script, or the wrapping function's):
--   operation                                 'limit' (decide and record), 'peek' (decide only), 'refund'
--   key, permits, limit, interval, rate       the state key, the request, its quota (checked numbers)
--   lease                                     a log's fresh grant id ('limit'); the receipt ('refund'); else ''
--   mark                                      on a refund, the receipt's mark (its form '<permits>:<mark>' checked by
--                                             the frame, its permits the refund's); else nil
--   now, grace                                unix ms; extra ms of expiry for state written at an explicit time
-- and the verdict, which the decision sets:
--   allowed, retry_after                      retry_after = ms until it could be allowed (0 if it is)
--   remaining, reset                          the standing without this request: permits left, and the unix ms at
--                                             which the limit is whole again if no request comes
--   reset_after                               `reset` with the grant (remaining is then remaining - permits)
--   held                                      false when a refund gave nothing back (permits freed, refilled or out of
--                                             the counted windows; a lease not held)
--   granted_mark, token                       set by the grant. The receipt is '<permits>:<mark>': the grant's unix ms
--                                             (token bucket, GCRA) or window index (fixed, sliding window) as the
--                                             number granted_mark; for a log, '<expiry>-<grant id>', granted_mark the
--                                             expiry and token the whole receipt. A refund gives back that grant.
-- Locals the decision declares are the grant's to use.
--
-- All arithmetic is on whole numbers below 2^53, where doubles are exact: the frames check limit × interval <= 2^52.

local MAX_COUNT = 2 ^ 32 - 1

-- Extra life for state written at an explicit time: the caller's clock may run behind Redis's, and the state must not
-- expire while it still counts in the caller's time. On server time keys vanish exactly when they stop mattering.
local EXPLICIT_TIME_GRACE_MS = 60000

-- Why a receipt's mark is refused (no number, or a time or window after the server's clock): a hand-made receipt or
-- another algorithm's. Reported as reject does: 'ERR edgelimit: invalid ' .. RECEIPT_MARK .. ': ' .. mark.
local RECEIPT_MARK = 'receipt mark (not a grant of this limit: a time or window after the server clock, or no number)'
