//! Scenario 3: decisions/s and latency through the bridge next to `redis-benchmark` (Rust client, `wrk`, a hello-world
//! server, scoped tokens, and `bench/npm.mjs` from Node). Everything shares this machine's cores: read the ratios.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::StatusCode;
use axum::routing::post;
use axum::Router;
use edgelimit::limit::{Limiter, Quota};
use edgelimit::{Command, RestClient};
use indicatif::ProgressBar;
use serde::{Deserialize, Serialize};

use crate::http_load::{self, HelloServer};
use crate::latency::{self, faster, RunStats};
use crate::node::{NodeRunner, NpmReport};
use crate::redis_stats;
use crate::stack::{BenchStack, TOKEN};
use crate::support::{best_each, ratio, stdout_of, take_turns, Context};

/// The identifier of every request (one key, as `redis-benchmark` gets it), and its limiter: one name for every
/// token, so that each does the same work in Redis (its key is under the `limiter` user's default key patterns).
const IDENTIFIER: &str = "throughput";
const LIMITER: &str = "throughput";
/// Requests in flight for each run of the Rust client, and of the load generators (`wrk`, `redis-benchmark`).
const CONCURRENCIES: [u32; 2] = [1, 16];
const LOAD_CONCURRENCIES: [u32; 2] = [16, 64];
/// Runs of each load-generator target per operation and concurrency.
const LOAD_ROUNDS: u32 = 3;
/// Runs of each token variant per concurrency: a multiple of three, so each goes first equally often.
const SCOPING_ROUNDS: u32 = 9;

/// Scenario 3's numbers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Throughput {
    /// What the decisions decide.
    pub limit: String,
    /// Seconds each Rust client run lasts.
    pub seconds: f64,
    pub redis_benchmark_requests: u64,
    /// Per operation and concurrency.
    pub rows: Vec<ThroughputRow>,
    /// The npm package from Node (`bench/npm.mjs`), when Node ran.
    pub npm: Option<NpmReport>,
    pub scoping: Scoping,
    pub load: LoadComparison,
}

/// One operation (`decision` or `PING`) at one concurrency, through the bridge and straight to Redis.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThroughputRow {
    pub operation: String,
    pub concurrency: u32,
    pub bridge: RunStats,
    pub redis_benchmark: RunStats,
    /// Requests/s, here and below.
    pub bridge_to_direct: Option<f64>,
    /// `PING` only: the same client against the hello-world server, which answers at once.
    pub plain_http: Option<RunStats>,
    pub bridge_to_plain_http: Option<f64>,
}

/// The bridge next to Redis and to a hello-world server, under `wrk` and `redis-benchmark` (both one C thread).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadComparison {
    /// The HTTP load generator, as it names itself (`wrk 4.1.0 …`).
    pub generator: String,
    /// Seconds each `wrk` run lasts.
    pub seconds: u64,
    pub redis_benchmark_requests: u64,
    /// Runs of each target per row, taking turns; each row shows each target's fastest.
    pub rounds: u32,
    /// Of the bridge's and the hello-world server's runtime.
    pub worker_threads: usize,
    pub rows: Vec<LoadRow>,
}

/// One operation at one concurrency: `wrk` through the bridge and to the hello-world server, `redis-benchmark`
/// straight to Redis.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadRow {
    pub operation: String,
    pub concurrency: u32,
    pub bridge: RunStats,
    pub direct: RunStats,
    pub hello_world: RunStats,
    /// Requests/s, here and below.
    pub bridge_to_direct: Option<f64>,
    pub bridge_to_hello_world: Option<f64>,
    pub hello_world_to_direct: Option<f64>,
}

/// The same decisions through the bridge with each of [`BenchStack::token_variants`], at each concurrency.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Scoping {
    pub seconds: f64,
    /// Runs of each variant at each concurrency, taking turns; each row shows each variant's fastest.
    pub rounds: u32,
    pub rows: Vec<ScopingRow>,
}

/// One concurrency: the decisions with each token variant, and the scoped ones' requests/s over the admin's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScopingRow {
    pub concurrency: u32,
    pub admin: RunStats,
    pub limiter_acl_off: RunStats,
    pub limiter_acl_user: RunStats,
    pub acl_off_to_admin: Option<f64>,
    pub acl_user_to_admin: Option<f64>,
}

/// Runs scenario 3 (with `bench/npm.mjs` when `node` is given).
pub(crate) async fn run(
    stack: &BenchStack,
    node: Option<&NodeRunner>,
    quick: bool,
    progress: &ProgressBar,
) -> Result<Throughput, String> {
    let seconds = if quick { 0.3 } else { 3.0 };
    let redis_benchmark_requests = if quick { 2_000 } else { 30_000 };
    let run_time = Duration::from_secs_f64(seconds);
    let scoping_runs = (CONCURRENCIES.len() * 3) as u64 * u64::from(SCOPING_ROUNDS);
    // Two operations, each at every concurrency, three targets per round.
    let load_runs = (2 * LOAD_CONCURRENCIES.len() * 3) as u64 * u64::from(if quick { 1 } else { LOAD_ROUNDS });
    progress.set_length(8 + load_runs + scoping_runs + u64::from(node.is_some()));
    let client = stack.client().clone();
    let quota = Quota::fixed_window(1_000_000_000, Duration::from_secs(3600)).context("invalid benchmark quota")?;
    let limiter = Limiter::new(client.clone(), LIMITER, quota).context("invalid limiter")?;
    // Loads the script, so that neither side meets NOSCRIPT while measured.
    limiter.limit(IDENTIFIER, 1).await.context("the first decision failed")?;
    let evalsha = decision_words(quota).await?;
    let hello_world = HelloServer::start().await?;
    let plain_http_ping = Arc::new(Operation::Ping(
        RestClient::new(hello_world.url(), TOKEN)
            .map(RestClient::without_coalescing)
            .context("could not make a client for the hello-world server")?,
    ));
    let operations = [
        (Arc::new(Operation::Decision(limiter)), evalsha),
        (Arc::new(Operation::Ping(client)), vec!["PING".to_owned()]),
    ];
    let mut rows = Vec::new();
    for (operation, words) in &operations {
        let name = operation.name();
        for concurrency in CONCURRENCIES {
            progress.set_message(format!("{name} through the bridge, {concurrency} in flight"));
            let bridge = run_clients(concurrency, run_time, operation).await?;
            progress.inc(1);
            progress.set_message(format!("redis-benchmark {name}, {concurrency} in flight"));
            let direct = redis_benchmark(stack, concurrency, redis_benchmark_requests, words).await?;
            progress.inc(1);
            let plain_http = match operation.as_ref() {
                Operation::Ping(_) => {
                    progress.set_message(format!("PING to a plain HTTP server, {concurrency} in flight"));
                    let stats = run_clients(concurrency, run_time, &plain_http_ping).await?;
                    progress.inc(1);
                    Some(stats)
                }
                Operation::Decision(_) => None,
            };
            rows.push(ThroughputRow {
                operation: name.to_owned(),
                concurrency,
                bridge_to_direct: ratio(bridge.per_second, direct.per_second),
                bridge_to_plain_http: plain_http.as_ref().and_then(|plain| ratio(bridge.per_second, plain.per_second)),
                bridge,
                redis_benchmark: direct,
                plain_http,
            });
        }
    }
    let words = operations.map(|(operation, words)| (operation.name(), words));
    let load = load_comparison(stack, &hello_world, &words, quick, progress).await?;
    drop(hello_world);
    let scoping = scoping(stack, quota, if quick { 0.1 } else { 1.0 }, progress).await?;
    let npm = match node {
        Some(node) => {
            progress.set_message("node bench/npm.mjs");
            let report = node.run("bench/npm.mjs", stack, quick).await?;
            progress.inc(1);
            Some(report)
        }
        None => None,
    };
    Ok(Throughput {
        limit: format!("fixed window, {} per hour (every request allowed), server clock", quota.limit()),
        seconds,
        redis_benchmark_requests,
        rows,
        npm,
        scoping,
        load,
    })
}

/// Each operation (a name and its words) at each of [`LOAD_CONCURRENCIES`]: `wrk` to the bridge, `redis-benchmark`
/// to Redis and `wrk` to the hello-world server, taking turns; each keeps its fastest run.
async fn load_comparison(
    stack: &BenchStack,
    hello_world: &HelloServer,
    operations: &[(&str, Vec<String>)],
    quick: bool,
    progress: &ProgressBar,
) -> Result<LoadComparison, String> {
    // wrk runs whole seconds: a quick run's single second is already its shortest.
    let (seconds, redis_benchmark_requests, rounds) = if quick { (1, 2_000, 1) } else { (2, 100_000, LOAD_ROUNDS) };
    let generator = wrk_version().await?;
    let targets = ["wrk through the bridge", "redis-benchmark", "wrk to the hello-world server"];
    let mut rows = Vec::new();
    for (operation, words) in operations {
        let request = http_load::Request {
            body: serde_json::to_string(words).context("could not write the request as JSON")?,
            token: TOKEN.to_owned(),
        };
        for concurrency in LOAD_CONCURRENCIES {
            let runs = take_turns(rounds as usize, targets.len(), true, async |target, round| {
                progress.set_message(format!(
                    "{operation}: {}, {concurrency} in flight, round {} of {rounds}",
                    targets[target],
                    round + 1
                ));
                let stats = match target {
                    0 => http_load::wrk(stack.url(), concurrency, seconds, &request).await,
                    1 => redis_benchmark(stack, concurrency, redis_benchmark_requests, words).await,
                    _ => http_load::wrk(hello_world.url(), concurrency, seconds, &request).await,
                };
                progress.inc(1);
                stats
            })
            .await?;
            let [bridge, direct, hello_world] = best_each(runs, faster)?;
            rows.push(LoadRow {
                operation: (*operation).to_owned(),
                concurrency,
                bridge_to_direct: ratio(bridge.per_second, direct.per_second),
                bridge_to_hello_world: ratio(bridge.per_second, hello_world.per_second),
                hello_world_to_direct: ratio(hello_world.per_second, direct.per_second),
                bridge,
                direct,
                hello_world,
            });
        }
    }
    Ok(LoadComparison {
        generator,
        seconds,
        redis_benchmark_requests,
        rounds,
        worker_threads: edgelimit_cli::runtime::default_threads(),
        rows,
    })
}

/// `wrk -v`'s first line (`wrk 4.1.0 [epoll] …`), trimmed to what names it.
async fn wrk_version() -> Result<String, String> {
    let output = tokio::process::Command::new("wrk")
        .arg("-v")
        .output()
        .await
        .context("could not run wrk (Debian's wrk; run scripts/setup)")?;
    // wrk prints its version, then its usage, and exits 1: the text is what counts.
    let text = String::from_utf8_lossy(&output.stdout);
    let first = text.lines().next().unwrap_or_default();
    Ok(first.split(" Copyright").next().unwrap_or(first).trim().to_owned())
}

/// The decisions of `quota` with each token variant, [`SCOPING_ROUNDS`] runs of `seconds` per concurrency,
/// taking turns; each variant keeps its fastest run.
async fn scoping(stack: &BenchStack, quota: Quota, seconds: f64, progress: &ProgressBar) -> Result<Scoping, String> {
    let run_time = Duration::from_secs_f64(seconds);
    let mut variants = Vec::new();
    for (name, client) in stack.token_variants() {
        let limiter = Limiter::new(client.clone(), LIMITER, quota).context("invalid limiter")?;
        // Not measured: a limiter token's first request makes its bridge provision the ACL user and connect.
        (limiter.limit(IDENTIFIER, 1).await).context(format_args!("the first decision with the {name} failed"))?;
        variants.push((name, Arc::new(Operation::Decision(limiter))));
    }
    let mut rows = Vec::new();
    for concurrency in CONCURRENCIES {
        let runs = take_turns(SCOPING_ROUNDS as usize, variants.len(), true, async |which, round| {
            let (name, operation) = &variants[which];
            let round = round + 1;
            progress.set_message(format!("decision with the {name}, {concurrency} in flight, round {round}"));
            let stats = run_clients(concurrency, run_time, operation).await;
            progress.inc(1);
            stats
        })
        .await?;
        let [admin, limiter_acl_off, limiter_acl_user] = best_each(runs, faster)?;
        rows.push(ScopingRow {
            concurrency,
            acl_off_to_admin: ratio(limiter_acl_off.per_second, admin.per_second),
            acl_user_to_admin: ratio(limiter_acl_user.per_second, admin.per_second),
            admin,
            limiter_acl_off,
            limiter_acl_user,
        });
    }
    Ok(Scoping { seconds, rounds: SCOPING_ROUNDS, rows })
}

/// What the Rust client sends through the bridge.
enum Operation {
    /// A decision that is always allowed.
    Decision(Limiter),
    /// A `PING`: the bridge's own cost.
    Ping(RestClient),
}

impl Operation {
    fn name(&self) -> &'static str {
        match self {
            Operation::Decision(_) => "decision",
            Operation::Ping(_) => "PING",
        }
    }

    async fn send(&self) -> Result<(), String> {
        match self {
            Operation::Decision(limiter) => {
                let decision = limiter.limit(IDENTIFIER, 1).await.context("a decision failed")?;
                if decision.success {
                    Ok(())
                } else {
                    Err("a throughput decision was denied under a limit meant to allow them all".to_owned())
                }
            }
            Operation::Ping(client) => client.command(&Command::new("PING")).await.map(drop).context("PING failed"),
        }
    }
}

/// `concurrency` tasks sending `operation` in a loop for `run_time`; requests per second and latency.
async fn run_clients(concurrency: u32, run_time: Duration, operation: &Arc<Operation>) -> Result<RunStats, String> {
    let operation = operation.clone();
    latency::run_clients(concurrency, run_time, move |_, _| {
        let operation = operation.clone();
        async move { operation.send().await }
    })
    .await
}

/// The words the Rust client sends for a decision of `quota`: it decides through a stand-in endpoint that records
/// the request and answers with an error.
async fn decision_words(quota: Quota) -> Result<Vec<String>, String> {
    let recorded: Arc<OnceLock<Bytes>> = Arc::default();
    let recorder = recorded.clone();
    let record = post(move |body: Bytes| async move {
        let _ = recorder.set(body);
        (StatusCode::BAD_REQUEST, r#"{"error":"ERR recorded by edgelimit-bench"}"#)
    });
    let listener = (tokio::net::TcpListener::bind("127.0.0.1:0").await).context("could not listen on loopback")?;
    let url = format!("http://{}", listener.local_addr().context("the listener has no address")?);
    let server = tokio::spawn(async move { axum::serve(listener, Router::new().route("/", record)).await });
    let client = RestClient::new(&url, TOKEN).context("could not make a client for the recording endpoint")?;
    if let Ok(limiter) = Limiter::new(client, LIMITER, quota) {
        let _ = limiter.limit(IDENTIFIER, 1).await;
    }
    server.abort();
    let body = recorded.get().ok_or("the client sent nothing to the recording endpoint")?;
    serde_json::from_slice(body).context("the client sent something other than a JSON array of words")
}

/// `redis-benchmark -c concurrency -n requests --csv <words>` against the stack's Redis; checks in Redis's own
/// counters that every call succeeded (`redis-benchmark` counts error replies as answers).
async fn redis_benchmark(
    stack: &BenchStack,
    concurrency: u32,
    requests: u64,
    words: &[String],
) -> Result<RunStats, String> {
    let client = stack.client();
    redis_stats::reset(client).await?;
    let mut redis_benchmark = tokio::process::Command::new("redis-benchmark");
    redis_benchmark
        .args(["-h", "127.0.0.1", "-p", &stack.redis_port().to_string()])
        .args(["-c", &concurrency.to_string(), "-n", &requests.to_string(), "--csv"])
        .args(words);
    let csv = stdout_of(&mut redis_benchmark, "redis-benchmark (Debian's redis-tools; run scripts/setup)").await?;
    let command = words.first().map(|word| word.to_ascii_lowercase()).unwrap_or_default();
    let stats = redis_stats::read(client).await?;
    // Fails on any failed call: an error reply is fast, and would be measured as a fast answer.
    stats.cost_of(&command, requests, requests)?;
    if stats.calls(&command) < requests {
        return Err(format!(
            "Redis counted {} {command} calls of the {requests} redis-benchmark should have sent",
            stats.calls(&command)
        ));
    }
    parse_redis_benchmark_csv(&csv, requests)
}

/// The columns of `redis-benchmark --csv` that count.
#[derive(Deserialize)]
struct RedisBenchmarkRow {
    rps: f64,
    p50_latency_ms: f64,
    p99_latency_ms: f64,
}

/// Reads `redis-benchmark --csv`: a header line, then one line per test.
fn parse_redis_benchmark_csv(csv: &str, requests: u64) -> Result<RunStats, String> {
    let row: RedisBenchmarkRow = csv::Reader::from_reader(csv.as_bytes())
        .deserialize()
        .next()
        .ok_or_else(|| format!("redis-benchmark --csv printed no result: {csv}"))?
        .context(format_args!("could not read redis-benchmark --csv: {csv}"))?;
    Ok(RunStats { requests, per_second: row.rps, p50_ms: row.p50_latency_ms, p99_ms: row.p99_latency_ms })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_redis_benchmark_csv() {
        let csv = "\"test\",\"rps\",\"avg_latency_ms\",\"min_latency_ms\",\"p50_latency_ms\",\"p95_latency_ms\",\
                   \"p99_latency_ms\",\"max_latency_ms\"\n\
                   \"EVALSHA 6163 1 k \",\"37593.98\",\"0.293\",\"0.072\",\"0.271\",\"0.463\",\"0.959\",\"4.431\"\n";
        let stats = parse_redis_benchmark_csv(csv, 20_000).unwrap();
        assert_eq!(stats.per_second, 37593.98);
        assert_eq!((stats.p50_ms, stats.p99_ms), (0.271, 0.959));
        assert!(parse_redis_benchmark_csv("nothing", 1).is_err());
    }
}
