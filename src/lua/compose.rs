//! How the files under `lua/` are made from the pieces under `lua/parts/`, and the test that keeps them so.
//!
//! The crate carries the pieces and composes each script once, when first used: the finished files repeat the
//! shared pieces (every script starts with `common.lua`; `limits.lua` holds every algorithm again), which would
//! triple the Lua text inside the wasm. A test checks that every file under `lua/` is exactly what this module
//! composes, so the text Redis runs, and its SHA1, is the file in the repository. Run `scripts/lua` after editing
//! a piece: it runs that test with `EDGELIMIT_WRITE_LUA=1`, which writes the files instead of comparing them.
//!
//! - Every script starts with `parts/common.lua` (argument checks and the clock), but the single-limit scripts,
//!   which check their few arguments inline (see `parts/limits/single.lua`).
//! - One limit of an algorithm (`lua/<algorithm>.lua`): `parts/limits/prelude.lua`, then `parts/limits/single.lua`
//!   with its request's reading (with a rate or without) and the algorithm's file cut at its markers spliced in, so
//!   its code runs straight through. Before the algorithm's own helpers come the helpers it shares with others, and
//!   only those: every function a script defines costs Redis a closure on every call.
//! - Every algorithm (`lua/limits.lua`): `parts/limits/driver.lua`, each algorithm wrapped in a function by
//!   `parts/limits/entry.lua`.
//! - `lua/inspect.lua`: the permit log's layout (`parts/limits/zset_member.lua`), then `parts/limits/inspect.lua`.
//! - `lua/redisson/<script>.lua`: `parts/redisson/prelude.lua`, the pieces it calls, then the script's own file.

/// The scripts' algorithms by file name, with the helpers each shares with others (the units arithmetic of token
/// bucket and GCRA, or the permit log of concurrency and the sliding log) and whether its quota has a rate (token
/// bucket and GCRA: their single-limit scripts read one more number, see `parts/limits/single.lua`).
const ALGORITHMS: [(&str, Option<&str>, bool); 6] = [
    ("token_bucket", Some("bucket"), true),
    ("fixed_window", None, false),
    ("sliding_window", None, false),
    ("gcra", Some("bucket"), true),
    ("concurrency", Some("zset_log"), false),
    ("sliding_log", Some("zset_log"), false),
];

/// How a single-limit script reads its request, `ARGV[1]` (see `parts/limits/single.lua`), with a rate or without:
/// one string.match checks every field's digits, and each number is converted once, by arithmetic (`+ 0`, cheaper
/// in Redis than a call to tonumber).
const REQUEST_WITH_RATE: &str =
    "local permits, limit, interval, rate = string.match(request, '^(%d+):(%d+):(%d+):(%d+)$')
if permits then
    permits, limit, interval, rate = permits + 0, limit + 0, interval + 0, rate + 0
end";
const REQUEST_WITHOUT_RATE: &str = "local permits, limit, interval = string.match(request, '^(%d+):(%d+):(%d+)$')
local rate = 1
if permits then
    permits, limit, interval = permits + 0, limit + 0, interval + 0
end";

/// What the shared helpers above are made of: the units arithmetic, or a log's layout and then its writing.
const SHARED: [(&str, &[&str]); 2] = [("bucket", &["bucket"]), ("zset_log", &["zset_member", "zset_log"])];

/// Redisson's scripts, each with the pieces it needs after the prelude: every function a script defines costs a
/// closure on every call, so none gets one it does not call.
const REDISSON: [(&str, &[&str]); 5] = [
    ("acquire", &["log", "window", "grants"]),
    ("available", &["log", "window"]),
    ("release", &["log", "window", "grants"]),
    ("set_rate", &["log"]),
    ("lifetime", &[]),
];

/// A single-limit script's reply to a denial and to a grant (see `parts/limits/single.lua`): numbers for a log,
/// the state it read for an algorithm that keeps a string (`value`, which its decision reads).
const LOG_DENIED: &str = "    return { 0, remaining, reset, retry_after }";
const LOG_GRANTED: &str = "return { 1, remaining - permits, reset_after, granted_mark }";
const STRING_DENIED: &str = "    return 'd' .. seconds .. ':' .. micros .. ':' .. value";
const STRING_GRANTED: &str = "return 'g' .. seconds .. ':' .. micros .. ':' .. value";

/// The pieces under `lua/parts/` of one kind of script, by their path there, as the function `$function`: one per
/// kind, so that a build which never composes a kind links none of its pieces.
macro_rules! parts {
    ($function:ident: $($name:literal),+ $(,)?) => {
        fn $function(name: &str) -> &'static str {
            match name {
                $($name => include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/lua/parts/", $name)),)+
                _ => unreachable!("no piece lua/parts/{name}"),
            }
        }
    };
}

parts!(
    part:
    "common.lua",
    "limits/prelude.lua",
    "limits/single.lua",
    "limits/driver.lua",
    "limits/entry.lua",
    "limits/inspect.lua",
    "limits/bucket.lua",
    "limits/zset_member.lua",
    "limits/zset_log.lua",
    "limits/token_bucket.lua",
    "limits/fixed_window.lua",
    "limits/sliding_window.lua",
    "limits/gcra.lua",
    "limits/concurrency.lua",
    "limits/sliding_log.lua",
);

parts!(
    redisson_part:
    "redisson/prelude.lua",
    "redisson/log.lua",
    "redisson/window.lua",
    "redisson/grants.lua",
    "redisson/acquire.lua",
    "redisson/available.lua",
    "redisson/release.lua",
    "redisson/set_rate.lua",
    "redisson/lifetime.lua",
);

/// The text of the shared helpers named `shared` (see [`SHARED`]).
fn shared_part(shared: &str) -> String {
    let (_, pieces) = SHARED.iter().find(|(name, _)| *name == shared).expect("a shared part");
    pieces
        .iter()
        .map(|piece| part(&format!("limits/{piece}.lua")))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The text of the script `lua/<path>` (one of those `mod.rs` declares).
pub(super) fn family(path: &str) -> String {
    if let Some((algorithm, shared, rate)) = ALGORITHMS.iter().find(|(name, _, _)| format!("{name}.lua") == path) {
        let parts = Parts::of(algorithm);
        let helpers = match shared {
            Some(shared) => format!("{}\n{}", shared_part(shared), parts.helpers),
            None => parts.helpers.to_owned(),
        };
        let request = if *rate { REQUEST_WITH_RATE } else { REQUEST_WITHOUT_RATE };
        let body = splice(part("limits/single.lua"), "--@request", request);
        // A log replies with numbers; an algorithm that keeps a string, with what it read (see single.lua).
        let (denied, granted) = match shared {
            Some("zset_log") => (LOG_DENIED, LOG_GRANTED),
            _ => (STRING_DENIED, STRING_GRANTED),
        };
        let body = splice(&body, "--@denied", denied);
        let body = splice(&body, "--@granted", granted);
        let body = splice(&body, "--@helpers", &helpers);
        let body = splice(&body, "--@decision", parts.decision);
        let body = splice(&body, "--@grant", parts.grant);
        // No algorithm calls anything of common.lua, and every function it defines would be a closure made on
        // every call.
        return compose_whole(path, false, &[part("limits/prelude.lua"), &body]);
    }
    if path == "limits.lua" {
        let mut algorithms: Vec<String> = SHARED.iter().map(|(shared, _)| shared_part(shared)).collect();
        for (algorithm, _, _) in ALGORITHMS {
            let parts = Parts::of(algorithm);
            let entry = splice(part("limits/entry.lua"), "--@decision", parts.decision);
            let entry = splice(&entry, "--@grant", parts.grant).replace("__ALGORITHM__", algorithm);
            algorithms.extend([parts.helpers.to_owned(), entry]);
        }
        let driver = splice(part("limits/driver.lua"), "--@algorithms", &algorithms.join("\n"));
        return whole(path, &[part("limits/prelude.lua"), &driver]);
    }
    if path == "inspect.lua" {
        return whole(path, &[part("limits/zset_member.lua"), part("limits/inspect.lua")]);
    }
    unreachable!("no script of the family lua/{path}")
}

/// The text of the Redisson-layout script `lua/<path>` (one of those `mod.rs` declares).
pub(super) fn redisson(path: &str) -> String {
    let (script, pieces) = REDISSON
        .iter()
        .find(|(script, _)| format!("redisson/{script}.lua") == path)
        .unwrap_or_else(|| unreachable!("no script lua/{path}"));
    let mut texts = vec![redisson_part("redisson/prelude.lua")];
    texts.extend(
        pieces
            .iter()
            .map(|piece| redisson_part(&format!("redisson/{piece}.lua"))),
    );
    texts.push(redisson_part(&format!("redisson/{script}.lua")));
    whole(path, &texts)
}

/// A whole script: a header naming it generated, `parts/common.lua`, then `pieces`.
fn whole(path: &str, pieces: &[&str]) -> String {
    compose_whole(path, true, pieces)
}

/// A whole script: a header naming it generated, `parts/common.lua` when `common`, then `pieces`.
fn compose_whole(path: &str, common: bool, pieces: &[&str]) -> String {
    let mut text = format!(
        "-- lua/{path}: GENERATED from lua/parts/ (src/lua/compose.rs). Edit the parts, then run scripts/lua.\n\n"
    );
    for (i, piece) in common
        .then(|| part("common.lua"))
        .into_iter()
        .chain(pieces.iter().copied())
        .enumerate()
    {
        if i > 0 {
            text.push('\n');
        }
        text.push_str(piece);
    }
    text
}

/// An algorithm file cut at its marker lines: helpers, `--@decision`, `--@grant`.
struct Parts {
    helpers: &'static str,
    decision: &'static str,
    grant: &'static str,
}

impl Parts {
    fn of(algorithm: &str) -> Parts {
        let file = part(&format!("limits/{algorithm}.lua"));
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
    use super::super::FILES;
    use super::*;

    #[test]
    fn every_lua_file_is_what_its_parts_compose() {
        let write = std::env::var_os("EDGELIMIT_WRITE_LUA").is_some();
        let mut stale = Vec::new();
        let lua = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("lua");
        for (path, compose) in FILES {
            let text = compose(path);
            assert!(!text.contains("\n--@"), "{path}: a marker was left");
            let file = lua.join(path);
            if write {
                std::fs::create_dir_all(file.parent().unwrap()).unwrap();
                std::fs::write(&file, &text).unwrap();
            } else if std::fs::read_to_string(&file).ok().as_deref() != Some(text.as_str()) {
                stale.push(path);
            }
        }
        assert!(
            stale.is_empty(),
            "lua/{stale:?} differ from their parts: run scripts/lua"
        );
        // And no script under lua/ is left out of the list (a new one: create it empty, declare it in mod.rs's
        // `scripts!`, run scripts/lua).
        let mut on_disk = Vec::new();
        for dir in ["", "redisson"] {
            for entry in std::fs::read_dir(lua.join(dir)).unwrap() {
                let name = entry.unwrap().file_name().to_string_lossy().into_owned();
                if name.ends_with(".lua") {
                    on_disk.push(if dir.is_empty() { name } else { format!("{dir}/{name}") });
                }
            }
        }
        on_disk.sort();
        let mut listed: Vec<String> = FILES.iter().map(|(path, _)| (*path).to_owned()).collect();
        listed.sort();
        assert_eq!(on_disk, listed, "the scripts under lua/ and those mod.rs declares");
    }

    #[test]
    fn the_driver_holds_every_algorithm_once_and_shared_helpers_once() {
        let driver = family("limits.lua");
        for (algorithm, _, _) in ALGORITHMS {
            assert_eq!(driver.matches(&format!("ALGORITHMS.{algorithm} = function")).count(), 1);
        }
        for (shared, _) in SHARED {
            assert_eq!(driver.matches(&shared_part(shared)).count(), 1);
        }
    }
}
