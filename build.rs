//! Writes the Lua pieces under `lua/parts/` without their comment lines into `OUT_DIR/lua-parts/`, which is what the
//! crate carries and composes its scripts from (`src/lua/compose.rs`); and as written, comments and all, into
//! `OUT_DIR/lua-parts-readable/`, which only the tests link (they compose the readable files under `lua/`).
//!
//! Why: the comments are two thirds of the pieces' text (53 KB of 78 KB, 15.4 KB gzipped against 5.7 KB without),
//! and every Worker downloads the wasm that holds them. Redis gains nothing from them either: it compiles a script
//! once and keeps it by its SHA1. The scripts Redis runs are committed as `lua/compact/`, each beside the commented
//! `lua/<script>` it is made from; a test checks both.
//!
//! What goes: every line that is blank or holds only a comment. What stays: code with its indentation, the marker
//! lines that `compose.rs` splices at (`--@…`), and `-- luacheck:` directives, so that the compact files lint alike.
//! In both, a line `--@inline <piece>` becomes that piece (under `lua/parts/`, in the same form), indented as the
//! line: code several places of one script run, carried once in the source and spliced here rather than at run time
//! in the wasm.
//! No piece has a long string or long comment (`[[`), where a line starting with `--` could be text or code: the
//! build refuses one, rather than strip what might not be a comment.
//!
//! It also writes `OUT_DIR/script_sha1s.rs`: the SHA1 of every script Redis runs (`lua/compact/<file>`), as the
//! macro `sha1_of!("<file>")`, so that a decision's `EVALSHA` names its script without composing the text and hashing
//! it first. Why: on wasm, V8 compiles each function on its first call, so a Worker's first decision (its cold start)
//! also compiled and ran the composer and SHA-1 on the slowest, unoptimised code; the text is composed only when
//! Redis answers `NOSCRIPT`. A test checks that each SHA1 is the composed text's (`src/lua/mod.rs`), and so do
//! `scripts/build-wasm` (that test, before building) and `edgelimit dev` (`SCRIPT LOAD`'s answer): after a piece under
//! `lua/parts/` is edited, run `scripts/lua` before building.

use std::path::Path;
use std::{env, fs};

fn main() {
    let parts = Path::new("lua/parts");
    println!("cargo:rerun-if-changed={}", parts.display());
    let out = Path::new(&env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).to_owned();
    write_pieces(parts, parts, &out.join("lua-parts"), without_comments);
    write_pieces(parts, parts, &out.join("lua-parts-readable"), str::to_owned);
    let compact = Path::new("lua/compact");
    println!("cargo:rerun-if-changed={}", compact.display());
    let mut arms = String::new();
    script_sha1_arms(compact, "", &mut arms);
    let macro_text =
        format!("/// The SHA1 of `lua/compact/<file>` (written by build.rs).\nmacro_rules! sha1_of {{\n{arms}}}\n");
    let target = out.join("script_sha1s.rs");
    fs::write(&target, macro_text).unwrap_or_else(|e| panic!("writing {}: {e}", target.display()));
}

/// A `sha1_of!` arm for every `.lua` file under `dir` (`lua/compact/`, at `prefix` below it), depth first.
fn script_sha1_arms(dir: &Path, prefix: &str, arms: &mut String) {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().expect("a file name").to_string_lossy().into_owned();
        println!("cargo:rerun-if-changed={}", path.display());
        if path.is_dir() {
            script_sha1_arms(&path, &format!("{prefix}{name}/"), arms);
        } else if name.ends_with(".lua") {
            let text = fs::read(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
            let sha1 = sha1_smol::Sha1::from(text).digest();
            arms.push_str(&format!("    (\"{prefix}{name}\") => {{ \"{sha1}\" }};\n"));
        }
    }
}

/// Every `.lua` file under `from` in the form `form` gives it, at the same path under `to`; `--@inline` pieces are
/// read from `parts`, in the same form.
fn write_pieces(parts: &Path, from: &Path, to: &Path, form: fn(&str) -> String) {
    fs::create_dir_all(to).unwrap_or_else(|e| panic!("creating {}: {e}", to.display()));
    for entry in fs::read_dir(from).unwrap_or_else(|e| panic!("reading {}: {e}", from.display())) {
        let path = entry.expect("a directory entry").path();
        let target = to.join(path.file_name().expect("a file name"));
        println!("cargo:rerun-if-changed={}", path.display());
        if path.is_dir() {
            write_pieces(parts, &path, &target, form);
        } else if path.extension().is_some_and(|extension| extension == "lua") {
            let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
            assert!(
                !text.contains("[["),
                "{}: a long string or comment ([[) cannot be told from code line by line; see build.rs",
                path.display()
            );
            let piece = inlined(parts, &form(&text), form);
            fs::write(&target, piece).unwrap_or_else(|e| panic!("writing {}: {e}", target.display()));
        }
    }
}

/// `text` without its blank lines and comment-only lines, but for markers and luacheck directives.
fn without_comments(text: &str) -> String {
    let mut compact = String::with_capacity(text.len() / 2);
    for line in text.lines() {
        let code = line.trim_start();
        let comment_only = code.starts_with("--") && !code.starts_with("--@") && !code.starts_with("-- luacheck:");
        if !code.is_empty() && !comment_only {
            compact.push_str(line);
            compact.push('\n');
        }
    }
    compact
}

/// `text` with each line `--@inline <piece>` replaced by that piece under `parts`, in the form `form` gives it,
/// indented as the line (but its empty lines).
fn inlined(parts: &Path, text: &str, form: fn(&str) -> String) -> String {
    let mut whole = String::with_capacity(text.len());
    for line in text.lines() {
        let code = line.trim_start();
        match code.strip_prefix("--@inline ") {
            Some(piece) => {
                let path = parts.join(piece);
                let piece =
                    form(&fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display())));
                assert!(
                    !piece.lines().any(|line| line.trim_start().starts_with("--@")),
                    "{}: an inlined piece has no markers",
                    path.display()
                );
                for piece_line in piece.lines() {
                    if !piece_line.is_empty() {
                        whole.push_str(&line[..line.len() - code.len()]);
                    }
                    whole.push_str(piece_line);
                    whole.push('\n');
                }
            }
            None => {
                whole.push_str(line);
                whole.push('\n');
            }
        }
    }
    whole
}
