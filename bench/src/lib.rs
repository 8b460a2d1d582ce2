//! # edgelimit-bench
//!
//! The benchmark driver: every benchmark of the project in one run, on one Redis, with the peers next to edgelimit.
//!
//! Why one harness: numbers measured on different days, machines or Redis instances cannot be compared, and a
//! shared 2-core machine moves absolute numbers from one run to the next. So each scenario runs edgelimit and the
//! peers it competes with (`@upstash/ratelimit`'s scripts, Redisson's `RRateLimiter` script, a plain `INCR` as the
//! floor, `redis-benchmark` as the ceiling) in the same process, against the same private `redis-server` and the
//! same in-process bridge, and reports ratios next to the absolute numbers. Redis's own counters (`INFO
//! commandstats`, `MEMORY USAGE`) measure the work a script does; wall-clock timings only measure what a caller
//! sees (throughput, latency).
//!
//! ## Layout
//!
//! | module | concept |
//! |---|---|
//! | [`redis_cost`] | Redis µs, commands and memory per decision, per algorithm, per contender (scenarios 1 and 4) |
//! | [`scaling`] | the sliding log's cost as its log grows, against Redisson's script (scenario 2) |
//! | [`throughput`] | decisions/s and latency through the bridge, `redis-benchmark` as the ceiling (scenario 3) |
//! | [`accuracy`] | over-admission: boundary bursts, concurrent clients with skewed clocks (scenario 5) |
//! | [`weighted`] | the permit log's cost by grant weight, and a denied request's wait over 10^5 grants (scenario 7) |
//! | [`latency`] | what a caller sees of a run: requests/s, median and p99 latency ([`latency::RunStats`]) |
//! | [`node`] | the Node drivers `bench/npm.mjs` and `bench/worker.mjs` (scenarios 3 and 6) |
//! | [`machine`] | what the numbers were measured on |
//! | [`report`] | `results.json`, `results.md`, `plot.svg` and `bench/RESULTS.md` |
//! | [`contender`], `peers` | who is measured: edgelimit's limiters, the peers' scripts as their libraries send them |
//! | [`redis_stats`] | Redis's own counters: `INFO commandstats`, `MEMORY USAGE` |
//! | `stack`, `progress`, `plot` | the private Redis + bridge, the progress bar, the hand-written SVG |

#![warn(missing_docs)]

pub mod accuracy;
pub mod contender;
pub mod latency;
pub mod machine;
pub mod node;
mod peers;
mod plot;
mod progress;
pub mod redis_cost;
pub mod redis_stats;
pub mod report;
pub mod scaling;
mod stack;
pub mod throughput;
pub mod weighted;

use std::fmt::Display;
use std::path::PathBuf;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use self::node::{NodeRunner, WorkerReport};
use self::progress::Progress;
use self::stack::BenchStack;

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
}

impl Scenario {
    /// Every scenario, in the order a run takes them.
    pub const ALL: [Scenario; 6] = [
        Scenario::RedisCost,
        Scenario::Scaling,
        Scenario::Throughput,
        Scenario::Accuracy,
        Scenario::Worker,
        Scenario::Weighted,
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
        }
    }
    Ok(())
}

/// Unix ms where explicit-time workloads start: a whole second, so that windows begin where the workloads expect.
const EXPLICIT_T0: u64 = 1_700_000_000_000;

/// `numerator / denominator` when that is a number (the denominator measured above zero).
fn ratio(numerator: f64, denominator: f64) -> Option<f64> {
    let ratio = numerator / denominator;
    (denominator > 0.0 && ratio.is_finite()).then_some(ratio)
}

/// The next number of the splitmix64 sequence from `state`: seeded draws (clock skews, grant weights) that every
/// run repeats, with no dependency for a dozen lines.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Adds what was being done to an error, so that a message says what failed, not only why.
trait Context<T> {
    fn context(self, doing: impl Display) -> Result<T, String>;
}

impl<T, E: Display> Context<T> for Result<T, E> {
    fn context(self, doing: impl Display) -> Result<T, String> {
        self.map_err(|e| format!("{doing}: {e}"))
    }
}
