//! # edgelimit-cli
//!
//! The native side of edgelimit, on the same core as the wasm build: the Upstash-compatible REST bridge over a real
//! Redis (for local development and self-hosting), the local dev stack, and the `edgelimit` binary's commands.
//!
//! ## Layout
//!
//! | module | concept |
//! |---|---|
//! | [`admin`] | the operator commands on the Redisson-layout limiter, and what every command shares |
//! | [`limiter_commands`] | the limiter commands for the algorithm family (`--algorithm`), and `configure` |
//! | [`bridge`] | the REST bridge: routes, tokens and profiles, JSON<->RESP, the Redis links (one Redis or a cluster) |
//! | [`redis_server`] | a real `redis-server` child process on a loopback port (dev stack and tests) |
//! | [`redis_cluster`] | a real Redis Cluster of such processes (dev stack, tests, benchmarks) |
//! | [`dev`] | `edgelimit dev`: Redis + bridge (+ the playground and the Worker) in one command |
//! | [`doctor`] | `edgelimit doctor`: can this endpoint hold limits safely (eviction policy, scripts, clock) |
//! | [`playground`] | the playground page in the dev stack: `www/` and the npm package it imports, served locally |
//! | [`worker_dev`] | the Worker in the dev stack: `wrangler dev` in front of a demo origin |
//! | [`signals`] | graceful shutdown on SIGINT/SIGTERM |
//! | [`runtime`] | the async runtime's worker threads and the allocator |

#![warn(missing_docs)]

/// Prints a line to stdout, ignoring a closed pipe (`edgelimit dev | head` must not panic).
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

pub mod admin;
pub mod bridge;
pub mod dev;
pub mod doctor;
pub mod limiter_commands;
pub mod playground;
pub mod redis_cluster;
pub mod redis_server;
pub mod runtime;
pub mod signals;
pub mod worker_dev;
