//! Scenario 3: decisions per second and latency as a caller sees them, through the bridge, next to the ceiling.
//!
//! The Rust client (`Limiter::limit` over `RestClient`) decides through the bridge with 1 and with 16 requests in
//! flight, for a few seconds each; every request is allowed (a limit of a billion per hour), so this measures the
//! round trip, not denials. The ceiling is `redis-benchmark` sending the very same `EVALSHA` (the words the client
//! sends, recorded, with the same key and arguments) straight to Redis over RESP, with the same concurrency; a
//! `PING` through the bridge next to `redis-benchmark`'s `PING` shows what the bridge itself adds (HTTP, JSON,
//! auth). From Node, `bench/npm.mjs` measures the npm package against `@upstash/ratelimit` through the same bridge.
//! Everything shares this machine's cores (client, bridge and Redis): read the ratios, not the absolutes.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::StatusCode;
use axum::routing::post;
use axum::Router;
use edgelimit::limit::{Limiter, Quota};
use edgelimit::{Command, RestClient};
use serde::{Deserialize, Serialize};
use tokio::task::JoinSet;

use crate::latency::{quantile, RunStats};
use crate::node::{NodeRunner, NpmReport};
use crate::progress::Progress;
use crate::redis_stats;
use crate::stack::{BenchStack, TOKEN};
use crate::support::{ratio, Context};

/// The identifier every throughput request uses (one key, as `redis-benchmark` gets it).
const IDENTIFIER: &str = "throughput";

/// Scenario 3's numbers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Throughput {
    /// What the decisions decide.
    pub limit: String,
    /// Seconds each Rust client run lasts.
    pub seconds: f64,
    /// Requests each `redis-benchmark` run sends.
    pub redis_benchmark_requests: u64,
    /// Per operation and concurrency.
    pub rows: Vec<ThroughputRow>,
    /// The npm package from Node (`bench/npm.mjs`), when Node ran.
    pub npm: Option<NpmReport>,
}

/// One operation at one concurrency, through the bridge and straight to Redis.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThroughputRow {
    /// `decision` (the limiter's `EVALSHA`) or `PING`.
    pub operation: String,
    /// Requests in flight.
    pub concurrency: u32,
    /// The Rust client through the bridge.
    pub bridge: RunStats,
    /// `redis-benchmark` straight to Redis.
    pub redis_benchmark: RunStats,
    /// Requests/s: bridge / `redis-benchmark`.
    pub bridge_to_direct: Option<f64>,
}

/// Runs scenario 3 (with `bench/npm.mjs` when `node` is given).
pub(crate) async fn run(
    stack: &BenchStack,
    node: Option<&NodeRunner>,
    quick: bool,
    progress: &Progress,
) -> Result<Throughput, String> {
    let seconds = if quick { 0.3 } else { 3.0 };
    let redis_benchmark_requests = if quick { 2_000 } else { 30_000 };
    let run_time = Duration::from_secs_f64(seconds);
    progress.scenario("throughput", 8 + u64::from(node.is_some()));
    let client = stack.client().clone();
    let quota = Quota::fixed_window(1_000_000_000, Duration::from_secs(3600)).context("invalid benchmark quota")?;
    let limiter = Limiter::new(client.clone(), "throughput", quota).context("invalid limiter")?;
    // Loads the script, so that neither side meets NOSCRIPT while measured.
    limiter
        .limit(IDENTIFIER, 1)
        .await
        .context("the first decision failed")?;
    let evalsha = sent_command(|recording| async move {
        if let Ok(limiter) = Limiter::new(recording, "throughput", quota) {
            // The recorder answers with an error: only the request matters.
            let _ = limiter.limit(IDENTIFIER, 1).await;
        }
    })
    .await?;
    let decision = Arc::new(Operation::Decision(limiter));
    let ping = Arc::new(Operation::Ping(client));
    let mut rows = Vec::new();
    for (operation, words) in [(&decision, evalsha), (&ping, vec!["PING".to_owned()])] {
        for concurrency in [1, 16] {
            progress.doing(format!(
                "{} through the bridge, {concurrency} in flight",
                operation.name()
            ));
            let bridge = run_clients(concurrency, run_time, operation).await?;
            progress.step();
            progress.doing(format!("redis-benchmark {}, {concurrency} in flight", operation.name()));
            let direct = redis_benchmark(stack, concurrency, redis_benchmark_requests, &words).await?;
            progress.step();
            rows.push(ThroughputRow {
                operation: operation.name().to_owned(),
                concurrency,
                bridge_to_direct: ratio(bridge.per_second, direct.per_second),
                bridge,
                redis_benchmark: direct,
            });
        }
    }
    let npm = match node {
        Some(node) => {
            progress.doing("node bench/npm.mjs");
            let report = node.npm(stack, quick).await?;
            progress.step();
            Some(report)
        }
        None => None,
    };
    Ok(Throughput {
        limit: format!(
            "fixed window, {} per hour (every request allowed), server clock",
            quota.limit()
        ),
        seconds,
        redis_benchmark_requests,
        rows,
        npm,
    })
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
            Operation::Ping(client) => client
                .command(&Command::new("PING"))
                .await
                .map(drop)
                .context("PING failed"),
        }
    }
}

/// `concurrency` tasks sending `operation` in a loop for `run_time`; requests per second and latency.
async fn run_clients(concurrency: u32, run_time: Duration, operation: &Arc<Operation>) -> Result<RunStats, String> {
    let started = Instant::now();
    let deadline = started + run_time;
    let mut clients = JoinSet::new();
    for _ in 0..concurrency {
        let operation = operation.clone();
        clients.spawn(async move {
            let mut latencies = Vec::new();
            while Instant::now() < deadline {
                let sent = Instant::now();
                operation.send().await?;
                latencies.push(sent.elapsed().as_secs_f64() * 1000.0);
            }
            Ok::<_, String>(latencies)
        });
    }
    let mut latencies = Vec::new();
    while let Some(client) = clients.join_next().await {
        latencies.extend(client.context("a client task failed")??);
    }
    let elapsed = started.elapsed().as_secs_f64();
    latencies.sort_by(f64::total_cmp);
    Ok(RunStats {
        requests: latencies.len() as u64,
        per_second: latencies.len() as f64 / elapsed,
        p50_ms: quantile(&latencies, 0.5),
        p99_ms: quantile(&latencies, 0.99),
    })
}

/// The words a REST client sends when `send` uses it: `send` gets a client of a stand-in endpoint that records
/// the request and answers with an error.
async fn sent_command<F, Fut>(send: F) -> Result<Vec<String>, String>
where
    F: FnOnce(RestClient) -> Fut,
    Fut: Future<Output = ()>,
{
    let recorded: Arc<Mutex<Option<Bytes>>> = Arc::default();
    let recorder = recorded.clone();
    let app = Router::new().route(
        "/",
        post(move |body: Bytes| async move {
            if let Ok(mut slot) = recorder.lock() {
                *slot = Some(body);
            }
            (
                StatusCode::BAD_REQUEST,
                r#"{"error":"ERR recorded by edgelimit-bench"}"#,
            )
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .context("could not listen for the recording endpoint")?;
    let url = format!(
        "http://{}",
        listener.local_addr().context("the recording endpoint has no address")?
    );
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    let client = RestClient::new(&url, TOKEN).context("could not make a client for the recording endpoint")?;
    send(client).await;
    server.abort();
    let body = recorded
        .lock()
        .ok()
        .and_then(|mut slot| slot.take())
        .ok_or("the client sent nothing to the recording endpoint")?;
    let words: Vec<String> =
        serde_json::from_slice(&body).context("the client sent something other than a JSON array of words")?;
    if words.is_empty() {
        return Err("the client sent an empty command".to_owned());
    }
    Ok(words)
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
    let output = tokio::process::Command::new("redis-benchmark")
        .args(["-h", "127.0.0.1", "-p", &stack.redis_port().to_string()])
        .args(["-c", &concurrency.to_string(), "-n", &requests.to_string(), "--csv"])
        .args(words)
        .output()
        .await
        .context("could not run redis-benchmark (it comes with Debian's redis-tools; run scripts/setup)")?;
    if !output.status.success() {
        return Err(format!(
            "redis-benchmark failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ));
    }
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
    parse_redis_benchmark_csv(&String::from_utf8_lossy(&output.stdout), requests)
}

/// Reads `redis-benchmark --csv`: a header, then `"test","rps","avg_latency_ms","min_latency_ms",
/// "p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"`.
fn parse_redis_benchmark_csv(csv: &str, requests: u64) -> Result<RunStats, String> {
    let mut lines = csv.lines().filter(|line| !line.trim().is_empty());
    let header: Vec<String> = lines.next().map(csv_fields).unwrap_or_default();
    let values: Vec<String> = lines.next().map(csv_fields).unwrap_or_default();
    let field = |name: &str| -> Result<f64, String> {
        header
            .iter()
            .position(|column| column == name)
            .and_then(|i| values.get(i))
            .and_then(|value| value.parse().ok())
            .ok_or_else(|| format!("redis-benchmark --csv printed no {name}: {csv}"))
    };
    Ok(RunStats {
        requests,
        per_second: field("rps")?,
        p50_ms: field("p50_latency_ms")?,
        p99_ms: field("p99_latency_ms")?,
    })
}

/// The fields of one CSV line whose fields are all quoted and contain no quotes or commas (`redis-benchmark`'s).
fn csv_fields(line: &str) -> Vec<String> {
    line.split("\",\"")
        .map(|field| field.trim().trim_matches('"').to_owned())
        .collect()
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
