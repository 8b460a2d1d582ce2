//! Waiting, on every target: tokio-free natively, `setTimeout` in wasm (Workers, Node, browsers).
//!
//! Only the waiting calls ([`acquire`](crate::redisson::RedissonLimiter::acquire),
//! [`block_until_ready`](crate::limit::Limiter::block_until_ready)) read the local clock, and only to bound the wait.
//! Decisions never read it: they use the Redis server's, unless a caller passes an explicit time.

use std::future::Future;
use std::time::Duration;

pub use web_time::Instant;

use crate::decision::Decision;
use crate::error::Result;

/// The answer to one attempt of a waiting call.
pub(crate) trait Attempt {
    /// Milliseconds to wait before asking again; `None` when the answer is final (granted, or unanswerable).
    fn ask_again_after(&self) -> Option<u64>;
}

impl Attempt for Decision {
    fn ask_again_after(&self) -> Option<u64> {
        (!self.success).then_some(self.retry_after)
    }
}

/// Asks `attempt` until its answer is final or `timeout` runs out, sleeping each answer's wait (at most
/// `longest_sleep`) in between. It never waits past the timeout and never gives up while time remains: after the last
/// wait it asks once more. Returns the last answer (denied if the timeout ran out).
pub(crate) async fn retry_until_granted<T: Attempt, F: Future<Output = Result<T>>>(
    timeout: Duration,
    longest_sleep: Duration,
    mut attempt: impl FnMut() -> F,
) -> Result<T> {
    let deadline = Instant::now() + timeout;
    loop {
        let answer = attempt().await?;
        let now = Instant::now();
        let Some(wait) = answer.ask_again_after().filter(|_| now < deadline) else {
            return Ok(answer);
        };
        sleep(Duration::from_millis(wait).min(deadline - now).min(longest_sleep)).await;
    }
}

/// Completes after `duration`.
pub async fn sleep(duration: Duration) {
    // A JS timer waits at most 2^31 - 1 ms and fires at once when given more (futures-timer passes the ms on), which
    // would turn a long wait into a loop asking Redis a thousand times a second: a longer sleep is several.
    let mut left = duration;
    loop {
        let step = left.min(crate::rest::MAX_TIMEOUT);
        futures_timer::Delay::new(step).await;
        left -= step;
        if left.is_zero() {
            return;
        }
    }
}
