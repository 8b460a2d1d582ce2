//! HTTP load from outside the benchmark's process: `wrk` sending one request over and over, to the bridge and to the
//! hello-world server (`src/hello_server.rs`). `wrk` is one C thread, as `redis-benchmark` is on Redis's side, so the
//! two generators cost their sides alike; an in-process Rust client would share the cores of what it measures.

use std::io::Write;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use serde::Deserialize;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::latency::RunStats;
use crate::support::{stdout_of, Context};

/// The hello-world server's binary name, and how long it may take to say where it listens.
const HELLO: &str = "edgelimit-bench-hello";
const HELLO_START: Duration = Duration::from_secs(10);

/// One HTTP request as `wrk` sends it: `POST /` with a JSON body, a bearer token and the Rust client's headers.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    pub body: String,
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

/// Where `edgelimit-bench-hello` is: beside this executable, or one directory up (a test binary, in `deps/`).
fn hello_binary() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().context("cannot tell where this executable is")?;
    let name = format!("{HELLO}{}", std::env::consts::EXE_SUFFIX);
    exe.ancestors().skip(1).take(2).map(|dir| dir.join(&name)).find(|candidate| candidate.is_file()).ok_or_else(|| {
        format!(
            "{name} is not beside {}: build it with `cargo build --profile bridge -p edgelimit-bench` \
                 (scripts/bench does)",
            exe.display()
        )
    })
}

/// Makes `wrk` send the request in `BENCH_*` as edgelimit's Rust client does, and print its numbers as a last
/// line of JSON.
const WRK_SCRIPT: &str = r#"
wrk.method = "POST"
wrk.body = os.getenv("BENCH_BODY")
wrk.headers["Authorization"] = "Bearer " .. os.getenv("BENCH_TOKEN")
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Upstash-Encoding"] = "base64"
wrk.headers[os.getenv("BENCH_DEADLINE_HEADER")] = "30000"
function done(summary, latency)
  local e = summary.errors
  io.write(string.format('\n{"requests":%d,"micros":%.0f,"p50":%.0f,"p99":%.0f,"non2xx":%d,"socketErrors":%d}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99), e.status,
    e.connect + e.read + e.write + e.timeout))
end
"#;

/// The JSON line `WRK_SCRIPT` prints; times in µs.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WrkReport {
    requests: u64,
    micros: f64,
    p50: f64,
    p99: f64,
    non2xx: u64,
    socket_errors: u64,
}

/// `wrk -t1 -c<concurrency> -d<seconds>` (whole seconds) sending `request` to `url`. Fails on any non-2xx answer
/// or socket error: an error is answered fast and would be measured as a fast answer.
pub(crate) async fn wrk(url: &str, concurrency: u32, seconds: u64, request: &Request) -> Result<RunStats, String> {
    let mut script = tempfile::Builder::new().suffix(".lua").tempfile().context("could not create wrk's script")?;
    script.write_all(WRK_SCRIPT.as_bytes()).context("could not write wrk's script")?;
    let mut wrk = Command::new("wrk");
    wrk.args(["-t1", &format!("-c{concurrency}"), &format!("-d{seconds}s"), "-s"])
        .arg(script.path())
        .arg(format!("{url}/"))
        .env("BENCH_BODY", &request.body)
        .env("BENCH_TOKEN", &request.token)
        .env("BENCH_DEADLINE_HEADER", edgelimit::rest::DEADLINE_HEADER);
    let text = stdout_of(&mut wrk, "wrk (Debian's wrk; run scripts/setup)").await?;
    let report: WrkReport = (text.lines().last())
        .and_then(|line| serde_json::from_str(line).ok())
        .ok_or_else(|| format!("wrk printed no report: {text}"))?;
    if report.non2xx + report.socket_errors > 0 {
        return Err(format!(
            "wrk met {} error answers and {} socket errors: {text}",
            report.non2xx, report.socket_errors
        ));
    }
    Ok(RunStats {
        requests: report.requests,
        per_second: report.requests as f64 / (report.micros / 1e6),
        p50_ms: report.p50 / 1000.0,
        p99_ms: report.p99 / 1000.0,
    })
}
