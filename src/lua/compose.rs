//! How the files under `lua/` are made from the pieces under `lua/parts/`, and the test that keeps them so.
//!
//! Run `scripts/lua` after editing a piece: it runs this test with `EDGELIMIT_WRITE_LUA=1`, which writes the files
//! instead of comparing them. Composition is text only (whole files joined, marker lines replaced), so it lives in a
//! test: the library just includes the finished files.
//!
//! - Every script starts with `parts/common.lua` (argument checks and the clock).
//! - One limit of an algorithm (`lua/<algorithm>.lua`): `parts/limits/prelude.lua`, then `parts/limits/single.lua`
//!   with the algorithm's file cut at its markers and spliced in, so its code runs straight through. Before the
//!   algorithm's own helpers come the helpers it shares with others, and only those: every function a script
//!   defines costs Redis a closure on every call.
//! - Every algorithm (`lua/limits.lua`): `parts/limits/driver.lua`, each algorithm wrapped in a function by
//!   `parts/limits/entry.lua`.
//! - `lua/inspect.lua`: the permit log's layout (`parts/limits/zset_member.lua`), then `parts/limits/inspect.lua`.
//! - `lua/redisson/<script>.lua`: `parts/redisson/prelude.lua`, the pieces it calls, then the script's own file.

use std::path::{Path, PathBuf};

/// The scripts' algorithms by file name, with the helpers each shares with others: the units arithmetic of token
/// bucket and GCRA, or the permit log of concurrency and the sliding log.
const ALGORITHMS: [(&str, Option<&str>); 6] = [
    ("token_bucket", Some("bucket")),
    ("fixed_window", None),
    ("sliding_window", None),
    ("gcra", Some("bucket")),
    ("concurrency", Some("zset_log")),
    ("sliding_log", Some("zset_log")),
];

/// What the shared helpers above are made of: the units arithmetic, or a log's layout and then its writing.
const SHARED: [(&str, &[&str]); 2] = [("bucket", &["bucket"]), ("zset_log", &["zset_member", "zset_log"])];

/// Redisson's scripts, each with the pieces it needs after the prelude: every function a script defines costs a
/// closure on every call, so none gets one it does not call.
const REDISSON: [(&str, &[&str]); 4] = [
    ("acquire", &["window", "grants"]),
    ("available", &["window"]),
    ("release", &["window", "grants"]),
    ("set_rate", &[]),
];

fn lua_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("lua")
}

/// The text of the shared helpers named `shared` (see [`SHARED`]).
fn shared_part(shared: &str) -> String {
    let (_, pieces) = SHARED.iter().find(|(name, _)| *name == shared).expect("a shared part");
    pieces
        .iter()
        .map(|piece| part(&format!("limits/{piece}.lua")))
        .collect::<Vec<_>>()
        .join("\n")
}

fn part(name: &str) -> String {
    let path = lua_dir().join("parts").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

/// Every file under `lua/` outside `parts/`, by its path there, with its text.
fn compose_all() -> Vec<(String, String)> {
    let mut files = Vec::new();
    for (algorithm, shared) in ALGORITHMS {
        let parts = Parts::of(algorithm);
        let helpers = match shared {
            Some(shared) => format!("{}\n{}", shared_part(shared), parts.helpers),
            None => parts.helpers.clone(),
        };
        let body = splice(&part("limits/single.lua"), "--@helpers", &helpers);
        let body = splice(&body, "--@decision", &parts.decision);
        let body = splice(&body, "--@grant", &parts.grant);
        files.push(whole(
            &format!("{algorithm}.lua"),
            &[&part("limits/prelude.lua"), &body],
        ));
    }

    let mut algorithms: Vec<String> = SHARED.iter().map(|(shared, _)| shared_part(shared)).collect();
    for (algorithm, _) in ALGORITHMS {
        let parts = Parts::of(algorithm);
        let entry = splice(&part("limits/entry.lua"), "--@decision", &parts.decision);
        let entry = splice(&entry, "--@grant", &parts.grant).replace("__ALGORITHM__", algorithm);
        algorithms.extend([parts.helpers, entry]);
    }
    let driver = splice(&part("limits/driver.lua"), "--@algorithms", &algorithms.join("\n"));
    files.push(whole("limits.lua", &[&part("limits/prelude.lua"), &driver]));

    files.push(whole(
        "inspect.lua",
        &[&part("limits/zset_member.lua"), &part("limits/inspect.lua")],
    ));
    for (script, pieces) in REDISSON {
        let mut texts = vec![part("redisson/prelude.lua")];
        texts.extend(pieces.iter().map(|piece| part(&format!("redisson/{piece}.lua"))));
        texts.push(part(&format!("redisson/{script}.lua")));
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        files.push(whole(&format!("redisson/{script}.lua"), &texts));
    }
    files
}

/// A whole script: a header naming it generated, `parts/common.lua`, then `pieces`.
fn whole(path: &str, pieces: &[&str]) -> (String, String) {
    let header = format!(
        "-- lua/{path}: GENERATED from lua/parts/ (src/lua/compose.rs). Edit the parts, then run scripts/lua.\n\n"
    );
    let mut text = header + &part("common.lua");
    for piece in pieces {
        text.push('\n');
        text.push_str(piece);
    }
    (path.to_owned(), text)
}

/// An algorithm file cut at its marker lines: helpers, `--@decision`, `--@grant`.
struct Parts {
    helpers: String,
    decision: String,
    grant: String,
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
            helpers: helpers.to_owned(),
            decision: decision.to_owned(),
            grant: grant.to_owned(),
        }
    }
}

/// `frame` with its one line `marker` replaced by `text`.
fn splice(frame: &str, marker: &str, text: &str) -> String {
    let line = format!("\n{marker}\n");
    assert_eq!(frame.matches(&line).count(), 1, "one {marker} line in the frame");
    frame.replacen(&line, &format!("\n{text}\n"), 1)
}

#[test]
fn every_lua_file_is_what_its_parts_compose() {
    let write = std::env::var_os("EDGELIMIT_WRITE_LUA").is_some();
    let mut stale = Vec::new();
    for (path, text) in compose_all() {
        assert!(!text.contains("\n--@"), "{path}: a marker was left");
        let file = lua_dir().join(&path);
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
}

#[test]
fn the_driver_holds_every_algorithm_once_and_shared_helpers_once() {
    let (_, driver) = compose_all()
        .into_iter()
        .find(|(path, _)| path == "limits.lua")
        .unwrap();
    for (algorithm, _) in ALGORITHMS {
        assert_eq!(driver.matches(&format!("ALGORITHMS.{algorithm} = function")).count(), 1);
    }
    for (shared, _) in SHARED {
        assert_eq!(driver.matches(&shared_part(shared)).count(), 1);
    }
}
