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
//! | `harness` | the run ([`run`]): the [`Scenario`]s a [`BenchConfig`] asks for, on one stack, into [`BenchResults`] |
//! | [`redis_cost`] | Redis µs, commands and memory per decision, per algorithm, per contender (scenarios 1 and 4) |
//! | [`scaling`] | the sliding log's cost as its log grows, against Redisson's script (scenario 2) |
//! | [`throughput`] | decisions/s and latency through the bridge, `redis-benchmark` as the ceiling (scenario 3) |
//! | [`accuracy`] | over-admission: boundary bursts, concurrent clients with skewed clocks (scenario 5) |
//! | [`weighted`] | the permit log's cost by grant weight, and a denied request's wait over 10^5 grants (scenario 7) |
//! | [`cluster`] | one Redis against a 3-master Redis Cluster behind the bridge: decisions/s, Redis µs per decision (scenario 8) |
//! | [`latency`] | what a caller sees of a run: requests/s, median and p99 latency ([`latency::RunStats`]) |
//! | `http_load` | HTTP load from outside the process: `wrk`, and the hello-world server it is compared with (scenario 3) |
//! | [`node`] | the Node drivers `bench/npm.mjs` and `bench/worker.mjs` (scenarios 3 and 6) |
//! | [`machine`] | what the numbers were measured on |
//! | [`report`] | `results.json`, `results.md`, `plot.svg` and `bench/RESULTS.md` |
//! | [`contender`], `peers` | who is measured: edgelimit's limiters, the peers' scripts as their libraries send them |
//! | [`redis_stats`] | Redis's own counters: `INFO commandstats`, `MEMORY USAGE` |
//! | `stack`, `progress`, `plot` | the private Redis + bridges, the progress bar, `plot.svg` (plotters) |
//! | `support` | helpers every scenario shares: error context, ratios, seeded draws, the explicit-time origin |

#![warn(missing_docs)]

pub mod accuracy;
pub mod cluster;
pub mod contender;
mod harness;
mod http_load;
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
mod support;
pub mod throughput;
pub mod weighted;

pub use harness::{run, BenchConfig, BenchResults, Scenario};
