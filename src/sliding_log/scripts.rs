//! The sliding-log scripts, each composed at compile time from the shared prelude and its own file in `lua/`.

use std::sync::LazyLock;

use crate::script::Script;

macro_rules! sliding_log_script {
    ($file:literal) => {
        LazyLock::new(|| {
            Script::new(concat!(
                include_str!("../../lua/sliding_log/prelude.lua"),
                "\n",
                include_str!(concat!("../../lua/sliding_log/", $file))
            ))
        })
    };
}

/// Try to take permits: `{status, limit, remaining, reset, retry_after}`.
pub static ACQUIRE: LazyLock<Script> = sliding_log_script!("acquire.lua");
/// Permits available now, taking none.
pub static AVAILABLE: LazyLock<Script> = sliding_log_script!("available.lua");
/// Give permits back, newest grants first.
pub static RELEASE: LazyLock<Script> = sliding_log_script!("release.lua");
/// Set, try-set or update the rate.
pub static SET_RATE: LazyLock<Script> = sliding_log_script!("set_rate.lua");
