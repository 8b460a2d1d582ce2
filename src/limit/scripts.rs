//! The algorithm family's scripts: `lua/common.lua`, `lua/limits/prelude.lua`, `lua/limits/zset_log.lua` where an
//! algorithm keeps a permit log, one or every algorithm file, then `lua/limits/driver.lua`. A limit with a known
//! algorithm runs the smallest script that has it; several limits of different algorithms, or a config stored in
//! Redis (whose algorithm only the script reads), run the script that has all six.

use std::sync::LazyLock;

use super::quota::Algorithm;
use crate::script::{lua_script, Script};

/// Token bucket only.
pub static TOKEN_BUCKET: LazyLock<Script> =
    lua_script!("limits/prelude.lua", "limits/token_bucket.lua", "limits/driver.lua");
/// Fixed window only.
pub static FIXED_WINDOW: LazyLock<Script> =
    lua_script!("limits/prelude.lua", "limits/fixed_window.lua", "limits/driver.lua");
/// Sliding window counter only.
pub static SLIDING_WINDOW: LazyLock<Script> =
    lua_script!("limits/prelude.lua", "limits/sliding_window.lua", "limits/driver.lua");
/// GCRA only.
pub static GCRA: LazyLock<Script> = lua_script!("limits/prelude.lua", "limits/gcra.lua", "limits/driver.lua");
/// Concurrency only.
pub static CONCURRENCY: LazyLock<Script> = lua_script!(
    "limits/prelude.lua",
    "limits/zset_log.lua",
    "limits/concurrency.lua",
    "limits/driver.lua",
);
/// Sliding log only.
pub static SLIDING_LOG: LazyLock<Script> = lua_script!(
    "limits/prelude.lua",
    "limits/zset_log.lua",
    "limits/sliding_log.lua",
    "limits/driver.lua",
);
/// Every algorithm: for mixed limits and stored configs.
pub static ALL: LazyLock<Script> = lua_script!(
    "limits/prelude.lua",
    "limits/token_bucket.lua",
    "limits/fixed_window.lua",
    "limits/sliding_window.lua",
    "limits/gcra.lua",
    "limits/zset_log.lua",
    "limits/concurrency.lua",
    "limits/sliding_log.lua",
    "limits/driver.lua",
);

/// The script for limits of these algorithms (`None` stands for a stored config, whose algorithm is unknown).
pub fn for_algorithms(mut algorithms: impl Iterator<Item = Option<Algorithm>>) -> &'static Script {
    let first = algorithms.next().flatten();
    match first {
        Some(algorithm) if algorithms.all(|other| other == first) => match algorithm {
            Algorithm::TokenBucket => &TOKEN_BUCKET,
            Algorithm::FixedWindow => &FIXED_WINDOW,
            Algorithm::SlidingWindow => &SLIDING_WINDOW,
            Algorithm::Gcra => &GCRA,
            Algorithm::Concurrency => &CONCURRENCY,
            Algorithm::SlidingLog => &SLIDING_LOG,
        },
        _ => &ALL,
    }
}
