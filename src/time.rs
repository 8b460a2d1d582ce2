//! Waiting, on every target: tokio-free natively, `setTimeout` in wasm. Only the waiting calls read the local clock,
//! to bound the wait; decisions use the Redis server's.

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
/// `longest_sleep`) in between, and asking once more after the last wait. Returns the last answer.
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
    // A JS timer given more than 2^31 - 1 ms fires at once: a longer sleep is several.
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
