//! The run: the [`Scenario`]s a [`BenchConfig`] asks for, one after the other on one Redis and bridge, into
//! [`BenchResults`].

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::ValueEnum;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::{Deserialize, Serialize};

use crate::node::{NodeRunner, WorkerReport};
use crate::stack::BenchStack;
use crate::{accuracy, cluster, machine, neighbours, peers, redis_cost, scaling, throughput, weighted};

/// A part of the benchmark, runnable alone with `--only`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
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
    /// A victim's decision latency alone and while another client floods the bridge: bulk pipelines from its own
    /// token, many small ones from another.
    Neighbours,
}

/// Run the benchmarks: edgelimit next to @upstash/ratelimit, Redisson and the floor, on a private redis-server and
/// bridge. Run from the repository root; writes results.json and results.md to --out, and bench/RESULTS.md when --out
/// is the default.
#[derive(Debug, Clone, clap::Parser)]
#[command(name = "edgelimit-bench", version)]
pub struct BenchConfig {
    /// Small sizes everywhere: checks the harness in well under a minute; the numbers are not for reading.
    #[arg(long)]
    pub quick: bool,
    /// Only these scenarios (comma-separated); every one when none is named.
    #[arg(long = "only", value_delimiter = ',', value_enum)]
    pub scenarios: Vec<Scenario>,
    /// Skip what runs in Node: the npm package's numbers and the Worker.
    #[arg(long)]
    pub no_node: bool,
    /// Where to write the results.
    #[arg(long, default_value = crate::report::DEFAULT_OUT)]
    pub out: PathBuf,
    /// The repository checkout: the peers' scripts and the Node drivers are read from it.
    #[arg(skip)]
    pub checkout: PathBuf,
    /// Draw a progress bar on stderr.
    #[arg(skip)]
    pub progress: bool,
}

/// Everything one run measured, serialised as `results.json`; a scenario that did not run is `null`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BenchResults {
    pub machine: machine::Machine,
    pub quick: bool,
    /// Whether the Node drivers ran.
    pub node: bool,
    pub scenarios: Vec<Scenario>,
    /// Wall-clock seconds of the whole run.
    pub seconds: f64,
    /// Scenario 1 (and 4, memory).
    pub redis_cost: Option<redis_cost::RedisCost>,
    /// Scenario 2.
    pub scaling: Option<scaling::Scaling>,
    /// Scenario 3.
    pub throughput: Option<throughput::Throughput>,
    /// Scenario 5.
    pub accuracy: Option<accuracy::Accuracy>,
    /// Scenario 6 (`bench/worker.mjs`).
    pub worker: Option<WorkerReport>,
    /// Scenario 7.
    pub weighted: Option<weighted::Weighted>,
    /// Scenario 8.
    pub cluster: Option<cluster::ClusterScaling>,
    /// Scenario 9.
    pub neighbours: Option<neighbours::Neighbours>,
}

/// Runs the scenarios `config` asks for on a private `redis-server` and bridge, which it stops before returning.
pub async fn run(config: &BenchConfig) -> Result<BenchResults, String> {
    let started = Instant::now();
    let scenarios = match &config.scenarios[..] {
        [] => Scenario::value_variants().to_vec(),
        some => some.to_vec(),
    };
    let runs = |scenario| scenarios.contains(&scenario);
    // What the scenarios need from the checkout is checked first: better to fail now than after minutes.
    let peers = (runs(Scenario::RedisCost) || runs(Scenario::Accuracy))
        .then(|| peers::UpstashScripts::load(&config.checkout))
        .transpose()?;
    let wants_node = !config.no_node && (runs(Scenario::Throughput) || runs(Scenario::Worker));
    let node = wants_node.then(|| NodeRunner::find(&config.checkout)).transpose()?;
    let mut results = BenchResults {
        machine: machine::Machine::describe(&config.checkout).await,
        quick: config.quick,
        node: !config.no_node,
        scenarios: scenarios.clone(),
        ..BenchResults::default()
    };
    let stack = BenchStack::start().await?;
    let target = if config.progress { ProgressDrawTarget::stderr() } else { ProgressDrawTarget::hidden() };
    let style = ProgressStyle::with_template("[{elapsed_precise}] {bar:30} {pos}/{len} {prefix}: {msg}");
    let progress = ProgressBar::with_draw_target(Some(0), target).with_style(style.expect("a valid template"));
    // Redraws the elapsed time while one long step (a Node driver) runs.
    progress.enable_steady_tick(Duration::from_millis(250));
    let quick = config.quick;
    let measured = async {
        for scenario in Scenario::value_variants().iter().copied().filter(|&s| runs(s)) {
            progress.set_prefix(format!("{scenario:?}"));
            progress.set_position(0);
            // Each scenario starts on an empty Redis, so one's keys (100 000-grant logs) do not weigh on the next.
            stack.flush().await?;
            match scenario {
                Scenario::RedisCost => {
                    let peers = peers.as_ref().ok_or("no @upstash/ratelimit scripts")?;
                    results.redis_cost = Some(redis_cost::run(&stack, peers, quick, &progress).await?);
                }
                Scenario::Scaling => results.scaling = Some(scaling::run(&stack, quick, &progress).await?),
                Scenario::Throughput => {
                    results.throughput = Some(throughput::run(&stack, node.as_ref(), quick, &progress).await?)
                }
                Scenario::Accuracy => {
                    let peers = peers.as_ref().ok_or("no @upstash/ratelimit scripts")?;
                    results.accuracy = Some(accuracy::run(&stack, peers, quick, &progress).await?);
                }
                Scenario::Worker => {
                    if let Some(node) = &node {
                        progress.set_length(1);
                        progress.set_message("node bench/worker.mjs");
                        results.worker = Some(node.run("bench/worker.mjs", &stack, quick).await?);
                    }
                }
                Scenario::Weighted => results.weighted = Some(weighted::run(&stack, quick, &progress).await?),
                Scenario::Cluster => results.cluster = Some(cluster::run(quick, &progress).await?),
                Scenario::Neighbours => results.neighbours = Some(neighbours::run(&stack, quick, &progress).await?),
            }
        }
        Ok::<_, String>(())
    }
    .await;
    progress.finish_and_clear();
    // Torn down whether or not a scenario failed.
    stack.stop().await;
    measured?;
    results.seconds = started.elapsed().as_secs_f64();
    Ok(results)
}
