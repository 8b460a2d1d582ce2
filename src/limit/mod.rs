//! The algorithm family (token bucket, fixed window, sliding window counter, GCRA, concurrency, sliding log), each
//! decided by one atomic script on the Redis server's clock, and several limits decided together in one round trip.
//!
//! A [`Limiter`] is a named limit whose [`Quota`] is given in code or stored in Redis (changed at runtime). Each
//! identifier has its own state key; all keys share the hash tag `{<name>}` (see [`KeyLayout`]). A denial is a
//! [`Decision`] with the exact `retry_after`, never an error; errors are for what no waiting fixes.
//! ```no_run
//! # async fn demo() -> edgelimit::Result<()> {
//! use std::time::Duration;
//! use edgelimit::{limit, Limiter, Quota, RestClient};
//! let client = RestClient::new("http://127.0.0.1:8079", "dev-token")?;
//! let per_ip = Limiter::new(client.clone(), "ip", Quota::gcra(10, 10, Duration::from_secs(1))?)?;
//! let per_key = Limiter::new(client, "key", Quota::fixed_window(1000, Duration::from_secs(60))?)?;
//! // Both limits in one round trip; a denial by either consumes from neither.
//! let decisions = limit::limit_all(&[per_ip.request("203.0.113.7", 1), per_key.request("key-42", 1)]).await?;
//! if !decisions.success {
//!     println!("retry in {} ms", decisions.retry_after());
//! }
//! # Ok(()) }
//! ```

mod across_slots;
mod batch;
mod layout;
pub mod memory;
pub mod model;
mod quota;
mod reserved;
pub(crate) mod slot;
pub mod state;
mod stored_copy;

use std::time::Duration;

pub use self::across_slots::{limit_all_across_slots, AcrossSlots, FailedGroup, GiveBack};
use self::batch::{Batch, Operation};
pub use self::layout::KeyLayout;
pub use self::memory::{Clock, Memory};
pub use self::quota::{Algorithm, Quota};
pub use self::reserved::{Reserved, ReservedAll, ReservedDecision, ReservedDecisions};
pub use self::state::{state_all, HeldGrant, LimitState, StateDetail};
use self::stored_copy::StoredCopy;
use crate::decision::Decision;
use crate::error::{Error, Result};
use crate::identifier::Identifier;
pub use crate::receipt::{Lease, Receipt};
pub use crate::rest::hash_slot;
use crate::rest::{Command, RestClient};
use crate::rest::{Script, ScriptCall};
use crate::time::retry_until_granted;

/// The default key prefix.
pub const DEFAULT_PREFIX: &str = "edgelimit";

/// A handle on one named limit. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Limiter {
    client: RestClient,
    prefix: String,
    name: String,
    /// `None`: read from the config hash at every decision.
    quota: Option<Quota>,
    layout: KeyLayout,
    /// A stored quota's copy, in the per-identifier layout (see `stored_copy.rs`); shared by clones.
    stored_copy: StoredCopy,
    now_ms: Option<u64>,
}

impl Limiter {
    /// A limiter `name` with a quota fixed in code.
    pub fn new(client: RestClient, name: &str, quota: Quota) -> Result<Limiter> {
        Limiter::with_quota(client, name, Some(quota))
    }

    /// A limiter `name` whose quota is stored in Redis ([`Limiter::store_quota`], `edgelimit configure`), so a change
    /// applies at once everywhere. Deciding before a quota is stored is [`Error::NotInitialized`].
    pub fn stored(client: RestClient, name: &str) -> Result<Limiter> {
        Limiter::with_quota(client, name, None)
    }

    fn with_quota(client: RestClient, name: &str, quota: Option<Quota>) -> Result<Limiter> {
        slot::check_tag_part("limiter name", name)?;
        Ok(Limiter {
            client,
            prefix: DEFAULT_PREFIX.to_owned(),
            name: name.to_owned(),
            quota,
            layout: KeyLayout::default(),
            stored_copy: StoredCopy::default(),
            now_ms: None,
        })
    }

    /// Uses `prefix` instead of `edgelimit` before every key.
    pub fn with_prefix(mut self, prefix: &str) -> Result<Limiter> {
        slot::check_tag_part("key prefix", prefix)?;
        self.prefix = prefix.to_owned();
        Ok(self)
    }

    /// Keeps state in `layout` instead of [`KeyLayout::PerLimiter`], e.g. [`KeyLayout::PerIdentifier`] for a Redis
    /// Cluster, where a stored quota is read by the client and a change reaches it one decision late.
    pub fn with_layout(mut self, layout: KeyLayout) -> Result<Limiter> {
        self.layout = layout;
        Ok(self)
    }

    /// The quota a decision uses: the one in code, or in the per-identifier layout the copy of the stored one.
    pub(crate) fn quota_to_send(&self) -> Option<Quota> {
        match self.quota {
            Some(quota) => Some(quota),
            None if stored_copy::uses_copy(self) => self.stored_copy.get(),
            None => None,
        }
    }

    /// The layout its state keys follow.
    pub fn layout(&self) -> KeyLayout {
        self.layout
    }

    /// Decides at this explicit time (unix ms) instead of the Redis server's, for deterministic tests. Such keys live a
    /// minute longer, since that clock may lag Redis's.
    pub fn at(mut self, now_ms: u64) -> Limiter {
        self.now_ms = Some(now_ms);
        self
    }

    /// The limiter's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The quota given in code; `None` for a stored one.
    pub fn quota(&self) -> Option<Quota> {
        self.quota
    }

    /// The key of the stored config hash: `<prefix>:{<name>}`.
    pub fn config_key(&self) -> String {
        format!("{}:{{{}}}", self.prefix, self.name)
    }

    /// The state key of identifier `id`: `<prefix>:{<name>}:<key part>` in the default layout (see [`Identifier`] and
    /// [`KeyLayout`]).
    pub fn state_key<'i>(&self, id: impl Into<Identifier<'i>>) -> String {
        self.layout.state_key(&self.prefix, &self.name, &id.into())
    }

    /// A request of `permits` for identifier `id`, to decide with others in [`limit_all`].
    pub fn request<'a>(&'a self, id: impl Into<Identifier<'a>>, permits: u32) -> LimitRequest<'a> {
        LimitRequest { limiter: self, id: id.into(), permits }
    }

    /// Takes `permits` for `id` if the limit allows it now. A grant carries its [`Receipt`] in [`Decision::receipt`].
    pub async fn limit<'i>(&self, id: impl Into<Identifier<'i>>, permits: u32) -> Result<Decision> {
        let id = id.into();
        Ok(single(limit_all(&[self.request(&id, permits)]).await?))
    }

    /// Takes `permits` for `id`, sleeping the exact `retry_after` between attempts (20 ms at most for a concurrency
    /// limit, whose leases often free early) until `timeout`. Returns the last decision.
    pub async fn block_until_ready<'i>(
        &self,
        id: impl Into<Identifier<'i>>,
        permits: u32,
        timeout: Duration,
    ) -> Result<Decision> {
        let id = id.into();
        if self.now_ms.is_some() {
            return Err(Error::InvalidArgument(
                "block_until_ready waits in real time, so it cannot run at an explicit time; use limit".into(),
            ));
        }
        retry_until_granted(timeout, longest_sleep([self]), || self.limit(&id, permits)).await
    }

    /// Refuses zero permits, and more than a quota in code can ever grant, before any I/O: sent to a store that is
    /// down, the caller's mistake would meet the failure policy, and a fail-open policy would let it through.
    pub(crate) fn check_permits(&self, permits: u32) -> Result<()> {
        if permits == 0 {
            return Err(Error::InvalidArgument(format!(
                "permits must be at least 1 (limiter {:?}); use peek to read the remaining permits",
                self.name
            )));
        }
        match self.quota {
            Some(quota) if permits > quota.limit() => {
                Err(Error::PermitsExceedRate { permits, rate: quota.limit().into() })
            }
            _ => Ok(()),
        }
    }

    /// True when capacity may come back before a denial's `retry_after` (a concurrency lease, or a stored quota that
    /// may be one): such denials are to poll, not sleep through, and never to cache.
    pub(crate) fn frees_early(&self) -> bool {
        self.quota.is_none_or(|quota| quota.algorithm() == Algorithm::Concurrency)
    }

    /// What [`limit`](Limiter::limit) would decide, recording nothing: `remaining` is what is left now.
    pub async fn peek<'i>(&self, id: impl Into<Identifier<'i>>, permits: u32) -> Result<Decision> {
        let id = id.into();
        Ok(single(peek_all(&[self.request(&id, permits)]).await?))
    }

    /// Gives back exactly the grant `receipt` names, as far as the algorithm still allows, never above the limit.
    /// `success` says whether anything was given back. A bad receipt is [`Error::InvalidArgument`], never a store
    /// failure a fail-open policy could absorb.
    ///
    /// Never resent after a timeout or I/O error (it may have run): a refund gives back at most once.
    pub async fn refund<'i>(&self, id: impl Into<Identifier<'i>>, receipt: &Receipt) -> Result<Decision> {
        let id = id.into();
        stored_copy::refresh([self]).await?;
        let reply = Batch::refund(self.request(&id, receipt.permits()), receipt)?.run().await?;
        Ok(single(reply))
    }

    /// Releases a concurrency lease (a [`refund`](Limiter::refund)). `false` if it was no longer held.
    pub async fn release<'i>(&self, id: impl Into<Identifier<'i>>, lease: &Lease) -> Result<bool> {
        Ok(self.refund(id, lease).await?.success)
    }

    /// Forgets `id`'s state: its limit is whole again. Returns whether there was any.
    pub async fn reset<'i>(&self, id: impl Into<Identifier<'i>>) -> Result<bool> {
        let command = Command::new("DEL").arg(self.state_key(id));
        Ok(self.client.command(&command).await?.into_int()? > 0)
    }

    /// `id`'s state as Redis holds it now, writing nothing: see [`state_all`].
    pub async fn state<'i>(&self, id: impl Into<Identifier<'i>>) -> Result<LimitState> {
        let mut states = state_all(&[(self, id.into())]).await?;
        Ok(states.pop().expect("one limit, one state"))
    }

    /// Stores `quota` as this limiter's config; [`Limiter::stored`] limiters use it from their next decision. State
    /// is kept while the algorithm stays; a new algorithm starts fresh (state is tagged with its algorithm), except
    /// between concurrency and the sliding log, which share one permit log.
    pub async fn store_quota(&self, quota: Quota) -> Result<()> {
        let command = Command::new("HSET").arg(self.config_key()).args([
            "algorithm".to_owned(),
            quota.algorithm().script_name().to_owned(),
            "limit".to_owned(),
            quota.limit().to_string(),
            "interval".to_owned(),
            quota.interval_ms().to_string(),
            "rate".to_owned(),
            quota.rate().to_string(),
        ]);
        self.client.command(&command).await?.into_int().map(drop)
    }

    /// The quota stored in Redis for this limiter, or `None`.
    pub async fn stored_quota(&self) -> Result<Option<Quota>> {
        let reply = self.client.command(&stored_copy::read_command(self)).await?;
        stored_copy::parse(reply, &self.name)
    }

    /// Deletes the stored config. Returns whether there was one.
    pub async fn delete_stored_quota(&self) -> Result<bool> {
        let command = Command::new("DEL").arg(self.config_key());
        Ok(self.client.command(&command).await?.into_int()? > 0)
    }
}

/// How long a waiting call sleeps at most between attempts: 20 ms if a limiter [frees early](Limiter::frees_early).
pub(crate) fn longest_sleep<'a>(limiters: impl IntoIterator<Item = &'a Limiter>) -> Duration {
    if limiters.into_iter().any(Limiter::frees_early) {
        Duration::from_millis(20)
    } else {
        Duration::MAX
    }
}

/// One limit's part in a decision over several: see [`Limiter::request`].
#[derive(Debug, Clone)]
pub struct LimitRequest<'a> {
    limiter: &'a Limiter,
    id: Identifier<'a>,
    permits: u32,
}

/// The decisions of several limits taken together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decisions {
    /// True when every limit allowed the request and all of them recorded it; false when nothing was recorded.
    pub success: bool,
    /// One decision per request, in order. Each one's `success` says whether *that* limit allowed it.
    pub decisions: Vec<Decision>,
}

impl Decisions {
    /// Milliseconds until every denying limit would allow the request (0 when none denies).
    pub fn retry_after(&self) -> u64 {
        self.decisions.iter().map(|d| d.retry_after).max().unwrap_or(0)
    }

    /// The one decision that speaks for all: when denied, the denying limit that frees last; when granted, the one with
    /// the fewest permits left.
    pub fn speaking_for_all(&self) -> Decision {
        let all = self.decisions.iter().copied();
        let speaker = if self.success {
            all.min_by_key(|d| d.remaining)
        } else {
            all.filter(|d| !d.success).max_by_key(|d| d.retry_after)
        };
        let speaker = speaker.or(self.decisions.first().copied()).unwrap_or(Decision {
            success: self.success,
            limit: 0,
            remaining: 0,
            reset: 0,
            retry_after: 0,
            receipt: None,
        });
        Decision {
            success: self.success,
            // One limit's receipt cannot give back the others' grants: each is in its own decision.
            receipt: speaker.receipt.filter(|_| self.decisions.len() == 1),
            ..speaker
        }
    }
}

/// Decides several limits in one round trip, all or nothing: a request denied by one limit consumes from none.
///
/// One script runs them all, so every key must be on one Redis node; across a Redis Cluster use
/// [`limit_all_across_slots`]. Requests go through the first limiter's client.
pub async fn limit_all(requests: &[LimitRequest<'_>]) -> Result<Decisions> {
    stored_copy::refresh(requests.iter().map(|request| request.limiter)).await?;
    Batch::new(Operation::Limit, requests)?.run().await
}

/// What [`limit_all`] would decide, recording nothing.
pub async fn peek_all(requests: &[LimitRequest<'_>]) -> Result<Decisions> {
    stored_copy::refresh(requests.iter().map(|request| request.limiter)).await?;
    Batch::new(Operation::Peek, requests)?.run().await
}

/// Gives back several grants in one round trip, each by its receipt (the request's permits are ignored). One result
/// per refund, in order; sent once, never again after a timeout or I/O error.
pub async fn refund_all(refunds: &[(LimitRequest<'_>, Receipt)]) -> Result<Vec<Result<Decision>>> {
    let Some((first, _)) = refunds.first() else {
        return Ok(Vec::new());
    };
    stored_copy::refresh(refunds.iter().map(|(request, _)| request.limiter)).await?;
    let batches = (refunds.iter())
        .map(|(request, receipt)| Batch::refund(request.clone(), receipt))
        .collect::<Result<Vec<_>>>()?;
    let calls: Vec<ScriptCall> = batches.iter().map(Batch::call).collect();
    let replies = Script::run_many(&first.limiter.client, &calls).await?;
    Ok((batches.iter().zip(replies))
        .map(|(batch, reply)| reply.and_then(|value| batch.decode(value)).map(single))
        .collect())
}

fn single(decisions: Decisions) -> Decision {
    let mut decision = decisions.decisions.into_iter().next().expect("one request, one decision");
    // A single limit's decision is its own verdict, except that a refund's `success` means "refunded".
    decision.success = decisions.success;
    decision
}
