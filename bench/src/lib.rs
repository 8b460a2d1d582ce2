//! # edgelimit-bench
//!
//! Every benchmark of the project in one run: edgelimit and its peers (`@upstash/ratelimit`'s scripts, Redisson's
//! `RRateLimiter` script, `INCR` as the floor, `redis-benchmark` as the ceiling) on one private `redis-server` and
//! bridge, so that their ratios can be compared. Redis's own counters measure a script's work; wall-clock timings
//! only what a caller sees.
//!
//! Scenarios: [`redis_cost`] (1 and 4), [`scaling`] (2), [`throughput`] (3, with `http_load`), [`accuracy`] (5),
//! [`node`] (3 and 6, the Node drivers), [`weighted`] (7), [`cluster`] (8). [`run`] runs them into
//! [`BenchResults`]; [`report`] writes the outputs.

pub mod accuracy;
pub mod cluster;
pub mod contender;
mod harness;
mod http_load;
pub mod latency;
pub mod machine;
pub mod node;
mod peers;
pub mod redis_cost;
pub mod redis_stats;
pub mod report;
pub mod scaling;
mod stack;
mod support;
pub mod throughput;
pub mod weighted;

pub use harness::{run, BenchConfig, BenchResults, Scenario};
