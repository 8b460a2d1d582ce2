//! `edgelimit rules check`: wrangler.toml's rules checked offline, with the Worker's own messages.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Runs `edgelimit rules check` on `path`: (exit code, stdout, stderr), the file's name left out.
fn run(path: &Path) -> (i32, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_edgelimit")).arg("rules").arg("check").arg(path).output().unwrap();
    let file = format!("{}: ", path.display());
    let text = |bytes: Vec<u8>| {
        let text = String::from_utf8(bytes).unwrap();
        text.strip_prefix(&file).unwrap_or(&text).trim_end().to_owned()
    };
    (output.status.code().unwrap(), text(output.stdout), text(output.stderr))
}

/// Runs `edgelimit rules check` on a file holding `toml`.
fn check(toml: &str) -> (i32, String, String) {
    static FILES: AtomicUsize = AtomicUsize::new(0);
    let n = FILES.fetch_add(1, Ordering::Relaxed);
    let path = std::env::temp_dir().join(format!("edgelimit-rules-{}-{n}.toml", std::process::id()));
    std::fs::write(&path, toml).unwrap();
    let outcome = run(&path);
    let _ = std::fs::remove_file(&path);
    outcome
}

/// A wrangler.toml whose RULES is `rules` (a TOML value).
fn with_rules(rules: &str) -> String {
    format!("[vars]\nORIGIN = \"https://origin.example.com\"\nRULES = {rules}\n")
}

#[test]
fn the_shipped_wrangler_toml_passes() {
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("../wrangler.toml");
    assert_eq!(run(&shipped), (0, "3 rules ok (login, api, site)".into(), String::new()));
}

#[test]
fn a_broken_rule_gets_the_message_the_worker_starts_with() {
    let refused = |toml: &str| {
        let (code, stdout, stderr) = check(toml);
        assert_eq!((code, stdout.as_str()), (1, ""), "{stderr}");
        stderr
    };
    // What tests/js/worker.test.mjs expects the Worker to say, for the same mistakes.
    let worker_says = [
        r#"RULES[0].limits[0].interval must be a duration with a unit, like "10 s" or "250ms", got the number 10"#,
        r#"RULES[0] has an unknown field "dryrun""#,
    ];
    let interval = refused(&with_rules(
        r#"'[{"name": "a", "limits": [{"algorithm": "slidingLog", "limit": 5, "interval": 10}]}]'"#,
    ));
    assert_eq!(interval, format!("invalid configuration: {}", worker_says[0]));
    // RULES as a TOML array, as wrangler hands it to the Worker.
    let dry_run = refused(&with_rules(
        r#"[{ name = "a", dryrun = true, limits = [{ algorithm = "slidingLog", limit = 5, interval = "10 s" }] }]"#,
    ));
    assert!(dry_run.starts_with(&format!("invalid configuration: {}; the fields are name, match", worker_says[1])));
    let cases = [
        (
            r#"'[{"name": "a", "limits": [{"algorithm": "gcra", "limit": 4294967296, "interval": "1 s"}]}]'"#,
            "RULES[0].limits[0].limit must be a whole number from 1 to 4294967295, got the number 4294967296",
        ),
        (
            r#"[{ name = "a", limits = { algorithm = "gcra", limit = -1, interval = "1 s" } }]"#,
            "RULES[0].limits.limit must be a whole number from 1 to 4294967295, got the number -1",
        ),
        (
            r#"'[{"name": "a", "limits": [{"algorithm": "gcra", "limit": 2.5, "interval": "1 s"}]}]'"#,
            "RULES[0].limits[0].limit must be a whole number from 1 to 4294967295, got the number 2.5",
        ),
        (r#"'[{"name": ["a"], "limits": []}]'"#, "RULES[0].name must be a string, got object"),
        (
            r#"'[{"name": "a\u0000", "limits": [{"algorithm": "gcra", "limit": 1, "interval": "1 s"}]}]'"#,
            r#"rule "a\0": a rule name is letters, digits, '-', '_' and '.'"#,
        ),
        (
            r#"'[{"name": "\ud800", "limits": []}]'"#,
            "RULES is not valid JSON: unexpected end of hex escape at line 1 column 18",
        ),
        (
            r#"'{"name": "a"}'"#,
            "RULES must be a JSON array of rules, like [{\"name\": \"site\", \"limits\": \
          [{\"algorithm\": \"slidingLog\", \"limit\": 5, \"interval\": \"10 s\"}]}]",
        ),
        (
            "'[]'",
            "RULES is empty: every request would reach the origin unlimited; give at least one rule (a rule \
          with \"dryRun\": true limits nothing but counts)",
        ),
    ];
    for (rules, message) in cases {
        assert_eq!(refused(&with_rules(rules)), format!("invalid configuration: {message}"));
    }
    let layout = "[vars]\nEDGELIMIT_LAYOUT = \"cluster\"\nRULES = '[{\"name\": \"a\", \"limits\": [{\"algorithm\": \
                  \"gcra\", \"limit\": 1, \"interval\": \"1 s\"}]}]'\n";
    assert!(refused(layout).starts_with("invalid configuration: EDGELIMIT_LAYOUT: layout must be \"per-limiter\""));
    assert_eq!(refused(""), "invalid configuration: RULES is not set: add the rules to wrangler.toml [vars]");
}

#[test]
fn a_file_that_is_not_toml_or_not_there_exits_2() {
    let (code, _, stderr) = check("[vars\n");
    assert_eq!(code, 2);
    assert!(stderr.contains("is not valid TOML: TOML parse error at line 1, column 6"), "{stderr}");
    let (code, _, stderr) = run(Path::new("/nonexistent/wrangler.toml"));
    assert_eq!(code, 2);
    assert!(stderr.starts_with("cannot read /nonexistent/wrangler.toml: "), "{stderr}");
}
