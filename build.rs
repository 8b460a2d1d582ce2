//! Builds the scripts Redis runs from the readable sources under `lua/` (see `lua/README.md`).
//!
//! Each script is written to `OUT_DIR/scripts/<name>.lua` with its SHA1 in `OUT_DIR/scripts.rs` (`sha1_of!`), and
//! `src/lua` includes both. Comment lines and blank lines are dropped: Redis gains nothing from them. Nothing built
//! here is committed; `lua/SHA1SUMS` pins each script's hash (a test checks it), so a change shows in review.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::{env, fs};

/// An algorithm by file name, with the helpers it shares with others and whether its quota has a rate.
type Algorithm = (&'static str, Option<&'static str>, bool);

const ALGORITHMS: [Algorithm; 6] = [
    ("token_bucket", Some("bucket"), true),
    ("fixed_window", None, false),
    ("sliding_window", None, false),
    ("gcra", Some("bucket"), true),
    ("concurrency", Some("zset_log"), false),
    ("sliding_log", Some("zset_log"), false),
];

/// What the shared helpers are made of: the units arithmetic, or a log's layout and then its writing.
const SHARED: [(&str, &[&str]); 2] = [("bucket", &["bucket"]), ("zset_log", &["zset_member", "zset_log"])];

/// The algorithms that reserve permits for a client to grant locally.
const RESERVING: [&str; 4] = ["gcra", "fixed_window", "sliding_log", "concurrency"];

/// Redisson's scripts, each with the pieces it needs after the prelude (every function costs a closure per call).
const REDISSON: [(&str, &[&str]); 5] = [
    ("acquire", &["log", "window", "grants"]),
    ("available", &["log", "window"]),
    ("release", &["log", "window", "grants"]),
    ("set_rate", &["log"]),
    ("lifetime", &[]),
];

/// How a single-limit script reads its request, with a rate or without: one match checks every field's digits.
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

fn main() {
    let lua = Path::new("lua");
    println!("cargo:rerun-if-changed=lua");
    let sources = Sources::read(lua);
    let out = Path::new(&env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("scripts");
    let mut arms = String::new();
    for (name, text) in scripts(&sources) {
        let text = format!("-- edgelimit script {name}: built from lua/ (lua/README.md)\n{text}");
        let text: String = text.lines().filter(|line| !line.is_empty()).map(|l| format!("{l}\n")).collect();
        assert!(!text.contains("--@"), "{name}: a marker was left");
        let path = out.join(format!("{name}.lua"));
        fs::create_dir_all(path.parent().expect("a folder")).expect("creating OUT_DIR/scripts");
        fs::write(&path, &text).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        let sha1 = sha1_smol::Sha1::from(&text).digest();
        writeln!(arms, "    (\"{name}\") => {{ \"{sha1}\" }};").expect("a String");
    }
    let rust = format!("/// The SHA1 of the script `<name>` (build.rs).\nmacro_rules! sha1_of {{\n{arms}}}\n");
    fs::write(out.with_file_name("scripts.rs"), rust).expect("writing OUT_DIR/scripts.rs");
}

/// Every script by name, composed from the sources.
fn scripts(sources: &Sources) -> Vec<(String, String)> {
    let mut scripts = Vec::new();
    for algorithm in &ALGORITHMS {
        let single = one_algorithm(sources, algorithm, "limits/single.lua", "");
        // The decision runs inside batch.lua's function: its code is indented one level.
        let batch = one_algorithm(sources, algorithm, "limits/batch.lua", "    ");
        scripts.extend([(algorithm.0.to_owned(), single), (format!("batch/{}", algorithm.0), batch)]);
    }
    scripts.push(("limits".to_owned(), driver(sources)));
    let inspect = [sources.get("limits/zset_member.lua"), sources.get("limits/inspect.lua")];
    scripts.push(("inspect".to_owned(), whole(sources, true, &inspect)));
    for algorithm in ALGORITHMS.iter().filter(|(name, ..)| RESERVING.contains(name)) {
        scripts.push((format!("reserve/{}", algorithm.0), reserve(sources, algorithm)));
    }
    for (script, pieces) in REDISSON {
        let mut texts = vec![sources.get("redisson/prelude.lua")];
        texts.extend(pieces.iter().map(|piece| sources.get(&format!("redisson/{piece}.lua"))));
        texts.push(sources.get(&format!("redisson/{script}.lua")));
        scripts.push((format!("redisson/{script}"), whole(sources, true, &texts)));
    }
    scripts
}

/// One algorithm's script: `frame` (one decision, or several in one call) with the request's reading, the
/// algorithm's helpers and its sections spliced in; the per-decision code indented by `indent`.
fn one_algorithm(sources: &Sources, &(name, shared, rate): &Algorithm, frame: &str, indent: &str) -> String {
    let (helpers, decision, grant) = parts(sources, name);
    let helpers = match shared {
        Some(shared) => format!("{}\n{helpers}", shared_part(sources, shared)),
        None => helpers.to_owned(),
    };
    let indented = |code: &str| indented(code, indent);
    let body = splice(sources.get(frame), "--@request", &indented(&request_reading(sources, rate)));
    let body = splice(&body, "--@helpers", &helpers);
    let body = splice(&body, "--@decision", &indented(decision));
    let body = splice(&body, "--@grant", &indented(grant));
    // No algorithm calls anything of common.lua, whose every function would be a closure made on every call.
    whole(sources, false, &[sources.get("limits/prelude.lua"), &body])
}

/// Every algorithm behind the driver, each wrapped in a function by `limits/entry.lua`.
fn driver(sources: &Sources) -> String {
    let mut algorithms: Vec<String> = SHARED.iter().map(|(shared, _)| shared_part(sources, shared)).collect();
    for (name, _, _) in ALGORITHMS {
        let (helpers, decision, grant) = parts(sources, name);
        let entry = splice(sources.get("limits/entry.lua"), "--@decision", decision);
        let entry = splice(&entry, "--@grant", grant).replace("__ALGORITHM__", name);
        algorithms.extend([helpers.to_owned(), entry]);
    }
    let driver = splice(sources.get("limits/driver.lua"), "--@algorithms", &algorithms.join("\n"));
    whole(sources, true, &[sources.get("limits/prelude.lua"), &driver])
}

/// A script that decides one request with the algorithm's `--@decision` section and reserves permits.
fn reserve(sources: &Sources, &(name, shared, rate): &Algorithm) -> String {
    let (_, decision, grant) = parts(sources, name);
    // The algorithms that keep a log share one reserve file.
    let log = shared == Some("zset_log");
    let own = format!("reserve/{}.lua", if log { "log" } else { name });
    let file = splice(sources.get(&own), "--@request", &request_reading(sources, rate)).replace("__ALGORITHM__", name);
    let mut file = splice(&file, "--@decision", decision);
    if file.contains("\n--@grant\n") {
        file = splice(&file, "--@grant", &indented(grant, "    "));
    }
    let log_helpers = log.then(|| shared_part(sources, "zset_log"));
    let mut pieces = vec![sources.get("limits/prelude.lua")];
    pieces.extend(log_helpers.as_deref());
    pieces.extend([sources.get("reserve/arguments.lua"), &file]);
    whole(sources, true, &pieces)
}

/// How a script reads and checks its request, `ARGV[1]`, with a rate or without.
fn request_reading(sources: &Sources, rate: bool) -> String {
    let reading = if rate { REQUEST_WITH_RATE } else { REQUEST_WITHOUT_RATE };
    format!("{reading}\n{}", sources.get("limits/request.lua"))
}

/// The text of the shared helpers named `shared`.
fn shared_part(sources: &Sources, shared: &str) -> String {
    let (_, pieces) = SHARED.iter().find(|(name, _)| *name == shared).expect("a shared part");
    let texts: Vec<&str> = pieces.iter().map(|piece| sources.get(&format!("limits/{piece}.lua"))).collect();
    texts.join("\n")
}

/// A whole script: `common.lua` when `common`, then `pieces`.
fn whole(sources: &Sources, common: bool, pieces: &[&str]) -> String {
    let common = common.then(|| sources.get("common.lua"));
    let all: Vec<&str> = common.into_iter().chain(pieces.iter().copied()).collect();
    all.join("\n")
}

/// An algorithm file cut at its marker lines: helpers, `--@decision`, `--@grant`.
fn parts<'a>(sources: &'a Sources, algorithm: &str) -> (&'a str, &'a str, &'a str) {
    let file = sources.get(&format!("limits/{algorithm}.lua"));
    let (helpers, rest) = match file.strip_prefix("--@decision\n") {
        Some(rest) => ("", rest),
        None => file.split_once("\n--@decision\n").expect("an algorithm file has a --@decision line"),
    };
    let (decision, grant) = rest.split_once("\n--@grant\n").expect("a --@grant line after --@decision");
    (helpers, decision, grant)
}

/// The source pieces under `lua/` by path, without comment lines and with their `--@inline` pieces spliced in.
struct Sources(BTreeMap<String, String>);

impl Sources {
    fn read(lua: &Path) -> Self {
        let mut raw = BTreeMap::new();
        read_dir(lua, "", &mut raw);
        let pieces = raw.iter().map(|(path, text)| (path.clone(), inlined(&raw, &without_comments(text)))).collect();
        Sources(pieces)
    }

    fn get(&self, path: &str) -> &str {
        self.0.get(path).unwrap_or_else(|| panic!("no source lua/{path}"))
    }
}

/// Every `.lua` file under `dir` by its path below `lua/`.
fn read_dir(dir: &Path, prefix: &str, into: &mut BTreeMap<String, String>) {
    for entry in fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display())) {
        let path = entry.expect("a directory entry").path();
        let name = path.file_name().expect("a file name").to_string_lossy().into_owned();
        if path.is_dir() {
            read_dir(&path, &format!("{prefix}{name}/"), into);
        } else if name.ends_with(".lua") {
            let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
            // A line starting with `--` inside a long string could be text, not a comment.
            assert!(!text.contains("[["), "{}: no long strings or comments ([[) in lua/", path.display());
            into.insert(format!("{prefix}{name}"), text);
        }
    }
}

/// `text` without its blank and comment-only lines, but for markers and luacheck directives.
fn without_comments(text: &str) -> String {
    let keep = |line: &&str| {
        let code = line.trim_start();
        !code.is_empty() && (!code.starts_with("--") || code.starts_with("--@") || code.starts_with("-- luacheck:"))
    };
    text.lines().filter(keep).map(|line| format!("{line}\n")).collect()
}

/// `text` with each line `--@inline <piece>` replaced by that piece, indented as the line.
fn inlined(raw: &BTreeMap<String, String>, text: &str) -> String {
    let mut whole = String::with_capacity(text.len());
    for line in text.lines() {
        let code = line.trim_start();
        match code.strip_prefix("--@inline ") {
            Some(piece) => {
                let piece = raw.get(piece).unwrap_or_else(|| panic!("no source lua/{piece} to inline"));
                let indent = &line[..line.len() - code.len()];
                for piece_line in without_comments(piece).lines() {
                    assert!(
                        !piece_line.trim_start().starts_with("--@"),
                        "lua/{piece}: an inlined piece has no markers"
                    );
                    writeln!(whole, "{indent}{piece_line}").expect("a String");
                }
            }
            None => writeln!(whole, "{line}").expect("a String"),
        }
    }
    whole
}

/// `code` with `indent` before each of its non-empty lines.
fn indented(code: &str, indent: &str) -> String {
    let line = |line: &str| {
        if line.is_empty() {
            String::new()
        } else {
            format!("{indent}{line}")
        }
    };
    code.lines().map(line).collect::<Vec<_>>().join("\n")
}

/// `frame` with its one line `marker` replaced by `text`.
fn splice(frame: &str, marker: &str, text: &str) -> String {
    let line = format!("\n{marker}\n");
    assert_eq!(frame.matches(&line).count(), 1, "one {marker} line in the frame");
    frame.replacen(&line, &format!("\n{text}\n"), 1)
}
