//! The run: the [`Scenario`]s a [`BenchConfig`] asks for, one after the other on one Redis and bridge, into
//! [`BenchResults`].

use std::path::PathBuf;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::node::{NodeRunner, WorkerReport};
use crate::progress::Progress;
use crate::stack::BenchStack;
use crate::{accuracy, cluster, machine, peers, redis_cost, scaling, throughput, weighted};

/// A part of the benchmark, runnable alone with `--only`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Scenario {
    /// Redis µs, commands and memory per decision, per algorithm, next to the peers' scripts and the INCR floor.
    RedisCost,
    /// The sliding log's Redis cost from 10 to 100 000 grants in the window, next to Redisson's script.
    Scaling,
    /// Decisions/s and latency through the bridge (Rust client, and the npm package from Node), next to
    /// `redis-benchmark`.
    Throughput,
    /// Over-admission: bursts around a window boundary, and concurrent clients.
    Accuracy,
    /// The Cloudflare Worker in local workerd: added latency, cold start, bundle size (Node).
    Worker,
    /// The permit log's Redis cost for grants of 1 to 10^6 permits, and for a denied request against 10^5 grants
    /// of mixed weights.
    Weighted,
    /// One Redis against a 3-master Redis Cluster behind the bridge: decisions/s and Redis µs per decision.
    Cluster,
}

impl Scenario {
    /// Every scenario, in the order a run takes them.
    pub const ALL: [Scenario; 7] = [
        Scenario::RedisCost,
        Scenario::Scaling,
        Scenario::Throughput,
        Scenario::Accuracy,
        Scenario::Worker,
        Scenario::Weighted,
        Scenario::Cluster,
    ];
}

/// What to run.
#[derive(Debug, Clone)]
pub struct BenchConfig {
    /// The repository checkout: the peers' scripts are read from its `node_modules/`, the Node drivers from its
    /// `bench/`.
    pub checkout: PathBuf,
    /// Small sizes everywhere (a smoke run of well under a minute) instead of the full measurements.
    pub quick: bool,
    /// The scenarios to run.
    pub scenarios: Vec<Scenario>,
    /// Run the Node drivers (the npm package's numbers in [`Scenario::Throughput`], and [`Scenario::Worker`]).
    pub node: bool,
    /// Draw a progress bar on stderr (pass whether stderr is a terminal).
    pub progress: bool,
}

impl BenchConfig {
    fn runs(&self, scenario: Scenario) -> bool {
        self.scenarios.contains(&scenario)
    }
}

/// Everything one run measured. Serialised as `results.json`; a scenario that did not run is `null`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BenchResults {
    /// What the numbers were measured on.
    pub machine: machine::Machine,
    /// Whether this was a `--quick` run (small sizes: for smoke tests, not for reading).
    pub quick: bool,
    /// Whether the Node drivers ran.
    pub node: bool,
    /// The scenarios asked for.
    pub scenarios: Vec<Scenario>,
    /// Wall-clock seconds the whole run took.
    pub seconds: f64,
    /// Scenario 1 (and 4, memory): Redis cost per decision.
    pub redis_cost: Option<redis_cost::RedisCost>,
    /// Scenario 2: sliding-log scaling.
    pub scaling: Option<scaling::Scaling>,
    /// Scenario 3: throughput and latency.
    pub throughput: Option<throughput::Throughput>,
    /// Scenario 5: over-admission.
    pub accuracy: Option<accuracy::Accuracy>,
    /// Scenario 6: the Worker (from `bench/worker.mjs`).
    pub worker: Option<WorkerReport>,
    /// Scenario 7: weighted decisions on the permit log.
    pub weighted: Option<weighted::Weighted>,
    /// Scenario 8: one Redis against a Redis Cluster; `None` in results written before it was measured.
    #[serde(default)]
    pub cluster: Option<cluster::ClusterScaling>,
}

/// Runs the scenarios `config` asks for on a private `redis-server` and bridge, which it stops before returning.
pub async fn run(config: &BenchConfig) -> Result<BenchResults, String> {
    let started = Instant::now();
    // Everything a scenario needs from the checkout is checked first: better to fail now than after minutes.
    let peers = if config.runs(Scenario::RedisCost) || config.runs(Scenario::Accuracy) {
        Some(peers::UpstashScripts::load(&config.checkout)?)
    } else {
        None
    };
    let wants_node = config.node && (config.runs(Scenario::Throughput) || config.runs(Scenario::Worker));
    let node = wants_node.then(|| NodeRunner::find(&config.checkout)).transpose()?;
    let machine = machine::Machine::describe(&config.checkout).await;
    let mut results = BenchResults {
        machine,
        quick: config.quick,
        node: config.node,
        scenarios: config.scenarios.clone(),
        seconds: 0.0,
        redis_cost: None,
        scaling: None,
        throughput: None,
        accuracy: None,
        worker: None,
        weighted: None,
        cluster: None,
    };
    let stack = BenchStack::start().await?;
    let progress = Progress::new(config.progress);
    let measured = run_scenarios(config, &stack, peers.as_ref(), node.as_ref(), &progress, &mut results).await;
    progress.finish();
    // Torn down whether or not a scenario failed.
    stack.stop().await;
    measured?;
    results.seconds = started.elapsed().as_secs_f64();
    Ok(results)
}

/// Runs each scenario asked for, filling its part of `results`.
async fn run_scenarios(
    config: &BenchConfig,
    stack: &BenchStack,
    peers: Option<&peers::UpstashScripts>,
    node: Option<&NodeRunner>,
    progress: &Progress,
    results: &mut BenchResults,
) -> Result<(), String> {
    let quick = config.quick;
    for scenario in Scenario::ALL.into_iter().filter(|&s| config.runs(s)) {
        // Each scenario starts on an empty Redis, so one's keys (100 000-grant logs) do not weigh on the next.
        stack.flush().await?;
        match scenario {
            Scenario::RedisCost => {
                let peers = peers.ok_or("the Redis cost scenario needs @upstash/ratelimit's scripts")?;
                results.redis_cost = Some(redis_cost::run(stack, peers, quick, progress).await?);
            }
            Scenario::Scaling => results.scaling = Some(scaling::run(stack, quick, progress).await?),
            Scenario::Throughput => {
                results.throughput = Some(throughput::run(stack, node, quick, progress).await?);
            }
            Scenario::Accuracy => {
                let peers = peers.ok_or("the accuracy scenario needs @upstash/ratelimit's scripts")?;
                results.accuracy = Some(accuracy::run(stack, peers, quick, progress).await?);
            }
            Scenario::Worker => {
                if let Some(node) = node {
                    progress.scenario("worker: node bench/worker.mjs", 1);
                    results.worker = Some(node.worker(stack, quick).await?);
                    progress.step();
                }
            }
            Scenario::Weighted => results.weighted = Some(weighted::run(stack, quick, progress).await?),
            Scenario::Cluster => results.cluster = Some(cluster::run(quick, progress).await?),
        }
    }
    Ok(())
}
