//! HTTP load from outside the benchmark's process: `wrk` (Debian's, installed by `scripts/setup`) sending one request
//! over and over with a number of connections, and the hello-world server (`edgelimit-bench-hello`,
//! `src/hello_server.rs`) it is pointed at besides the bridge.
//!
//! Why not the Rust client here: a client in the same process as what it measures shares that process's runtime
//! and cores, and reqwest costs about as much per request as the server it drives; `wrk` is a single C thread on
//! epoll, as `redis-benchmark` is on Redis's side, so the two generators cost their sides alike and the ratios
//! compare the servers.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::latency::RunStats;
use crate::support::Context;

/// The hello-world server's binary name.
const HELLO: &str = "edgelimit-bench-hello";

/// How long the hello-world server may take to say where it listens.
const HELLO_START: Duration = Duration::from_secs(10);

/// One HTTP request as `wrk` sends it: `POST /` with a JSON body and the headers of edgelimit's Rust client.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    /// The JSON body.
    pub body: String,
    /// The bearer token.
    pub token: String,
}

/// The hello-world server, a process of its own; killed when dropped.
pub(crate) struct HelloServer {
    url: String,
    _child: Child,
}

impl HelloServer {
    /// Starts `edgelimit-bench-hello` on a free loopback port.
    pub(crate) async fn start() -> Result<HelloServer, String> {
        let binary = hello_binary()?;
        let mut child = Command::new(&binary)
            .arg("127.0.0.1:0")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .context(format_args!("could not start {}", binary.display()))?;
        let stdout = child.stdout.take().ok_or("the hello-world server has no stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let line = tokio::time::timeout(HELLO_START, lines.next_line())
            .await
            .map_err(|_| format!("{HELLO} said nothing within {} s", HELLO_START.as_secs()))?
            .context(format_args!("could not read {HELLO}'s output"))?
            .ok_or_else(|| format!("{HELLO} ended without saying where it listens"))?;
        let url = line
            .strip_prefix("listening on ")
            .ok_or_else(|| format!("{HELLO} printed {line:?}, expected `listening on http://…`"))?
            .to_owned();
        Ok(HelloServer { url, _child: child })
    }

    /// Its base URL, e.g. `http://127.0.0.1:40123`.
    pub(crate) fn url(&self) -> &str {
        &self.url
    }
}

/// Where `edgelimit-bench-hello` is: `EDGELIMIT_BENCH_HELLO` when set; else beside this executable (the benchmark
/// binary, in `target/<profile>/`), or one directory up (a test binary, in `target/<profile>/deps/`), where cargo
/// builds the package's binaries.
fn hello_binary() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os("EDGELIMIT_BENCH_HELLO") {
        return Ok(path.into());
    }
    let exe = std::env::current_exe().context("cannot tell where this executable is")?;
    let name = format!("{HELLO}{}", std::env::consts::EXE_SUFFIX);
    exe.ancestors()
        .skip(1)
        .take(2)
        .map(|dir| dir.join(&name))
        .find(|candidate| candidate.is_file())
        .ok_or_else(|| {
            format!(
                "{name} is not beside {}: build it with `cargo build --profile bridge -p edgelimit-bench` \
                 (scripts/bench does), or name it in EDGELIMIT_BENCH_HELLO",
                exe.display()
            )
        })
}

/// `wrk -t1 -c<concurrency> -d<seconds>` (wrk takes whole seconds) sending `request` to `url`; fails when any answer
/// was not 2xx or a socket failed, since an error is answered fast and would be measured as a fast answer.
pub(crate) async fn wrk(url: &str, concurrency: u32, seconds: u64, request: &Request) -> Result<RunStats, String> {
    let script = WrkScript::write(request)?;
    let output = Command::new("wrk")
        .args(["-t1", &format!("-c{concurrency}"), &format!("-d{seconds}s")])
        .args(["--latency", "-s"])
        .arg(script.path())
        .arg(format!("{url}/"))
        .output()
        .await
        .context("could not run wrk (Debian's wrk; run scripts/setup)")?;
    let text = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(format!(
            "wrk failed ({}): {}{text}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    parse_wrk(&text)
}

/// The Lua script that makes `wrk` send one request; deleted when dropped.
struct WrkScript(PathBuf);

impl WrkScript {
    fn write(request: &Request) -> Result<WrkScript, String> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let path = std::env::temp_dir().join(format!(
            "edgelimit-bench-wrk-{}-{}.lua",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::write(&path, wrk_script(request)?).context(format_args!("could not write {}", path.display()))?;
        Ok(WrkScript(path))
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for WrkScript {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The script's text: the body and the token as Lua long strings (`[==[…]==]`), which need no escaping; one that
/// holds the closing bracket cannot be written so and is refused.
fn wrk_script(request: &Request) -> Result<String, String> {
    let long = |text: &str| {
        if text.contains("]==]") {
            Err(format!("cannot pass {text:?} to wrk as a Lua long string"))
        } else {
            Ok(format!("[==[{text}]==]"))
        }
    };
    Ok(format!(
        "wrk.method = \"POST\"\n\
         wrk.body = {}\n\
         wrk.headers[\"Authorization\"] = {}\n\
         wrk.headers[\"Content-Type\"] = \"application/json\"\n\
         wrk.headers[\"Upstash-Encoding\"] = \"base64\"\n\
         wrk.headers[\"{}\"] = \"30000\"\n",
        long(&request.body)?,
        long(&format!("Bearer {}", request.token))?,
        edgelimit::rest::DEADLINE_HEADER,
    ))
}

/// Reads `wrk --latency`'s report: `N requests in …`, `Requests/sec: R`, the 50 % and 99 % lines of its latency
/// distribution; and refuses a run with non-2xx answers or socket errors.
fn parse_wrk(text: &str) -> Result<RunStats, String> {
    let line_after = |prefix: &str| {
        text.lines()
            .map(str::trim)
            .find_map(|line| line.strip_prefix(prefix).map(str::trim))
    };
    if let Some(count) = line_after("Non-2xx or 3xx responses:") {
        return Err(format!("{count} of wrk's requests were answered with an error: {text}"));
    }
    if let Some(errors) = line_after("Socket errors:") {
        return Err(format!("wrk met socket errors ({errors}): {text}"));
    }
    let requests = text
        .lines()
        .find_map(|line| line.trim().split_once(" requests in ").map(|(n, _)| n.parse::<u64>()))
        .and_then(Result::ok)
        .ok_or_else(|| format!("wrk printed no request count: {text}"))?;
    let per_second = line_after("Requests/sec:")
        .and_then(|rate| rate.parse().ok())
        .ok_or_else(|| format!("wrk printed no Requests/sec: {text}"))?;
    let quantile = |label: &str| {
        line_after(label)
            .and_then(wrk_millis)
            .ok_or_else(|| format!("wrk printed no {label} latency: {text}"))
    };
    Ok(RunStats {
        requests,
        per_second,
        p50_ms: quantile("50%")?,
        p99_ms: quantile("99%")?,
    })
}

/// A duration as `wrk` prints it (`562.00us`, `2.01ms`, `1.10s`, `3.00m`), in ms.
fn wrk_millis(text: &str) -> Option<f64> {
    let split = text.find(|c: char| c.is_ascii_alphabetic())?;
    let (number, unit) = text.split_at(split);
    let number: f64 = number.parse().ok()?;
    let factor = match unit {
        "us" => 0.001,
        "ms" => 1.0,
        "s" => 1000.0,
        "m" => 60_000.0,
        _ => return None,
    };
    Some(number * factor)
}

#[cfg(test)]
mod tests {
    use super::*;

    const REPORT: &str = "Running 2s test @ http://127.0.0.1:8501/\n  1 threads and 16 connections\n  Thread Stats   \
                          Avg      Stdev     Max   +/- Stdev\n    Latency   682.35us  300.00us   8.77ms   88.37%\n    \
                          Req/Sec    24.00k     1.00k   26.00k    70.00%\n  Latency Distribution\n     50%  \
                          562.00us\n     75%  700.00us\n     90%    1.00ms\n     99%    2.01ms\n  48123 requests in \
                          2.00s, 6.84MB read\nRequests/sec:  24061.50\nTransfer/sec:      3.42MB\n";

    #[test]
    fn reads_wrk_reports() {
        let stats = parse_wrk(REPORT).unwrap();
        assert_eq!((stats.requests, stats.per_second), (48123, 24061.5));
        assert!(
            (stats.p50_ms - 0.562).abs() < 1e-9 && (stats.p99_ms - 2.01).abs() < 1e-9,
            "{stats:?}"
        );
        let failed = REPORT.replace("Requests/sec", "  Non-2xx or 3xx responses: 12\nRequests/sec");
        assert!(parse_wrk(&failed).unwrap_err().contains("12 of wrk's requests"));
        let broken = REPORT.replace(
            "Requests/sec",
            "  Socket errors: connect 0, read 3, write 0, timeout 0\nRequests/sec",
        );
        assert!(parse_wrk(&broken).unwrap_err().contains("socket errors"));
        assert!(parse_wrk("nothing").is_err());
        assert_eq!(wrk_millis("1.5s"), Some(1500.0));
        assert_eq!(wrk_millis("7"), None);
    }

    #[test]
    fn scripts_carry_the_body_and_token_verbatim_or_refuse_them() {
        let request = Request {
            body: r#"["EVALSHA","abc","1","edgelimit:{k}","1:2"]"#.to_owned(),
            token: "bench-token".to_owned(),
        };
        let script = wrk_script(&request).unwrap();
        assert!(
            script.contains(r#"wrk.body = [==[["EVALSHA","abc","1","edgelimit:{k}","1:2"]]==]"#),
            "{script}"
        );
        assert!(script.contains("[==[Bearer bench-token]==]"), "{script}");
        let hostile = Request {
            body: "]==] os.exit()".to_owned(),
            token: "t".to_owned(),
        };
        assert!(wrk_script(&hostile).is_err());
    }
}
