//! Every script the crate sends to Redis, built by `build.rs` from the readable sources under `lua/`
//! (`lua/README.md` says how). `edgelimit scripts NAME` prints one; `lua/SHA1SUMS` pins each one's hash.

use crate::rest::Script;

// `sha1_of!("<name>")`: the SHA1 of the built script, from build.rs.
include!(concat!(env!("OUT_DIR"), "/scripts.rs"));

/// Declares each script once: its static, [`every_script`] and [`NAMES`].
macro_rules! scripts {
    ($($(#[$doc:meta])* $name:ident = $path:tt;)*) => {
        $(
            $(#[$doc])*
            pub static $name: Script = Script::built(
                sha1_of!($path),
                include_str!(concat!(env!("OUT_DIR"), "/scripts/", $path, ".lua")),
            );
        )*

        /// How many scripts the crate sends.
        const COUNT: usize = [$($path),*].len();

        /// Every script the crate sends, in the order of [`NAMES`] (for `SCRIPT LOAD` ahead of the first call).
        pub fn every_script() -> [&'static Script; COUNT] {
            [$(&$name),*]
        }

        /// Each script's name, as `edgelimit scripts` and `lua/SHA1SUMS` give it.
        pub const NAMES: [&str; COUNT] = [$($path),*];
    };
}

/// The script of that name (see [`NAMES`]).
pub fn script_named(name: &str) -> Option<&'static Script> {
    NAMES.iter().position(|known| *known == name).map(|i| every_script()[i])
}

scripts! {
    /// Token bucket, one limit.
    TOKEN_BUCKET = "token_bucket";
    /// Fixed window, one limit.
    FIXED_WINDOW = "fixed_window";
    /// Sliding window, one limit.
    SLIDING_WINDOW = "sliding_window";
    /// GCRA, one limit.
    GCRA = "gcra";
    /// Concurrency, one limit.
    CONCURRENCY = "concurrency";
    /// Sliding log, one limit.
    SLIDING_LOG = "sliding_log";
    /// Token bucket, several decisions in one call.
    BATCH_TOKEN_BUCKET = "batch/token_bucket";
    /// Fixed window, several decisions in one call.
    BATCH_FIXED_WINDOW = "batch/fixed_window";
    /// Sliding window, several decisions in one call.
    BATCH_SLIDING_WINDOW = "batch/sliding_window";
    /// GCRA, several decisions in one call.
    BATCH_GCRA = "batch/gcra";
    /// Concurrency, several decisions in one call.
    BATCH_CONCURRENCY = "batch/concurrency";
    /// Sliding log, several decisions in one call.
    BATCH_SLIDING_LOG = "batch/sliding_log";
    /// Every algorithm behind one driver: several limits in one call, and stored quotas.
    LIMITS = "limits";
    /// Limits' state at one moment of the server's clock, writing nothing.
    INSPECT = "inspect";
    /// GCRA permits reserved for a client to grant locally.
    RESERVE_GCRA = "reserve/gcra";
    /// Fixed-window permits reserved for a client to grant locally.
    RESERVE_FIXED_WINDOW = "reserve/fixed_window";
    /// Sliding-log permits reserved for a client to grant locally.
    RESERVE_SLIDING_LOG = "reserve/sliding_log";
    /// Concurrency permits reserved for a client to lend locally.
    RESERVE_CONCURRENCY = "reserve/concurrency";
    /// Redisson's layout: try to take permits.
    REDISSON_ACQUIRE = "redisson/acquire";
    /// Redisson's layout: permits available now, taking none.
    REDISSON_AVAILABLE = "redisson/available";
    /// Redisson's layout: give permits back, newest grants first.
    REDISSON_RELEASE = "redisson/release";
    /// Redisson's layout: set, try-set or update the rate.
    REDISSON_SET_RATE = "redisson/set_rate";
    /// Redisson's layout: change a limiter's lifetime (its keep-alive, or an expiry of all its keys).
    REDISSON_LIFETIME = "redisson/lifetime";
}

/// `lua/SHA1SUMS`'s text for the scripts this build carries: `<sha1>  <name>.lua` a line, as `sha1sum` writes it.
pub fn sha1sums() -> String {
    NAMES.iter().zip(every_script()).map(|(name, script)| format!("{}  {name}.lua\n", script.sha1())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `lua/SHA1SUMS` is what this build sends: a change to a script shows in review. `EDGELIMIT_WRITE_LUA=1`
    /// (`scripts/lua`) writes it.
    #[test]
    fn lua_sha1sums_pins_every_script() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("lua/SHA1SUMS");
        if std::env::var_os("EDGELIMIT_WRITE_LUA").is_some() {
            std::fs::write(&path, sha1sums()).unwrap();
        }
        let pinned = std::fs::read_to_string(&path).unwrap_or_default();
        assert_eq!(pinned, sha1sums(), "lua/SHA1SUMS differs from the built scripts: run scripts/lua");
    }

    #[test]
    fn every_sha1_is_its_texts() {
        for script in every_script() {
            assert_eq!(script.sha1(), Script::new(script.source()).sha1());
        }
        assert_eq!(script_named("limits"), Some(&LIMITS));
        assert_eq!(script_named("nope"), None);
    }
}
