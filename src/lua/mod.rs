//! Every script the crate sends to Redis, each a whole file under `lua/` that a reviewer can read, lint and run
//! alone (`redis-cli --eval lua/token_bucket.lua <key> , limit '' 1 10 1000 10 ''`).
//!
//! The files are generated from the shared pieces under `lua/parts/` so that no Lua is written twice (`scripts/lua`
//! writes them), and they are committed. The crate composes the same text from the same pieces (carrying the
//! finished files would repeat the shared pieces in the wasm), and a test fails when a file is not exactly that
//! text: what Redis runs, and its SHA1, is the file in the repository.
//!
//! | file | script |
//! |---|---|
//! | `lua/<algorithm>.lua` | one limit of that algorithm, its quota in the arguments: the common call |
//! | `lua/limits.lua` | every algorithm: several limits in one call, or a quota stored in Redis |
//! | `lua/inspect.lua` | reads limits' state, writing nothing |
//! | `lua/redisson/*.lua` | Redisson `RRateLimiter`'s layout: acquire, available, release, set rate, lifetime |

use std::sync::LazyLock;

use crate::script::Script;

mod compose;

/// The [`Script`] of the file `lua/<path>`: composed from its pieces when first used, exactly the file's text (see
/// [`compose`](self)), its SHA1 computed once.
macro_rules! lua_file {
    ($path:literal) => {
        LazyLock::new(|| Script::new(compose::compose($path)))
    };
}

/// Token bucket, one limit: `lua/token_bucket.lua`.
pub static TOKEN_BUCKET: LazyLock<Script> = lua_file!("token_bucket.lua");
/// Fixed window, one limit: `lua/fixed_window.lua`.
pub static FIXED_WINDOW: LazyLock<Script> = lua_file!("fixed_window.lua");
/// Sliding window, one limit: `lua/sliding_window.lua`.
pub static SLIDING_WINDOW: LazyLock<Script> = lua_file!("sliding_window.lua");
/// GCRA, one limit: `lua/gcra.lua`.
pub static GCRA: LazyLock<Script> = lua_file!("gcra.lua");
/// Concurrency, one limit: `lua/concurrency.lua`.
pub static CONCURRENCY: LazyLock<Script> = lua_file!("concurrency.lua");
/// Sliding log, one limit: `lua/sliding_log.lua`.
pub static SLIDING_LOG: LazyLock<Script> = lua_file!("sliding_log.lua");
/// Every algorithm behind one driver, for several limits in one call and for stored quotas: `lua/limits.lua`.
pub static LIMITS: LazyLock<Script> = lua_file!("limits.lua");
/// Limits' state, read at one moment of the server's clock: `lua/inspect.lua`.
pub static INSPECT: LazyLock<Script> = lua_file!("inspect.lua");
/// Redisson's layout, try to take permits: `{status, limit, remaining, reset, retry_after}`.
pub static REDISSON_ACQUIRE: LazyLock<Script> = lua_file!("redisson/acquire.lua");
/// Redisson's layout, permits available now, taking none.
pub static REDISSON_AVAILABLE: LazyLock<Script> = lua_file!("redisson/available.lua");
/// Redisson's layout, give permits back, newest grants first.
pub static REDISSON_RELEASE: LazyLock<Script> = lua_file!("redisson/release.lua");
/// Redisson's layout, set, try-set or update the rate.
pub static REDISSON_SET_RATE: LazyLock<Script> = lua_file!("redisson/set_rate.lua");
/// Redisson's layout, change an existing limiter's lifetime: its keep-alive, or an expiry of all its keys.
pub static REDISSON_LIFETIME: LazyLock<Script> = lua_file!("redisson/lifetime.lua");

/// Every script the crate sends. For warming a Redis's script cache with `SCRIPT LOAD`, so that even the first calls
/// find their script: `edgelimit dev` does, because a browser logs every `NOSCRIPT` answer (an HTTP 400 before the
/// `EVAL` that follows) as a console error.
pub fn every_script() -> [&'static Script; 13] {
    [
        &TOKEN_BUCKET,
        &FIXED_WINDOW,
        &SLIDING_WINDOW,
        &GCRA,
        &CONCURRENCY,
        &SLIDING_LOG,
        &LIMITS,
        &INSPECT,
        &REDISSON_ACQUIRE,
        &REDISSON_AVAILABLE,
        &REDISSON_RELEASE,
        &REDISSON_SET_RATE,
        &REDISSON_LIFETIME,
    ]
}
