//! # edgelimit
//!
//! Exact distributed rate limiting for the edge. Every decision is one HTTP round trip: an atomic Lua script sent
//! with `EVALSHA` (`EVAL` on `NOSCRIPT`) to an Upstash-compatible Redis REST endpoint, so every edge location shares
//! one exact limit, timed by the Redis server's clock. The crate compiles natively (the CLI, the tests) and to
//! `wasm32-unknown-unknown` (the npm package, the Cloudflare Worker); the REST bridge lives in the CLI crate.
//!
//! ## Layout
//!
//! | module | concept |
//! |---|---|
//! | [`redisson`] | Redisson's `RRateLimiter` layout (a named sliding log shared with Java services), fixed |
//! | [`limit`] | the algorithm family, several limits in one round trip, key layouts, reserved permits, the model |
//! | [`gate`] | the Cloudflare Worker's decisions: rules, request matching, client keys, RateLimit fields |
//! | [`ratelimit`] | the npm package's `Ratelimit`: limits per identifier, block cache, failure policy |
//! | [`block_cache`] | denials remembered until their `retry_after`, so repeated denied requests cost no round trip |
//! | [`decision`] | a decision as a value: `{success, limit, remaining, reset, retry_after}` |
//! | [`receipt`] | what a grant returns and a refund names: `<permits>:<mark>` |
//! | [`identifier`] | identifiers keyed by their exact bytes: raw when short text, else SHA-256 |
//! | [`duration`] | human durations: `"10 s"`, `"250ms"`, `"1m"` |
//! | [`time`] | waiting on every target (`acquire`) |
//! | `unique_id` | ids for grants and leases; unguessable ids for local receipts |
//! | `rare_paths` | paths most calls never take, compiled apart on wasm (cold start compiles what it runs) |
//! | `reader` | configuration read into checked types (JS options, JSON rules), with messages naming the field |
//! | [`error`] | the one error enum, with stable `EDGELIMIT_…` codes |
//! | [`value`] | Redis replies as the REST protocol carries them, and their checked decoding |
//! | [`rest`] | the REST client: command, pipeline, multi-exec, timeouts, scripts by SHA1 (`EVALSHA`, `EVAL` on `NOSCRIPT`), coalescing concurrent commands and decisions |
//! | [`lua`] | every script Redis runs, built from `lua/` |
//! | `wasm` (wasm32 only) | the wasm-bindgen surface that JavaScript sees |
//!
//! ## Example
//!
//! ```no_run
//! # async fn demo() -> edgelimit::Result<()> {
//! use edgelimit::{Command, RestClient};
//! let client = RestClient::new("http://127.0.0.1:8079", "dev-token")?;
//! let pong = client.command(&Command::new("PING")).await?.into_string()?;
//! assert_eq!(pong, "PONG");
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

pub mod block_cache;
pub mod decision;
pub mod duration;
pub mod error;
pub mod gate;
pub mod identifier;
pub mod limit;
pub mod lua;
mod rare_paths;
pub mod ratelimit;
mod reader;
pub mod receipt;
pub mod redisson;
pub mod rest;
pub mod time;
mod unique_id;
pub mod value;

#[cfg(target_arch = "wasm32")]
mod wasm;

pub use decision::Decision;
pub use duration::parse_duration;
pub use error::{Error, Result};
pub use identifier::Identifier;
pub use limit::{Algorithm, Decisions, KeyLayout, Lease, Limiter, Quota, Receipt};
pub use redisson::{Mode, Rate, RateConfig, RedissonLimiter};
pub use rest::Script;
pub use rest::{Command, RestClient};
pub use value::Value;

// The guides' Rust examples, compiled by `cargo test --doc` so that they stay true.
#[cfg(doctest)]
#[doc = include_str!("../docs/rust.md")]
struct RustClientGuide;
#[cfg(doctest)]
#[doc = include_str!("../docs/algorithms.md")]
struct AlgorithmsGuide;
#[cfg(doctest)]
#[doc = include_str!("../docs/redisson.md")]
struct RedissonGuide;
