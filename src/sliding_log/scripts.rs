//! The sliding-log scripts, each composed at compile time from the shared prelude and its own file in `lua/`.

use std::sync::LazyLock;

use crate::script::{lua_script, Script};

/// Try to take permits: `{status, limit, remaining, reset, retry_after}`.
pub static ACQUIRE: LazyLock<Script> = lua_script!("sliding_log/prelude.lua", "sliding_log/acquire.lua");
/// Permits available now, taking none.
pub static AVAILABLE: LazyLock<Script> = lua_script!("sliding_log/prelude.lua", "sliding_log/available.lua");
/// Give permits back, newest grants first.
pub static RELEASE: LazyLock<Script> = lua_script!("sliding_log/prelude.lua", "sliding_log/release.lua");
/// Set, try-set or update the rate.
pub static SET_RATE: LazyLock<Script> = lua_script!("sliding_log/prelude.lua", "sliding_log/set_rate.lua");
