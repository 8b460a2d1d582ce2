//! Waiting, on every target: tokio-free natively, `setTimeout` in wasm (Workers, Node, browsers).
//!
//! Only the waiting calls ([`acquire`](crate::sliding_log::RateLimiter::acquire),
//! [`block_until_ready`](crate::limit::Limiter::block_until_ready)) read the local clock, and only to bound the wait.
//! Decisions never read it: they use the Redis server's, unless a caller passes an explicit time.

use std::future::Future;
use std::time::Duration;

pub use web_time::Instant;

use crate::decision::Decision;
use crate::error::Result;

/// Asks `attempt` until it grants or `timeout` runs out, sleeping each decision's `retry_after` (at most
/// `longest_sleep`) in between. It never waits past the timeout and never gives up while time remains: after the last
/// wait it asks once more. Returns the last decision (denied if the timeout ran out).
pub(crate) async fn retry_until_granted<F: Future<Output = Result<Decision>>>(
    timeout: Duration,
    longest_sleep: Duration,
    mut attempt: impl FnMut() -> F,
) -> Result<Decision> {
    let deadline = Instant::now() + timeout;
    loop {
        let decision = attempt().await?;
        let now = Instant::now();
        if decision.success || now >= deadline {
            return Ok(decision);
        }
        sleep(
            Duration::from_millis(decision.retry_after)
                .min(deadline - now)
                .min(longest_sleep),
        )
        .await;
    }
}

/// Completes after `duration`.
pub async fn sleep(duration: Duration) {
    futures_timer::Delay::new(duration).await
}
