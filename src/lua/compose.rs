//! How the files under `lua/` are made from the pieces under `lua/parts/`, and the test that keeps them so.
//!
//! The crate carries the pieces and composes a script's text when Redis first asks for it (`NOSCRIPT`; the SHA1 that
//! `EVALSHA` names is pinned by build.rs from `lua/compact/`): the finished files repeat the
//! shared pieces (every script starts with `common.lua`; `limits.lua` holds every algorithm again), which would
//! triple the Lua text inside the wasm. A test checks that every file under `lua/` is exactly what this module
//! composes, so the text Redis runs, and its SHA1, is the file in the repository. Run `scripts/lua` after editing
//! a piece, before building: it runs that test with `EDGELIMIT_WRITE_LUA=1`, which writes the files instead of
//! comparing them (a build from stale files pins the old files' SHA1s; `scripts/build-wasm` and `edgelimit dev` refuse
//! to go on then).
//!
//! - Every script starts with `parts/common.lua` (argument checks and the clock), but the single-limit scripts,
//!   which check their few arguments inline (see `parts/limits/single.lua`).
//! - One limit of an algorithm (`lua/<algorithm>.lua`): `parts/limits/prelude.lua`, then `parts/limits/single.lua`
//!   with its request's reading (with a rate or without) and the algorithm's file cut at its markers spliced in, so
//!   its code runs straight through. Before the algorithm's own helpers come the helpers it shares with others, and
//!   only those: every function a script defines costs Redis a closure on every call.
//! - Every algorithm (`lua/limits.lua`): `parts/limits/driver.lua`, each algorithm wrapped in a function by
//!   `parts/limits/entry.lua`.
//! - `lua/reserve/<algorithm>.lua`: the family's prelude, the log's helpers for a log, `parts/reserve/arguments.lua`,
//!   then `parts/reserve/<algorithm>.lua` (`parts/reserve/log.lua` for both algorithms that keep a log) with its
//!   request's reading and the algorithm's `--@decision` section spliced in: a reserve script decides its request
//!   with the single-limit script's own code.
//! - A line `--@inline <piece>` in a piece is that piece under `parts/`, indented as the line: code that several
//!   places of one script run, where a function would cost a closure on every call (GCRA's state write serves its
//!   grant, its refund and its reserve script). `build.rs` splices them into the pieces, both texts.
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
/// kind, so that a build which never composes a kind links none of its pieces. What the crate carries is each piece
/// without its comment lines, as `build.rs` writes it; the commented pieces (with their `--@inline` pieces spliced
/// in by `build.rs` too) are linked into the tests only, which compose the readable files under `lua/` from them.
macro_rules! parts {
    ($function:ident: $($name:literal),+ $(,)?) => {
        fn $function(text: Text, name: &str) -> &'static str {
            match (text, name) {
                $(
                    (Text::Compact, $name) => include_str!(concat!(env!("OUT_DIR"), "/lua-parts/", $name)),
                    #[cfg(test)]
                    (Text::Commented, $name) => include_str!(concat!(env!("OUT_DIR"), "/lua-parts-readable/", $name)),
                )+
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
    "limits/batch.lua",
    "limits/request.lua",
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
    "reserve/arguments.lua",
    "reserve/gcra.lua",
    "reserve/fixed_window.lua",
    "reserve/log.lua",
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

/// Which text of the pieces a script is composed from: what Redis runs (`lua/compact/`), or the readable file with
/// every comment (`lua/`), which only the tests compose.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Text {
    /// The pieces without their comment lines (see `build.rs`): what the crate sends.
    Compact,
    /// The pieces as written.
    #[cfg(test)]
    Commented,
}

/// The text of the shared helpers named `shared` (see [`SHARED`]).
fn shared_part(text: Text, shared: &str) -> String {
    let (_, pieces) = SHARED.iter().find(|(name, _)| *name == shared).expect("a shared part");
    pieces
        .iter()
        .map(|piece| part(text, &format!("limits/{piece}.lua")))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The text of the script `lua/<path>` (one of those `mod.rs` declares).
pub(super) fn family(text: Text, path: &str) -> String {
    let algorithm = |folder: &str| {
        ALGORITHMS
            .iter()
            .find(|(name, ..)| format!("{folder}{name}.lua") == path)
    };
    if let Some(algorithm) = algorithm("") {
        return one_algorithm(text, path, algorithm, "limits/single.lua", "");
    }
    if let Some(algorithm) = algorithm("batch/") {
        // The decision runs inside batch.lua's function: its code is indented one level.
        return one_algorithm(text, path, algorithm, "limits/batch.lua", "    ");
    }
    if path == "limits.lua" {
        let mut algorithms: Vec<String> = SHARED.iter().map(|(shared, _)| shared_part(text, shared)).collect();
        for (algorithm, _, _) in ALGORITHMS {
            let parts = Parts::of(text, algorithm);
            let entry = splice(part(text, "limits/entry.lua"), "--@decision", parts.decision);
            let entry = splice(&entry, "--@grant", parts.grant).replace("__ALGORITHM__", algorithm);
            algorithms.extend([parts.helpers.to_owned(), entry]);
        }
        let driver = splice(part(text, "limits/driver.lua"), "--@algorithms", &algorithms.join("\n"));
        return whole(text, path, &[part(text, "limits/prelude.lua"), &driver]);
    }
    if path == "inspect.lua" {
        return whole(
            text,
            path,
            &[part(text, "limits/zset_member.lua"), part(text, "limits/inspect.lua")],
        );
    }
    unreachable!("no script of the family lua/{path}")
}

/// One algorithm's script: `frame` (`single.lua`, or `batch.lua` for several decisions in one call) with the
/// request's reading, the algorithm's helpers and its file cut at its markers spliced in; the code that runs per
/// decision indented by `indent`.
fn one_algorithm(text: Text, path: &str, algorithm: &(&str, Option<&str>, bool), frame: &str, indent: &str) -> String {
    let &(algorithm, shared, rate) = algorithm;
    let parts = Parts::of(text, algorithm);
    let helpers = match shared {
        Some(shared) => format!("{}\n{}", shared_part(text, shared), parts.helpers),
        None => parts.helpers.to_owned(),
    };
    let request = request_reading(text, rate);
    // A log replies with numbers; an algorithm that keeps a string, with what it read (see single.lua).
    let (denied, granted) = match shared {
        Some("zset_log") => (LOG_DENIED, LOG_GRANTED),
        _ => (STRING_DENIED, STRING_GRANTED),
    };
    let indented = |code: &str| indented(code, indent);
    let body = splice(part(text, frame), "--@request", &indented(&request));
    let body = splice(&body, "--@denied", &indented(denied));
    let body = splice(&body, "--@granted", &indented(granted));
    let body = splice(&body, "--@helpers", &helpers);
    let body = splice(&body, "--@decision", &indented(parts.decision));
    let body = splice(&body, "--@grant", &indented(parts.grant));
    // No algorithm calls anything of common.lua, and every function it defines would be a closure made on every call.
    compose_whole(text, path, false, &[part(text, "limits/prelude.lua"), &body])
}

/// How a script reads and checks its request, `ARGV[1]` (see `parts/limits/request.lua`), with a rate or without.
fn request_reading(text: Text, rate: bool) -> String {
    let reading = if rate { REQUEST_WITH_RATE } else { REQUEST_WITHOUT_RATE };
    format!("{reading}\n{}", part(text, "limits/request.lua"))
}

/// The text of the script `lua/<path>` that reserves permits (one of those `mod.rs` declares): `common.lua` (the
/// clock), the family's prelude, the log's helpers for a log, the arguments every reserve script reads alike, then
/// its own file, which reads its request as the algorithm's single-limit script does (spliced at its `--@request`)
/// and decides it with that script's code (the algorithm's `--@decision` section, spliced at its own).
pub(super) fn reserve(text: Text, path: &str) -> String {
    let &(algorithm, shared, rate) = ALGORITHMS
        .iter()
        .find(|(name, ..)| format!("reserve/{name}.lua") == path)
        .unwrap_or_else(|| unreachable!("no reserve script lua/{path}"));
    let parts = Parts::of(text, algorithm);
    // The algorithms that keep a log (concurrency, sliding log) share one reserve file: it calls the log's helpers.
    let own = match shared {
        Some("zset_log") => "reserve/log.lua",
        _ => path,
    };
    let file = splice(part(text, own), "--@request", &request_reading(text, rate)).replace("__ALGORITHM__", algorithm);
    let file = splice(&file, "--@decision", parts.decision);
    // A log's reserve script also logs a granted request with the algorithm's grant, inside an `if`; the others
    // write the request's permits and the block's in one write of their own.
    let file = if file.contains("\n--@grant\n") {
        splice(&file, "--@grant", &indented(parts.grant, "    "))
    } else {
        file
    };
    let log = (shared == Some("zset_log")).then(|| shared_part(text, "zset_log"));
    let mut pieces = vec![part(text, "limits/prelude.lua")];
    pieces.extend(log.as_deref());
    pieces.extend([part(text, "reserve/arguments.lua"), &file]);
    whole(text, path, &pieces)
}

/// The text of the Redisson-layout script `lua/<path>` (one of those `mod.rs` declares).
pub(super) fn redisson(text: Text, path: &str) -> String {
    let (script, pieces) = REDISSON
        .iter()
        .find(|(script, _)| format!("redisson/{script}.lua") == path)
        .unwrap_or_else(|| unreachable!("no script lua/{path}"));
    let mut texts = vec![redisson_part(text, "redisson/prelude.lua")];
    texts.extend(
        pieces
            .iter()
            .map(|piece| redisson_part(text, &format!("redisson/{piece}.lua"))),
    );
    texts.push(redisson_part(text, &format!("redisson/{script}.lua")));
    whole(text, path, &texts)
}

/// A whole script: a header naming it generated, `parts/common.lua`, then `pieces`.
fn whole(text: Text, path: &str, pieces: &[&str]) -> String {
    compose_whole(text, path, true, pieces)
}

/// A whole script: a header naming it generated, `parts/common.lua` when `common`, then `pieces`. The readable file
/// keeps a blank line between pieces; the compact one has none (a piece without code, or an algorithm without
/// helpers, would leave one).
fn compose_whole(text: Text, path: &str, common: bool, pieces: &[&str]) -> String {
    let mut script = match text {
        Text::Compact => {
            format!("-- GENERATED, what edgelimit sends to Redis: lua/{path} without its comments (run scripts/lua).\n")
        }
        #[cfg(test)]
        Text::Commented => format!(
            "-- lua/{path}: GENERATED from lua/parts/ (src/lua/compose.rs). Edit the parts, then run scripts/lua.\n\n"
        ),
    };
    for (i, piece) in common
        .then(|| part(text, "common.lua"))
        .into_iter()
        .chain(pieces.iter().copied())
        .enumerate()
    {
        if i > 0 {
            script.push('\n');
        }
        script.push_str(piece);
    }
    if text == Text::Compact {
        script = script
            .lines()
            .filter(|line| !line.is_empty())
            .map(|line| format!("{line}\n"))
            .collect();
    }
    script
}

/// An algorithm file cut at its marker lines: helpers, `--@decision`, `--@grant`.
struct Parts {
    helpers: &'static str,
    decision: &'static str,
    grant: &'static str,
}

impl Parts {
    fn of(text: Text, algorithm: &str) -> Parts {
        // Without its comments, an algorithm without helpers starts at its marker.
        let file = part(text, &format!("limits/{algorithm}.lua"));
        let (helpers, rest) = match file.strip_prefix("--@decision\n") {
            Some(rest) => ("", rest),
            None => file
                .split_once("\n--@decision\n")
                .expect("an algorithm file has a --@decision line"),
        };
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

/// `code` with `indent` before each of its lines but the empty ones.
fn indented(code: &str, indent: &str) -> String {
    (code.lines())
        .map(|line| {
            if line.is_empty() {
                String::new()
            } else {
                format!("{indent}{line}")
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
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

    /// The folder under `lua/` of each text.
    const FOLDERS: [(Text, &str); 2] = [(Text::Commented, ""), (Text::Compact, "compact/")];

    #[test]
    fn every_lua_file_is_what_its_parts_compose() {
        let write = std::env::var_os("EDGELIMIT_WRITE_LUA").is_some();
        let mut stale = Vec::new();
        let lua = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("lua");
        for (text, folder) in FOLDERS {
            for (path, compose) in FILES {
                let script = compose(text, path);
                assert!(
                    !script.lines().any(|line| line.trim_start().starts_with("--@")),
                    "{folder}{path}: a marker was left"
                );
                let file = lua.join(format!("{folder}{path}"));
                if write {
                    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
                    std::fs::write(&file, &script).unwrap();
                } else if std::fs::read_to_string(&file).ok().as_deref() != Some(script.as_str()) {
                    stale.push(format!("{folder}{path}"));
                }
            }
        }
        assert!(
            stale.is_empty(),
            "lua/{stale:?} differ from their parts: run scripts/lua"
        );
        // And no script under lua/ is left out of the list (a new one: create it empty, declare it in mod.rs's
        // `scripts!`, run scripts/lua).
        for (_, folder) in FOLDERS {
            let mut on_disk = Vec::new();
            for dir in ["", "batch/", "redisson/", "reserve/"] {
                for entry in std::fs::read_dir(lua.join(format!("{folder}{dir}"))).unwrap() {
                    let name = entry.unwrap().file_name().to_string_lossy().into_owned();
                    if name.ends_with(".lua") {
                        on_disk.push(format!("{dir}{name}"));
                    }
                }
            }
            on_disk.sort();
            let mut listed: Vec<String> = FILES.iter().map(|(path, _)| (*path).to_owned()).collect();
            listed.sort();
            assert_eq!(
                on_disk, listed,
                "the scripts under lua/{folder} and those mod.rs declares"
            );
        }
    }

    /// A compact script is its readable file's code, line for line: nothing but comments and blank lines went.
    #[test]
    fn a_compact_script_is_its_readable_file_without_comments() {
        for (path, compose) in FILES {
            let code = |script: String| -> Vec<String> {
                script
                    .lines()
                    .filter(|line| {
                        let line = line.trim_start();
                        !line.is_empty() && (!line.starts_with("--") || line.starts_with("-- luacheck:"))
                    })
                    .map(str::to_owned)
                    .collect()
            };
            assert_eq!(
                code(compose(Text::Compact, path)),
                code(compose(Text::Commented, path)),
                "lua/compact/{path}"
            );
        }
    }

    #[test]
    fn the_driver_holds_every_algorithm_once_and_shared_helpers_once() {
        let driver = family(Text::Commented, "limits.lua");
        for (algorithm, _, _) in ALGORITHMS {
            assert_eq!(driver.matches(&format!("ALGORITHMS.{algorithm} = function")).count(), 1);
        }
        for (shared, _) in SHARED {
            assert_eq!(driver.matches(&shared_part(Text::Commented, shared)).count(), 1);
        }
    }
}
