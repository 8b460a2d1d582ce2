//! Fair sharing: what one token sends must not hold up another's decisions (the bound: docs/bridge.md).
//!
//! A bulk request, a body above [`SMALL`] or more than [`BULK_COMMANDS`] commands, takes a turn: one per token and
//! [`BULK_AT_ONCE`] in all, in arrival order. It runs on its profile's [`Lane::Bulk`] connection, so Redis serves the
//! main lane's commands between its own instead of after them, and is parsed and rendered off the runtime's threads.
//! A request that waits longer than [`BULK_WAIT`] for its turn gets HTTP 429 with `Retry-After` (never 503, which
//! clients may take for an outage and fail open).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::StatusCode;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

pub use super::memory_budget::SMALL;
pub use super::redis_link::Lane;
use super::tokens::TokenDigest;
use super::Failure;

/// Requests of more commands than this are bulk, whatever their size.
pub const BULK_COMMANDS: usize = 64;

/// How many bulk requests run at once, all tokens together.
pub const BULK_AT_ONCE: usize = 1;

/// How long a bulk request may wait for its turn.
pub const BULK_WAIT: Duration = Duration::from_secs(5);

/// The turns: one queue for all, one per token. Only valid tokens reach here, so the map holds at most one entry per
/// token the bridge has accepted.
pub(super) struct FairShare {
    all: Arc<Semaphore>,
    tokens: Mutex<HashMap<TokenDigest, Arc<Semaphore>>>,
}

/// A bulk request's turn, given back when dropped.
pub(super) struct Turn {
    _token: OwnedSemaphorePermit,
    _all: OwnedSemaphorePermit,
}

impl FairShare {
    pub(super) fn new() -> Self {
        FairShare {
            all: Arc::new(Semaphore::new(BULK_AT_ONCE)),
            tokens: Mutex::new(HashMap::new()),
        }
    }

    /// Waits for `token`'s turn to run a bulk request: first behind its own, then behind every token's.
    pub(super) async fn turn(&self, token: &TokenDigest) -> Result<Turn, Failure> {
        let queue = {
            let mut tokens = self.tokens.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            tokens
                .entry(*token)
                .or_insert_with(|| Arc::new(Semaphore::new(1)))
                .clone()
        };
        let all = self.all.clone();
        let waited = tokio::time::timeout(BULK_WAIT, async move {
            let token = queue.acquire_owned().await.ok()?;
            let all = all.acquire_owned().await.ok()?;
            Some(Turn {
                _token: token,
                _all: all,
            })
        });
        waited.await.ok().flatten().ok_or_else(|| {
            Failure::new(
                StatusCode::TOO_MANY_REQUESTS,
                format!(
                    "this request is bulk (a body above {SMALL} bytes or more than {BULK_COMMANDS} commands) and \
                     waited {} s for its turn behind other bulk requests: retry shortly, or send fewer at once",
                    BULK_WAIT.as_secs()
                ),
            )
        })
    }
}

/// Runs `work` on a blocking thread when `bulk`, so a long parse or render leaves the runtime's threads to the
/// other requests; inline otherwise.
pub(super) async fn off_runtime<T: Send + 'static>(
    bulk: bool,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Failure> {
    if !bulk {
        return Ok(work());
    }
    tokio::task::spawn_blocking(work).await.map_err(|e| {
        Failure::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("the bridge failed on this request (a bug): {e}"),
        )
    })
}
