//! Scenario 8: one Redis against a 3-master Redis Cluster, each behind a bridge, taking turns; on 2 shared cores what
//! carries over is Redis µs per decision per master and how evenly decisions spread, from which the report predicts.

use std::sync::Arc;
use std::time::Duration;

use edgelimit::limit::{KeyLayout, Limiter, Quota};
use edgelimit_cli::bridge::{BridgeConfig, InProcessBridge};
use edgelimit_cli::redis_cluster::{self, RedisCluster};
use edgelimit_cli::redis_server::RedisServer;
use indicatif::ProgressBar;
use serde::{Deserialize, Serialize};

use crate::latency::{self, faster, RunStats};
use crate::redis_stats::CommandStats;
use crate::stack::{client_of, start_bridge, TOKEN};
use crate::support::{best_each, ratio, take_turns, Context};

/// Distinct identifiers the decisions cycle through; masters of the cluster; requests in flight.
pub const IDENTIFIERS: u64 = 1024;
const MASTERS: usize = 3;
const CONCURRENCIES: [u32; 2] = [16, 64];
/// Runs of each topology at each concurrency, taking turns (each goes first equally often); the fastest counts, as
/// in scenario 3's scoping runs.
const ROUNDS: u32 = 4;

/// Scenario 8's numbers: runs of `seconds` per topology and concurrency, `rounds` of them taking turns; each row
/// shows each topology's fastest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterScaling {
    /// What the decisions decide.
    pub limit: String,
    pub masters: usize,
    pub seconds: f64,
    pub rounds: u32,
    pub rows: Vec<ClusterRow>,
}

/// One concurrency through the bridge in front of one Redis and in front of the cluster: requests/s and their ratio
/// on this machine's shared cores; Redis µs per decision on the one Redis and on the masters (all their `EVALSHA`
/// time over all their calls); each master's share of the decisions, in port order; and the decisions/s of one
/// Redis core at its µs, and predicted for the cluster with a core per master (the busiest master bounding it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterRow {
    pub concurrency: u32,
    pub single: RunStats,
    pub cluster: RunStats,
    pub cluster_to_single: Option<f64>,
    pub single_micros: f64,
    pub cluster_micros: f64,
    pub master_shares: Vec<f64>,
    pub single_redis_bound: f64,
    pub cluster_redis_bound: f64,
}

/// A bridge in front of a topology, with what it takes to read that topology's counters.
struct Topology {
    bridge: InProcessBridge,
    limiter: Limiter,
    /// The ports of the Redis servers that decide (the masters).
    ports: Vec<u16>,
}

impl Topology {
    async fn start(redis_url: String, ports: Vec<u16>, quota: Quota) -> Result<Topology, String> {
        let bridge = start_bridge(BridgeConfig::new(redis_url, TOKEN)).await?;
        let limiter = Limiter::new(client_of(&bridge, TOKEN)?, "cluster-bench", quota)
            .and_then(|limiter| limiter.with_layout(KeyLayout::PerIdentifier))
            .context("invalid limiter")?;
        Ok(Topology { bridge, limiter, ports })
    }

    /// Decisions at `concurrency` for `run_time`, with Redis's counters zeroed first and read after.
    async fn run(&self, concurrency: u32, run_time: Duration) -> Result<(RunStats, Vec<CommandStats>), String> {
        for &port in &self.ports {
            redis_cluster::command(port, &["CONFIG", "RESETSTAT"]).await.context("CONFIG RESETSTAT failed")?;
        }
        let limiter = Arc::new(self.limiter.clone());
        let stats = latency::run_clients(concurrency, run_time, move |lane, n| {
            let limiter = limiter.clone();
            async move {
                let id = format!("user-{}", (u64::from(lane) * 7919 + n) % IDENTIFIERS);
                match limiter.limit(id.as_str(), 1).await {
                    Ok(decision) if decision.success => Ok(()),
                    Ok(decision) => {
                        Err(format!("a decision was denied under a limit meant to allow all: {decision:?}"))
                    }
                    Err(e) => Err(format!("a decision failed: {e}")),
                }
            }
        })
        .await?;
        let mut counters = Vec::new();
        for &port in &self.ports {
            let info =
                redis_cluster::command(port, &["INFO", "commandstats"]).await.context("INFO commandstats failed")?;
            let info: redis::InfoDict = redis::from_redis_value(info).context("INFO commandstats")?;
            counters.push(CommandStats::new(&info));
        }
        Ok((stats, counters))
    }
}

/// Runs scenario 8: starts its own Redis, cluster and bridges, and stops them before returning.
pub(crate) async fn run(quick: bool, progress: &ProgressBar) -> Result<ClusterScaling, String> {
    let seconds = if quick { 0.3 } else { 2.0 };
    let rounds = if quick { 1 } else { ROUNDS };
    progress.set_length(2 + (CONCURRENCIES.len() as u64) * u64::from(rounds) * 2);
    let quota = Quota::gcra(1_000_000_000, 1_000_000_000, Duration::from_secs(3600)).context("invalid quota")?;
    progress.set_message("starting one redis-server and a 3-master cluster");
    let redis = RedisServer::start().await.context("could not start redis-server")?;
    let cluster = RedisCluster::start(MASTERS, 0).await.context("could not start a Redis Cluster")?;
    progress.inc(1);
    let single = Topology::start(redis.url(), vec![redis.port()], quota).await?;
    let seeds: Vec<String> = cluster.ports().iter().map(|port| format!("127.0.0.1:{port}")).collect();
    let clustered = Topology::start(format!("redis+cluster://{}", seeds.join(",")), cluster.ports(), quota).await?;
    // Loads the script everywhere, so that no run meets NOSCRIPT: every identifier once, on each topology.
    progress.set_message("warming the script caches");
    for topology in [&single, &clustered] {
        for id in 0..IDENTIFIERS {
            topology.limiter.limit(format!("user-{id}").as_str(), 1).await.context("a warm-up decision failed")?;
        }
    }
    progress.inc(1);
    let run_time = Duration::from_secs_f64(seconds);
    let mut rows = Vec::new();
    for concurrency in CONCURRENCIES {
        let runs = take_turns(rounds as usize, 2, true, async |which, round| {
            let where_ = ["one Redis", "the cluster"][which];
            progress.set_message(format!("{where_} at {concurrency} in flight, round {}", round + 1));
            let measured = [&single, &clustered][which].run(concurrency, run_time).await;
            progress.inc(1);
            measured
        })
        .await?;
        let [single_run, cluster_run] = best_each(runs, |a, b| faster(&a.0, &b.0))?;
        rows.push(row(concurrency, single_run, cluster_run)?);
    }
    for bridge in [single.bridge, clustered.bridge] {
        if let Err(e) = bridge.stop().await {
            eprintln!("edgelimit-bench: a bridge did not stop cleanly: {e}");
        }
    }
    drop(cluster);
    drop(redis);
    Ok(ClusterScaling {
        limit: format!(
            "GCRA, {} per hour (every request allowed), per-identifier layout, {IDENTIFIERS} identifiers",
            quota.limit()
        ),
        masters: MASTERS,
        seconds,
        rounds,
        rows,
    })
}

/// A row from each topology's fastest run and its counters.
fn row(
    concurrency: u32,
    (single, single_counters): (RunStats, Vec<CommandStats>),
    (cluster, cluster_counters): (RunStats, Vec<CommandStats>),
) -> Result<ClusterRow, String> {
    let evalsha = |counters: &[CommandStats]| -> (f64, f64) {
        counters.iter().fold((0.0, 0.0), |(calls, usec), stats| {
            (calls + stats.calls("evalsha") as f64, usec + stats.usec("evalsha"))
        })
    };
    let (single_calls, single_usec) = evalsha(&single_counters);
    let (cluster_calls, cluster_usec) = evalsha(&cluster_counters);
    if single_calls == 0.0 || cluster_calls == 0.0 {
        return Err("Redis counted no EVALSHA: the decisions did not reach it".into());
    }
    let single_micros = single_usec / single_calls;
    let cluster_micros = cluster_usec / cluster_calls;
    let master_shares: Vec<f64> =
        (cluster_counters.iter()).map(|stats| stats.calls("evalsha") as f64 / cluster_calls).collect();
    let busiest = master_shares.iter().copied().fold(0.0, f64::max);
    Ok(ClusterRow {
        concurrency,
        cluster_to_single: ratio(cluster.per_second, single.per_second),
        single,
        cluster,
        single_micros,
        cluster_micros,
        master_shares,
        single_redis_bound: 1e6 / single_micros,
        // The busiest master saturates first: it takes `busiest` of all decisions at 1e6 / µs per second.
        cluster_redis_bound: 1e6 / cluster_micros / busiest,
    })
}
