//! # edgelimit-cli
//!
//! The native side of edgelimit, on the same core as the wasm build: the Upstash-compatible REST bridge over a real
//! Redis (for local development and self-hosting), the local dev stack, and the `edgelimit` binary's commands.
//!
//! ## Layout
//!
//! | module | concept |
//! |---|---|
//! | [`admin`] | the operator commands on every limiter: set-rate (the Redisson layout), configure, acquire, permits, config, release, delete |
//! | [`family`] | the same commands for the algorithm family (`--algorithm`), and `configure` to store a quota in Redis |
//! | [`bridge`] | the REST bridge: routes, tokens and their profiles (the bridge's fence, a Redis ACL user per profile), JSON<->RESP, script shebang compatibility, the Redis links (one Redis, or a Redis Cluster routed by key slot), SCRIPT KILL of a script that runs too long |
//! | [`redis_server`] | a real `redis-server` child process on a loopback port (dev stack and tests) |
//! | [`redis_cluster`] | a real Redis Cluster of such processes, joined by `redis-cli --cluster create` (dev stack, tests, benchmarks) |
//! | [`dev`] | `edgelimit dev`: Redis + bridge (+ the playground and the Worker) in one command |
//! | [`doctor`] | `edgelimit doctor`: can this endpoint hold limits safely (eviction policy, scripts, clock) |
//! | [`playground`] | the playground page in the dev stack: `www/` and the npm package it imports, served locally |
//! | [`worker_dev`] | the Worker in the dev stack: `wrangler dev` in front of a demo origin |
//! | [`signals`] | graceful shutdown on SIGINT/SIGTERM |
//! | [`runtime`] | how the binary runs: the async runtime's worker threads (`--threads`, half the cores by default), the allocator (mimalloc) |

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
pub mod family;
pub mod playground;
pub mod redis_cluster;
pub mod redis_server;
pub mod runtime;
pub mod signals;
pub mod worker_dev;
