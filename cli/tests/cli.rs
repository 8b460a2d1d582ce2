//! The `edgelimit` binary end to end: `edgelimit dev` brings up a real redis-server and the bridge, and the limiter
//! commands run against it as an operator would run them.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value as Json;

const BIN: &str = env!("CARGO_BIN_EXE_edgelimit");

/// `edgelimit dev` on free ports; stopped with SIGTERM (graceful: it also stops its redis-server).
struct DevStack {
    child: Child,
    url: String,
}

impl DevStack {
    fn start() -> DevStack {
        let redis_port = edgelimit_cli::redis_server::free_port().unwrap();
        let mut child = Command::new(BIN)
            .args(["dev", "--listen", "127.0.0.1:0", "--redis-port", &redis_port.to_string(), "--token", "cli-token"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut url = None;
        for line in BufReader::new(child.stdout.take().unwrap()).lines() {
            let line = line.unwrap();
            if let Some(rest) = line.trim().strip_prefix("bridge") {
                url = rest.split_whitespace().next().map(str::to_owned);
            }
            if line.starts_with("Ctrl-C") {
                break;
            }
        }
        DevStack { child, url: url.expect("edgelimit dev printed the bridge URL") }
    }

    /// Runs `edgelimit ARGS` against this stack; returns (exit code, parsed stdout, stderr).
    fn run(&self, args: &[&str]) -> (i32, Json, String) {
        let output = Command::new(BIN)
            .args(args)
            .env("EDGELIMIT_URL", &self.url)
            .env("EDGELIMIT_TOKEN", "cli-token")
            .output()
            .unwrap();
        let stdout = String::from_utf8(output.stdout).unwrap();
        let json = serde_json::from_str(stdout.trim()).unwrap_or(Json::Null);
        (output.status.code().unwrap(), json, String::from_utf8(output.stderr).unwrap())
    }
}

impl Drop for DevStack {
    fn drop(&mut self) {
        let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
        let _ = self.child.wait();
    }
}

#[test]
fn five_per_second_grants_five_denies_the_sixth_then_grants_after_retry_after() {
    let stack = DevStack::start();
    let (code, out, _) = stack.run(&["set-rate", "api", "--rate", "5", "--interval", "1s"]);
    assert_eq!((code, out), (0, serde_json::json!({"name": "api", "applied": true})));
    let acquire = ["acquire", "api", "--algorithm", "redisson"];
    for remaining in (0..5).rev() {
        let (code, out, _) = stack.run(&acquire);
        assert_eq!(code, 0, "{out}");
        assert_eq!((out["success"].as_bool(), out["remaining"].as_u64()), (Some(true), Some(remaining)));
        assert_eq!(out["retryAfter"], 0);
    }
    let (code, denied, _) = stack.run(&acquire);
    assert_eq!(code, 1, "{denied}");
    assert_eq!(denied["success"], false);
    let retry_after = denied["retryAfter"].as_u64().unwrap();
    assert!((1..=1000).contains(&retry_after), "{denied}");
    assert!(denied["reset"].as_u64().unwrap() > 1_600_000_000_000, "reset is unix ms");

    std::thread::sleep(Duration::from_millis(retry_after));
    let (code, out, _) = stack.run(&acquire);
    assert_eq!(code, 0, "granted after waiting retryAfter: {out}");
}

#[test]
fn the_other_redisson_commands_report_as_json_and_errors_say_what_to_do() {
    let stack = DevStack::start();
    let (code, _, stderr) = stack.run(&["acquire", "nothing", "--algorithm", "redisson"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("has no rate") && stderr.contains("set-rate nothing"), "{stderr}");

    stack.run(&["set-rate", "ops", "--rate", "10", "--interval", "1m", "--keep-alive", "1h"]);
    let (code, out, _) = stack.run(&["set-rate", "ops", "--rate", "99", "--interval", "1s", "--if-absent"]);
    assert_eq!((code, out["applied"].as_bool()), (0, Some(false)));
    let redisson = ["--algorithm", "redisson"];
    let ops = |args: &[&str]| stack.run(&[&args[..2], &redisson, &args[2..]].concat());
    let (_, config, _) = ops(&["config", "ops"]);
    assert_eq!(config, serde_json::json!({"rate": 10, "intervalMs": 60000, "keepAliveMs": 3600000, "mode": "overall"}));

    assert_eq!(ops(&["acquire", "ops", "--permits", "4"]).0, 0);
    assert_eq!(ops(&["permits", "ops"]).1, serde_json::json!({"available": 6}));
    assert_eq!(ops(&["release", "ops", "3"]).1, serde_json::json!({"released": 3}));
    assert_eq!(ops(&["permits", "ops"]).1, serde_json::json!({"available": 9}));
    let (code, _, stderr) = ops(&["acquire", "ops", "--permits", "11"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("asked for 11 permits, but the limit is 10"), "{stderr}");
    let (code, _, stderr) = stack.run(&["set-rate", "ops", "--rate", "0", "--interval", "1s"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("at least 1 permit"), "{stderr}");
    let (code, _, stderr) = stack.run(&["set-rate", "ops", "--rate", "5", "--interval", "10"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("\"250ms\""), "{stderr}");

    assert_eq!(ops(&["delete", "ops"]).1, serde_json::json!({"deleted": true}));
    assert_eq!(ops(&["config", "ops"]).0, 1);
}

#[test]
fn a_missing_endpoint_or_a_wrong_token_is_a_clear_error() {
    let output = Command::new(BIN)
        .args(["permits", "api", "--algorithm", "redisson"])
        .env_remove("EDGELIMIT_URL")
        .env_remove("UPSTASH_REDIS_REST_URL")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("set EDGELIMIT_URL"));

    let stack = DevStack::start();
    let (code, _, stderr) =
        stack.run(&["permits", "api", "--algorithm", "gcra", "--limit", "1", "--interval", "1s", "--token", "wrong"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("rejected the token"), "{stderr}");
}

#[test]
fn every_algorithm_from_the_command_line_and_a_stored_quota_changed_at_runtime() {
    let stack = DevStack::start();
    for algorithm in ["sliding-log", "token-bucket", "fixed-window", "sliding-window", "gcra", "concurrency"] {
        let flags = ["--algorithm", algorithm, "--limit", "2", "--interval", "1m", "--id", "ip-1"];
        let acquire = [&["acquire", "cli"][..], &flags].concat();
        let (code, first, _) = stack.run(&acquire);
        assert_eq!((code, &first["remaining"]), (0, &Json::from(1)), "{algorithm}: {first}");
        assert_eq!(stack.run(&acquire).0, 0, "{algorithm}");
        let (code, denied, _) = stack.run(&acquire);
        assert_eq!(code, 1, "{algorithm}: {denied}");
        assert!(denied["retryAfter"].as_u64().unwrap() > 0, "{algorithm}: {denied}");
        let (_, peek, _) = stack.run(&[&["permits", "cli"][..], &flags].concat());
        assert_eq!(peek["available"], 0, "{algorithm}");
        let receipt = first["receipt"].as_str().unwrap();
        let release = [&["release", "cli"][..], &flags, &["--receipt", receipt]].concat();
        let (code, refunded, _) = stack.run(&release);
        assert_eq!((code, &refunded["released"]), (0, &Json::from(true)), "{algorithm}: {refunded}");
        assert_eq!(refunded["available"], 1, "{algorithm}: {refunded}");
        if algorithm == "concurrency" {
            assert_eq!(stack.run(&release).0, 1, "a lease is released once");
        }
        let (_, deleted, _) = stack.run(&[&["delete", "cli"][..], &flags].concat());
        assert_eq!(deleted["deleted"], true, "{algorithm}");
    }

    // An operator stores a quota; limiters reading it change at once.
    let stored = ["--algorithm", "stored", "--id", "key-9"];
    let (code, _, stderr) = stack.run(&[&["acquire", "api"][..], &stored].concat());
    assert_eq!(code, 2);
    assert!(stderr.contains("edgelimit configure api"), "{stderr}");
    let configure = ["configure", "api", "--algorithm", "fixed-window", "--limit", "1", "--interval", "1m"];
    let (code, out, _) = stack.run(&configure);
    assert_eq!((code, &out["stored"]["limit"]), (0, &Json::from(1)), "{out}");
    assert_eq!(stack.run(&[&["acquire", "api"][..], &stored].concat()).0, 0);
    assert_eq!(stack.run(&[&["acquire", "api"][..], &stored].concat()).0, 1);
    let raised = ["configure", "api", "--algorithm", "fixed-window", "--limit", "3", "--interval", "1m"];
    stack.run(&raised);
    assert_eq!(stack.run(&[&["acquire", "api"][..], &stored].concat()).0, 0, "the raised limit applies at once");
    let (code, config, _) = stack.run(&["config", "api", "--algorithm", "stored"]);
    assert_eq!((code, &config["limit"], &config["algorithm"]), (0, &Json::from(3), &Json::from("fixed-window")));
    assert_eq!(stack.run(&["configure", "api", "--remove"]).1["removed"], true);

    // Incomplete or invalid flags say what to write.
    let (code, _, stderr) = stack.run(&["acquire", "x", "--algorithm", "gcra", "--limit", "5"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("--interval"), "{stderr}");
    let (code, _, stderr) = stack.run(&["acquire", "x", "--algorithm", "leaky-bucket"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("token-bucket"), "{stderr}");
}

#[test]
fn sliding_log_on_the_command_line_is_npms_sliding_log_and_redisson_is_a_limiter_apart() {
    let stack = DevStack::start();
    let flags = ["--limit", "2", "--interval", "1m", "--id", "ip-1"];
    for spelling in ["sliding-log", "slidingLog"] {
        let (code, out, _) = stack.run(&[&["acquire", "shared", "--algorithm", spelling][..], &flags].concat());
        assert_eq!(code, 0, "{spelling}: {out}");
        assert!(out["receipt"].as_str().unwrap().contains('-'), "a logged grant's receipt: {out}");
    }
    let (code, _, _) = stack.run(&[&["acquire", "shared", "--algorithm", "sliding_log"][..], &flags].concat());
    assert_eq!(code, 1, "one limiter under the three spellings");

    // What npm's `{ ...Ratelimit.slidingLog(2, "1 m"), name: "shared" }` decides with: the core's family sliding log.
    let client = edgelimit::RestClient::new(&stack.url, "cli-token").unwrap();
    let quota = edgelimit::limit::Quota::sliding_log(2, Duration::from_secs(60)).unwrap();
    let npm = edgelimit::limit::Limiter::new(client.clone(), "shared", quota).unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let peek = runtime.block_on(npm.peek("ip-1", 1)).unwrap();
    assert_eq!((peek.success, peek.remaining), (false, 0), "{peek:?}");

    // The Redisson layout under the same name is another limiter, configured by set-rate.
    let (code, _, stderr) = stack.run(&["permits", "shared", "--algorithm", "redisson"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("has no rate"), "{stderr}");
    stack.run(&["set-rate", "shared", "--rate", "3", "--interval", "1m"]);
    let (_, out, _) = stack.run(&["permits", "shared", "--algorithm", "redisson"]);
    assert_eq!(out, serde_json::json!({"available": 3}));
    assert_eq!(runtime.block_on(npm.peek("ip-1", 1)).unwrap().remaining, 0);

    // --layout per-identifier acts on npm's `layout: "per-identifier"` keys: another state than the default's.
    let spread =
        [&["acquire", "shared", "--algorithm", "sliding-log", "--layout", "per-identifier"][..], &flags].concat();
    for expected in [0, 0, 1] {
        assert_eq!(stack.run(&spread).0, expected);
    }
    let npm = npm.with_layout(edgelimit::KeyLayout::PerIdentifier).unwrap();
    assert_eq!(runtime.block_on(npm.peek("ip-1", 1)).unwrap().remaining, 0);
}

#[test]
fn a_missing_algorithm_and_flags_the_chosen_limiter_would_ignore_are_refused_before_any_request() {
    // Nothing listens here: a request would fail as a transport error, not with these messages.
    let run = |args: &[&str]| {
        let output = Command::new(BIN)
            .args(args)
            .env("EDGELIMIT_URL", "http://127.0.0.1:1")
            .env("EDGELIMIT_TOKEN", "t")
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert!(output.stdout.is_empty(), "{args:?}");
        String::from_utf8(output.stderr).unwrap()
    };
    let gcra = ["--algorithm", "gcra", "--limit", "1", "--interval", "1s"];
    let cases: &[(&[&str], &str)] = &[
        (&["acquire", "api"], "name the limiter with --algorithm"),
        (&["delete", "api"], "or redisson (the Redisson-layout limiter"),
        (&["acquire", "api", "--algorithm", "sliding-log"], "is --algorithm redisson"),
        (&["permits", "api", "--algorithm", "redisson", "--limit", "5"], "do not apply to --algorithm redisson"),
        (&["acquire", "api", "--algorithm", "redisson", "--id", "ip"], "--id does not apply"),
        (
            &[&["acquire", "api", "--client-id", "c"][..], &gcra].concat(),
            "--client-id applies to --algorithm redisson only",
        ),
        (&["release", "api", "--algorithm", "redisson", "--receipt", "1:5"], "--receipt applies to the family"),
        (
            &["permits", "api", "--algorithm", "redisson", "--layout", "per-identifier"],
            "--layout does not apply to --algorithm redisson",
        ),
        (&[&["acquire", "api", "--layout", "cluster"][..], &gcra].concat(), "layout must be \"per-limiter\""),
        (&[&["release", "api", "2"][..], &gcra].concat(), "applies to --algorithm redisson only"),
        (&[&["config", "api"][..], &gcra].concat(), "config prints a configuration stored in Redis"),
        (
            &["acquire", "api", "--algorithm", "fixed-window", "--limit", "1", "--interval", "1s", "--rate", "5"],
            "--rate applies to token-bucket and gcra only",
        ),
        (&["acquire", "api", "--algorithm", "stored", "--limit", "3"], "drop --limit"),
        (&["configure", "api", "--algorithm", "redisson"], "has no quota to give"),
        (&["configure", "api", "--algorithm", "stored"], "has no quota to give"),
        (&["set-rate", "api", "--rate", "1", "--interval", "1s", "--client-id", "c"], "unexpected argument"),
        (
            &["acquire", "api", "--algorithm", "leaky-bucket"],
            "[possible values: sliding-log, token-bucket, fixed-window, sliding-window, gcra, concurrency, stored, \
             redisson]",
        ),
    ];
    for (args, expected) in cases {
        let stderr = run(args);
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
}

#[test]
fn doctor_passes_a_safe_endpoint_and_fails_one_that_evicts() {
    let stack = DevStack::start();
    let doctor = || {
        let output = Command::new(BIN)
            .arg("doctor")
            .env("EDGELIMIT_URL", &stack.url)
            .env("EDGELIMIT_TOKEN", "cli-token")
            .output()
            .unwrap();
        let lines: Vec<Json> =
            String::from_utf8(output.stdout).unwrap().lines().map(|line| serde_json::from_str(line).unwrap()).collect();
        (output.status.code().unwrap(), lines)
    };
    let (code, lines) = doctor();
    assert_eq!(code, 0, "{lines:?}");
    let names: Vec<&str> = lines[..4].iter().map(|line| line["check"].as_str().unwrap()).collect();
    assert_eq!(names, ["endpoint", "maxmemory-policy", "scripts", "server time"]);
    assert!(lines[..4].iter().all(|line| line["ok"] == true), "{lines:?}");
    assert_eq!(lines[4], serde_json::json!({ "ok": true, "failed": [] }));

    let client = edgelimit::RestClient::new(&stack.url, "cli-token").unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let set = edgelimit::Command::new("CONFIG").args(["SET", "maxmemory-policy", "allkeys-lru"]);
    runtime.block_on(client.command(&set)).unwrap();
    let (code, lines) = doctor();
    assert_eq!(code, 1, "{lines:?}");
    assert_eq!(lines[1]["ok"], false);
    let detail = lines[1]["detail"].as_str().unwrap();
    assert!(detail.contains("allkeys-lru") && detail.contains("CONFIG SET maxmemory-policy noeviction"), "{detail}");
    assert_eq!(lines[4], serde_json::json!({ "ok": false, "failed": ["maxmemory-policy"] }));
}

#[test]
fn the_bridge_warns_at_start_up_when_redis_evicts_keys() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let redis = runtime.block_on(edgelimit_cli::redis_server::RedisServer::start()).unwrap();
    let mut connection = redis::Client::open(redis.url()).unwrap().get_connection().unwrap();
    let _: () =
        redis::cmd("CONFIG").arg("SET").arg("maxmemory-policy").arg("volatile-lru").query(&mut connection).unwrap();
    let mut bridge = Command::new(BIN)
        .args(["bridge", "--listen", "127.0.0.1:0", "--redis", &redis.url(), "--token", "cli-token"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let warning = BufReader::new(bridge.stderr.take().unwrap()).lines().next();
    let _ = bridge.kill();
    bridge.wait().unwrap();
    let warning = warning.unwrap().unwrap();
    assert!(
        warning.starts_with("edgelimit bridge: WARNING: maxmemory-policy is \"volatile-lru\"")
            && warning.contains("noeviction"),
        "{warning}"
    );
    runtime.block_on(redis.stop()).unwrap();
}

/// `edgelimit scripts` lists lua/SHA1SUMS's lines, prints one script's exact text, and names the scripts when asked
/// for one it does not have.
#[test]
fn scripts_lists_prints_and_refuses_unknown_names() {
    let run = |args: &[&str]| Command::new(BIN).args(args).output().unwrap();
    let listed = run(&["scripts"]);
    let pinned = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../lua/SHA1SUMS")).unwrap();
    assert_eq!(String::from_utf8(listed.stdout).unwrap(), pinned);
    let gcra = run(&["scripts", "batch/gcra"]);
    assert_eq!(String::from_utf8(gcra.stdout).unwrap(), edgelimit::lua::BATCH_GCRA.source());
    let unknown = run(&["scripts", "nope"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("the scripts are token_bucket"));
}

/// The `host:port` a spawned bridge prints it listens on (its first line of stdout).
fn listening_address(bridge: &mut Child) -> String {
    let mut listening = String::new();
    BufReader::new(bridge.stdout.take().unwrap()).read_line(&mut listening).unwrap();
    let url = listening.split("http://").nth(1).unwrap();
    url.split_whitespace().next().unwrap().to_owned()
}

/// Refused requests are logged on stderr, as JSON with `--log-format json`, never with the token; at most 10 lines a
/// second, the rest counted in the next line, so every refusal is logged or counted.
#[test]
fn the_bridge_logs_refused_requests_and_bounds_the_lines() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let redis = runtime.block_on(edgelimit_cli::redis_server::RedisServer::start()).unwrap();
    let mut bridge = Command::new(BIN)
        .args(["bridge", "--listen", "127.0.0.1:0", "--redis", &redis.url(), "--token", "cli-token"])
        .args(["--log-format", "json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let address = listening_address(&mut bridge);
    let refuse = || {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(&address).unwrap();
        let request = "POST / HTTP/1.1\r\nHost: b\r\nAuthorization: Bearer wrong-token-123\r\nContent-Length: 8\r\n\
                       Connection: close\r\n\r\n[\"PING\"]";
        stream.write_all(request.as_bytes()).unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        assert!(response.starts_with("HTTP/1.1 401"), "{response}");
    };
    let started = std::time::Instant::now();
    (0..30).for_each(|_| refuse());
    let seconds = started.elapsed().as_secs();
    // After a quiet second the next refusal first reports how many went unlogged.
    std::thread::sleep(Duration::from_millis(1100));
    refuse();
    let _ = bridge.kill();
    bridge.wait().unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut bridge.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(!stderr.contains("wrong-token-123"), "{stderr}");
    let lines: Vec<Json> =
        stderr.lines().filter(|line| line.starts_with('{')).map(|line| serde_json::from_str(line).unwrap()).collect();
    let logged = lines.iter().filter(|line| line["fields"]["message"] == "refused").count() as u64;
    let left_out: u64 = lines.iter().filter_map(|line| line["fields"]["left_out"].as_u64()).sum();
    assert_eq!(logged + left_out, 31, "{stderr}");
    assert!(logged <= 10 * (seconds + 2), "{logged} lines in {seconds} s:\n{stderr}");
    let first = &lines[0]["fields"];
    assert_eq!(
        (&first["status"], &first["route"], &first["profile"]),
        (&Json::from(401), &Json::from("/"), &Json::from("none")),
        "{stderr}"
    );
    assert!(first["reason"].as_str().unwrap().starts_with("Unauthorized"), "{stderr}");
    runtime.block_on(redis.stop()).unwrap();
}

/// deploy/edgelimit-bridge.service's command line, run as the unit would run it (with this build, a test Redis, a
/// free port and a tokens file of its own), serves: `GET /healthz` answers 200.
#[test]
fn the_systemd_units_command_line_serves() {
    let unit =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/edgelimit-bridge.service")).unwrap();
    let exec = unit.lines().find_map(|line| line.strip_prefix("ExecStart=")).unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let redis = runtime.block_on(edgelimit_cli::redis_server::RedisServer::start()).unwrap();
    let tokens = std::env::temp_dir().join(format!("edgelimit-unit-tokens-{}", std::process::id()));
    std::fs::write(&tokens, "admin:unit-admin-token\n").unwrap();
    let mut words: Vec<String> = exec.split_whitespace().map(str::to_owned).collect();
    assert_eq!(words[0], "/usr/local/bin/edgelimit", "{exec}");
    for (flag, value) in [
        ("--listen", "127.0.0.1:0".to_owned()),
        ("--redis", redis.url()),
        ("--tokens-file", tokens.display().to_string()),
    ] {
        let at = words.iter().position(|word| word == flag).unwrap_or_else(|| panic!("{flag} in {exec}"));
        words[at + 1] = value;
    }
    let mut bridge = Command::new(BIN).args(&words[1..]).stdout(Stdio::piped()).spawn().unwrap();
    let address = listening_address(&mut bridge);
    let mut stream = std::net::TcpStream::connect(&address).unwrap();
    std::io::Write::write_all(&mut stream, b"GET /healthz HTTP/1.1\r\nHost: b\r\nConnection: close\r\n\r\n").unwrap();
    let mut response = String::new();
    std::io::Read::read_to_string(&mut stream, &mut response).unwrap();
    let _ = bridge.kill();
    bridge.wait().unwrap();
    std::fs::remove_file(&tokens).unwrap();
    assert!(response.starts_with("HTTP/1.1 200") && response.ends_with(r#"{"status":"ok"}"#), "{response}");
    runtime.block_on(redis.stop()).unwrap();
}

/// A bridge whose Redis URL cannot be parsed exits 2 before it listens (nothing announces an address that will not
/// serve), and `--threads` belongs to the servers alone.
#[test]
fn an_invalid_redis_url_is_refused_before_listening_and_threads_are_the_servers() {
    let output = Command::new(BIN)
        .args(["bridge", "--redis", "not-a-url", "--token", "cli-token", "--listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(String::from_utf8_lossy(&output.stdout), "");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(r#"invalid Redis URL "not-a-url""#), "{stderr}");
    let output = Command::new(BIN).args(["permits", "api", "--threads", "2"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("unexpected argument '--threads'"));
}

/// The ```sh blocks of a guide, each as its lines.
fn shell_blocks(guide: &str) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(format!("{}/../docs/{guide}", env!("CARGO_MANIFEST_DIR"))).unwrap();
    text.split("```sh\n")
        .skip(1)
        .map(|rest| rest.split("```").next().unwrap().lines().map(str::to_owned).collect())
        .collect()
}

/// The JSON object a comment shows (`# {"available":2}: …`), `…` standing for any value; or `None`.
fn shown_json(comment: &str) -> Option<serde_json::Map<String, Json>> {
    let start = comment.find('{')?;
    let end = start + comment[start..].find('}')?;
    serde_json::from_str(&comment[start..=end].replace('…', "null")).ok()
}

/// Every `edgelimit` line of the CLI guides' shell blocks runs as written, top to bottom, against a fresh stack:
/// exit 0 or 1 (granted or denied, never an error), and the JSON its comment shows, `…` for any value. Lines whose
/// command holds a placeholder (`…`, a receipt only a run can know) are left out.
#[test]
fn the_cli_lines_of_the_guides_run_as_written() {
    for guide in ["algorithms.md", "redisson.md"] {
        let stack = DevStack::start();
        for line in shell_blocks(guide).concat() {
            let (command, comment) = line.split_once("  #").unwrap_or((&line, ""));
            let Some(arguments) = command.trim().strip_prefix("edgelimit ") else {
                continue;
            };
            if arguments.contains('…') {
                continue;
            }
            let words: Vec<&str> = arguments.split_whitespace().collect();
            let (code, output, stderr) = stack.run(&words);
            assert!(code == 0 || code == 1, "{guide}: `{command}` exited {code}: {stderr}");
            for (field, value) in shown_json(comment).unwrap_or_default() {
                let printed = output.get(&field);
                assert!(printed.is_some(), "{guide}: `{command}` printed {output}, without {field}");
                if !value.is_null() {
                    assert_eq!(printed, Some(&value), "{guide}: `{command}` printed {output}");
                }
            }
        }
    }
}

/// docs/errors.md's `edgelimit doctor` block shows the checks a safe endpoint passes, in order.
#[test]
fn the_doctor_block_shows_what_doctor_prints() {
    let stack = DevStack::start();
    let block = shell_blocks("errors.md").concat();
    let shown: Vec<Json> =
        block.iter().skip(1).map(|line| serde_json::from_str(&line.replace('…', "")).unwrap()).collect();
    let output = Command::new(BIN).args(["doctor", "--url", &stack.url, "--token", "cli-token"]).output().unwrap();
    assert_eq!(output.status.code(), Some(0));
    let printed: Vec<Json> =
        String::from_utf8(output.stdout).unwrap().lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    let checks =
        |lines: &[Json]| lines.iter().map(|line| (line["check"].clone(), line["ok"].clone())).collect::<Vec<_>>();
    assert_eq!(checks(&printed), checks(&shown));
}
