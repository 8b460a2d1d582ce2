//! Every script the crate sends to Redis, each a whole file under `lua/` that a reviewer can read, lint and run
//! alone (`redis-cli --eval lua/token_bucket.lua <key> , 1:10:1000:10`: 1 permit of a bucket of 10 refilled by 10 per 1000 ms).
//!
//! The files are generated from the shared pieces under `lua/parts/` so that no Lua is written twice (`scripts/lua`
//! writes them), and they are committed. What the crate sends is the same code without its comments, committed as
//! `lua/compact/<file>`: the comments are two thirds of the text, and every Worker downloads the wasm that carries
//! it (`build.rs` says what goes). The crate composes that text from the pieces (carrying the finished files would
//! repeat the shared pieces in the wasm), and tests fail when a file is not exactly what its pieces compose, or a
//! compact file differs from its readable one in anything but comments: what Redis runs, and its SHA1, is
//! `lua/compact/<file>`, line for line the code of `lua/<file>`.
//!
//! | file | script |
//! |---|---|
//! | `lua/<algorithm>.lua` | one limit of that algorithm, its quota in the arguments: the common call |
//! | `lua/batch/<algorithm>.lua` | several decisions of one algorithm in one call, each as `lua/<algorithm>.lua` decides its common call: what concurrent callers of one limiter decide at once (`crate::limit` merges them) |
//! | `lua/limits.lua` | every algorithm: several limits in one call, or a quota stored in Redis |
//! | `lua/inspect.lua` | reads limits' state, writing nothing |
//! | `lua/reserve/<algorithm>.lua` | decides one limit's request and reserves permits for the client to grant locally (`crate::limit::Reserved`): GCRA, fixed window, sliding log, concurrency |
//! | `lua/redisson/*.lua` | Redisson `RRateLimiter`'s layout: acquire, available, release, set rate, lifetime |

use crate::script::Script;

mod compose;

// `sha1_of!("<file>")`: the SHA1 of `lua/compact/<file>`, computed by build.rs.
include!(concat!(env!("OUT_DIR"), "/script_sha1s.rs"));

/// Declares each script once: its static (its SHA1 pinned when the crate was built, its text composed from its pieces
/// when first needed, exactly the compact file's, see [`compose`](self)), [`every_script`] and the list of files the
/// generation test checks. Each composer reaches only its own pieces, so a build that never uses a kind of script
/// (the Worker's, Redisson's) links none of its text.
macro_rules! scripts {
    ($($(#[$doc:meta])* $name:ident = $composer:ident($path:tt);)*) => {
        $(
            $(#[$doc])*
            pub static $name: Script =
                Script::pinned(sha1_of!($path), || compose::$composer(compose::Text::Compact, $path));
        )*

        /// How many scripts the crate sends.
        const COUNT: usize = [$($path),*].len();

        /// Every script the crate sends. For warming a Redis's script cache with `SCRIPT LOAD`, so that even the
        /// first calls find their script: `edgelimit dev` does, because a browser logs every `NOSCRIPT` answer (an
        /// HTTP 400 before the `EVAL` that follows) as a console error.
        pub fn every_script() -> [&'static Script; COUNT] {
            [$(&$name),*]
        }

        /// The file under `lua/` of each script and its composer, in the order of [`every_script`].
        #[cfg(test)]
        const FILES: [(&str, fn(compose::Text, &str) -> String); COUNT] = [$(($path, compose::$composer)),*];
    };
}

scripts! {
    /// Token bucket, one limit: `lua/token_bucket.lua`.
    TOKEN_BUCKET = family("token_bucket.lua");
    /// Fixed window, one limit: `lua/fixed_window.lua`.
    FIXED_WINDOW = family("fixed_window.lua");
    /// Sliding window, one limit: `lua/sliding_window.lua`.
    SLIDING_WINDOW = family("sliding_window.lua");
    /// GCRA, one limit: `lua/gcra.lua`.
    GCRA = family("gcra.lua");
    /// Concurrency, one limit: `lua/concurrency.lua`.
    CONCURRENCY = family("concurrency.lua");
    /// Sliding log, one limit: `lua/sliding_log.lua`.
    SLIDING_LOG = family("sliding_log.lua");
    /// Token bucket, several decisions in one call: `lua/batch/token_bucket.lua`.
    BATCH_TOKEN_BUCKET = family("batch/token_bucket.lua");
    /// Fixed window, several decisions in one call: `lua/batch/fixed_window.lua`.
    BATCH_FIXED_WINDOW = family("batch/fixed_window.lua");
    /// Sliding window, several decisions in one call: `lua/batch/sliding_window.lua`.
    BATCH_SLIDING_WINDOW = family("batch/sliding_window.lua");
    /// GCRA, several decisions in one call: `lua/batch/gcra.lua`.
    BATCH_GCRA = family("batch/gcra.lua");
    /// Concurrency, several decisions in one call: `lua/batch/concurrency.lua`.
    BATCH_CONCURRENCY = family("batch/concurrency.lua");
    /// Sliding log, several decisions in one call: `lua/batch/sliding_log.lua`.
    BATCH_SLIDING_LOG = family("batch/sliding_log.lua");
    /// Every algorithm behind one driver, for several limits in one call and for stored quotas: `lua/limits.lua`.
    LIMITS = family("limits.lua");
    /// Limits' state, read at one moment of the server's clock: `lua/inspect.lua`.
    INSPECT = family("inspect.lua");
    /// GCRA permits reserved for a client to grant locally: `lua/reserve/gcra.lua`.
    RESERVE_GCRA = reserve("reserve/gcra.lua");
    /// Fixed-window permits reserved for a client to grant locally: `lua/reserve/fixed_window.lua`.
    RESERVE_FIXED_WINDOW = reserve("reserve/fixed_window.lua");
    /// Sliding-log permits reserved for a client to grant locally: `lua/reserve/sliding_log.lua`.
    RESERVE_SLIDING_LOG = reserve("reserve/sliding_log.lua");
    /// Concurrency permits reserved for a client to lend locally: `lua/reserve/concurrency.lua`.
    RESERVE_CONCURRENCY = reserve("reserve/concurrency.lua");
    /// Redisson's layout, try to take permits: the family's decision shape (see `crate::decision`).
    REDISSON_ACQUIRE = redisson("redisson/acquire.lua");
    /// Redisson's layout, permits available now, taking none.
    REDISSON_AVAILABLE = redisson("redisson/available.lua");
    /// Redisson's layout, give permits back, newest grants first.
    REDISSON_RELEASE = redisson("redisson/release.lua");
    /// Redisson's layout, set, try-set or update the rate.
    REDISSON_SET_RATE = redisson("redisson/set_rate.lua");
    /// Redisson's layout, change an existing limiter's lifetime: its keep-alive, or an expiry of all its keys.
    REDISSON_LIFETIME = redisson("redisson/lifetime.lua");
}

#[cfg(test)]
mod tests {
    use super::every_script;

    /// The SHA1 that build.rs pinned for each script is its composed text's: `EVALSHA` and `EVAL` name one script.
    #[test]
    fn every_pinned_sha1_is_the_composed_texts() {
        for script in every_script() {
            let composed = crate::script::Script::new(script.source());
            assert_eq!(script.sha1(), composed.sha1(), "{}", &script.source()[..80]);
        }
    }
}
