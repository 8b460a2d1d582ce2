//! Fair sharing: what one token sends must not hold up another's decisions (the bound: docs/bridge.md).
//!
//! Each request takes a [`Share`] before it runs. A bulk request, a body above [`SMALL`] or more than
//! [`BULK_COMMANDS`] commands, takes a turn: one per token and [`BULK_AT_ONCE`] in all, in arrival order. It runs on
//! its profile's [`Lane::Bulk`] connection, so Redis serves the main lane's commands between its own instead of after
//! them, and is parsed and rendered off the runtime's threads. On the main lane one token's requests in flight hold
//! at most [`MAIN_BYTES_PER_TOKEN`] of bodies, so no token queues more than that in front of another's decisions.
//! A request that waits longer than [`SHARE_WAIT`] gets HTTP 429 with `Retry-After` (never 503, which clients may
//! take for an outage and fail open).

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

/// The most request body bytes one token has in flight on the main lane (some 1,000 decisions).
pub const MAIN_BYTES_PER_TOKEN: usize = 128 * 1024;

/// How long a request may wait for its share.
pub const SHARE_WAIT: Duration = Duration::from_secs(5);

/// The shares: one bulk queue for all, and per token a bulk queue and its main lane's bytes. Only valid tokens
/// reach here, so the map holds at most one entry per token the bridge has accepted.
pub(super) struct FairShare {
    bulk: Arc<Semaphore>,
    tokens: Mutex<HashMap<TokenDigest, TokenShares>>,
}

#[derive(Clone)]
struct TokenShares {
    bulk: Arc<Semaphore>,
    main_bytes: Arc<Semaphore>,
}

/// A request's share: its lane, and what it holds until dropped.
pub(super) struct Share {
    lane: Lane,
    _held: Vec<OwnedSemaphorePermit>,
}

impl Share {
    /// The connection the request runs on.
    pub(super) fn lane(&self) -> Lane {
        self.lane
    }

    /// Whether the request is bulk (parsed and rendered off the runtime).
    pub(super) fn is_bulk(&self) -> bool {
        self.lane == Lane::Bulk
    }
}

impl FairShare {
    pub(super) fn new() -> Self {
        FairShare { bulk: Arc::new(Semaphore::new(BULK_AT_ONCE)), tokens: Mutex::new(HashMap::new()) }
    }

    fn of(&self, token: &TokenDigest) -> TokenShares {
        let mut tokens = self.tokens.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let shares = tokens.entry(*token).or_insert_with(|| TokenShares {
            bulk: Arc::new(Semaphore::new(1)),
            main_bytes: Arc::new(Semaphore::new(MAIN_BYTES_PER_TOKEN)),
        });
        shares.clone()
    }

    /// The share of a request of `bytes` from `token`: a bulk turn when above [`SMALL`], else its main lane bytes.
    pub(super) async fn share(&self, token: &TokenDigest, bytes: usize) -> Result<Share, Failure> {
        if bytes as u64 > SMALL {
            return self.bulk_turn(token).await;
        }
        let main_bytes = self.of(token).main_bytes;
        let permits = u32::try_from(bytes.max(1)).unwrap_or(u32::MAX);
        let held = tokio::time::timeout(SHARE_WAIT, main_bytes.acquire_many_owned(permits)).await;
        match held {
            Ok(Ok(permit)) => Ok(Share { lane: Lane::Main, _held: vec![permit] }),
            _ => Err(waited(&format!("this token's other requests in flight hold {MAIN_BYTES_PER_TOKEN} bytes"))),
        }
    }

    /// Waits for `token`'s turn to run a bulk request: first behind its own, then behind every token's.
    pub(super) async fn bulk_turn(&self, token: &TokenDigest) -> Result<Share, Failure> {
        let (mine, all) = (self.of(token).bulk, self.bulk.clone());
        let turn = tokio::time::timeout(SHARE_WAIT, async move {
            let mine = mine.acquire_owned().await.ok()?;
            let all = all.acquire_owned().await.ok()?;
            Some(Share { lane: Lane::Bulk, _held: vec![mine, all] })
        });
        turn.await.ok().flatten().ok_or_else(|| {
            waited(&format!(
                "this request is bulk (a body above {SMALL} bytes or more than {BULK_COMMANDS} commands) and other \
                 bulk requests ran"
            ))
        })
    }
}

/// The 429 of a request that waited [`SHARE_WAIT`] for its share because of `why`.
fn waited(why: &str) -> Failure {
    Failure::new(
        StatusCode::TOO_MANY_REQUESTS,
        format!("{why} for the {} s this request waited: retry shortly, or send less at once", SHARE_WAIT.as_secs()),
    )
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
        Failure::new(StatusCode::INTERNAL_SERVER_ERROR, format!("the bridge failed on this request (a bug): {e}"))
    })
}
