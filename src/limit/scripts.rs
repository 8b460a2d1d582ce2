//! The algorithm family's scripts, composed from the files under `lua/limits/` (see `prelude.lua` there):
//!
//! - one script per algorithm for the common call, one limit with its quota in the arguments: `single.lua` with the
//!   algorithm's code spliced in, so it runs straight through ([`for_one`]);
//! - one script with every algorithm, for several limits in one call or a quota stored in Redis: `driver.lua` with
//!   each algorithm wrapped in a function by `entry.lua` ([`ALL`]).
//!
//! Both come from the same algorithm files, so no algorithm is written twice. Each starts with `lua/common.lua` and
//! `lua/limits/prelude.lua`; before its own file an algorithm gets the helpers it shares with others (see
//! [`shared_helpers`]), and only those: every function a script defines costs Redis a closure on every call.

use std::sync::LazyLock;

use super::quota::Algorithm;
use crate::script::Script;

macro_rules! lua_file {
    ($file:literal) => {
        include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/lua/", $file))
    };
}

const COMMON: &str = lua_file!("common.lua");
const PRELUDE: &str = lua_file!("limits/prelude.lua");
const BUCKET: &str = lua_file!("limits/bucket.lua");
const ZSET_LOG: &str = lua_file!("limits/zset_log.lua");
const SINGLE: &str = lua_file!("limits/single.lua");
const ENTRY: &str = lua_file!("limits/entry.lua");
const DRIVER: &str = lua_file!("limits/driver.lua");

/// The single-limit scripts, in the order of [`Algorithm::ALL`].
static SINGLE_SCRIPTS: LazyLock<[Script; 6]> = LazyLock::new(|| Algorithm::ALL.map(single));

/// Every algorithm, behind the driver: for several limits in one call and for stored configs.
pub static ALL: LazyLock<Script> = LazyLock::new(|| {
    let mut algorithms = vec![BUCKET.to_owned(), ZSET_LOG.to_owned()];
    for algorithm in Algorithm::ALL {
        let parts = Parts::of(algorithm);
        let entry = splice(ENTRY, "--@decision", parts.decision);
        let entry = splice(&entry, "--@grant", parts.grant).replace("__ALGORITHM__", algorithm.script_name());
        algorithms.extend([parts.helpers.to_owned(), entry]);
    }
    script(&splice(DRIVER, "--@algorithms", &algorithms.join("\n")))
});

/// The script for one limit of `algorithm` whose quota comes with the request (`lua/limits/single.lua`). Its
/// arguments: operation, time, permits, limit, interval, rate, lease; one key, the state key.
pub fn for_one(algorithm: Algorithm) -> &'static Script {
    let index = Algorithm::ALL
        .iter()
        .position(|&known| known == algorithm)
        .expect("Algorithm::ALL lists every algorithm");
    &SINGLE_SCRIPTS[index]
}

fn single(algorithm: Algorithm) -> Script {
    let parts = Parts::of(algorithm);
    let helpers = match shared_helpers(algorithm) {
        Some(shared) => format!("{shared}\n{}", parts.helpers),
        None => parts.helpers.to_owned(),
    };
    let body = splice(SINGLE, "--@helpers", &helpers);
    let body = splice(&body, "--@decision", parts.decision);
    script(&splice(&body, "--@grant", parts.grant))
}

/// The helpers `algorithm` shares with others: the units arithmetic of token bucket and GCRA, or the permit log of
/// concurrency and the sliding log.
fn shared_helpers(algorithm: Algorithm) -> Option<&'static str> {
    match algorithm {
        Algorithm::TokenBucket | Algorithm::Gcra => Some(BUCKET),
        Algorithm::Concurrency | Algorithm::SlidingLog => Some(ZSET_LOG),
        Algorithm::FixedWindow | Algorithm::SlidingWindow => None,
    }
}

fn script(body: &str) -> Script {
    Script::new([COMMON, PRELUDE, body].join("\n"))
}

/// An algorithm file cut at its marker lines: helpers, `--@decision`, `--@grant`.
struct Parts {
    helpers: &'static str,
    decision: &'static str,
    grant: &'static str,
}

impl Parts {
    fn of(algorithm: Algorithm) -> Parts {
        let file = match algorithm {
            Algorithm::TokenBucket => lua_file!("limits/token_bucket.lua"),
            Algorithm::FixedWindow => lua_file!("limits/fixed_window.lua"),
            Algorithm::SlidingWindow => lua_file!("limits/sliding_window.lua"),
            Algorithm::Gcra => lua_file!("limits/gcra.lua"),
            Algorithm::Concurrency => lua_file!("limits/concurrency.lua"),
            Algorithm::SlidingLog => lua_file!("limits/sliding_log.lua"),
        };
        let (helpers, rest) = file
            .split_once("\n--@decision\n")
            .expect("an algorithm file has a --@decision line");
        let (decision, grant) = rest
            .split_once("\n--@grant\n")
            .expect("an algorithm file has a --@grant line after --@decision");
        Parts {
            helpers,
            decision,
            grant,
        }
    }
}

/// `frame` with its one line `marker` replaced by `text`.
fn splice(frame: &str, marker: &str, text: &str) -> String {
    let line = format!("\n{marker}\n");
    assert_eq!(frame.matches(&line).count(), 1, "one {marker} line in the frame");
    frame.replacen(&line, &format!("\n{text}\n"), 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_script_has_its_algorithms_code_and_no_marker_left() {
        for algorithm in Algorithm::ALL {
            let parts = Parts::of(algorithm);
            for script in [for_one(algorithm), &ALL] {
                assert!(script.source().contains(parts.decision) && script.source().contains(parts.grant));
                assert!(!script.source().contains("\n--@"), "{algorithm}: a marker was left");
            }
            assert!(ALL
                .source()
                .contains(&format!("ALGORITHMS.{} = function", algorithm.script_name())));
        }
        for shared in [BUCKET, ZSET_LOG] {
            assert_eq!(ALL.source().matches(shared).count(), 1);
        }
    }
}
