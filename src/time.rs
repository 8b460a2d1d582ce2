//! Waiting, on every target: tokio-free natively, `setTimeout` in wasm (Workers, Node, browsers).
//!
//! Only [`acquire`](crate::sliding_log::RateLimiter::acquire) waits. Decisions never read the caller's clock: they
//! use the Redis server's, unless a caller passes an explicit time.

use std::time::Duration;

pub use web_time::Instant;

/// Completes after `duration`.
pub async fn sleep(duration: Duration) {
    futures_timer::Delay::new(duration).await
}
