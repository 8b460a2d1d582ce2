//! Every benchmark of the project in one run, edgelimit next to its peers on one private Redis and bridge (see
//! `report.md` for what each scenario measures): [`run`] runs them into [`BenchResults`], [`report`] writes them.

pub mod accuracy;
pub mod cluster;
pub mod contender;
mod harness;
mod http_load;
pub mod latency;
pub mod machine;
pub mod neighbours;
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
