//! `Ratelimit`: the npm package's main class, in Rust. One or several limits per identifier decided in one round
//! trip, a [`BlockCache`] of identifiers known to be denied, and a policy ([`OnError`]) for when the store is down.
//! The JS class (`js/ratelimit.js`) is a thin wrapper, so the Worker, the npm package and Rust behave the same.
//!
//! ```no_run
//! # async fn demo() -> edgelimit::Result<()> {
//! use std::time::Duration;
//! use edgelimit::ratelimit::{Limit, Options, Ratelimit};
//! use edgelimit::{Quota, RestClient};
//! let client = RestClient::new("http://127.0.0.1:8079", "dev-token")?;
//! let limits = [Limit::new(Quota::sliding_window(10, Duration::from_secs(1))?)];
//! let ratelimit = Ratelimit::new(client, &limits, Options::default())?;
//! let outcome = ratelimit.limit("203.0.113.7", 1).await?;
//! println!("{} ({})", outcome.decision.success, outcome.reason);
//! # Ok(()) }
//! ```

use std::fmt;
use std::str::FromStr;
use std::sync::Mutex;
use std::time::Duration;

pub use crate::block_cache::BlockCache;
use crate::decision::Decision;
use crate::error::{Error, Result};
use crate::identifier::Identifier;
use crate::limit::{
    self, Decisions, KeyLayout, LimitRequest, LimitState, Limiter, Memory, Quota, Receipt, DEFAULT_PREFIX,
};
use crate::rest::{Command, RestClient};
use crate::time::{retry_until_granted, Attempt, Instant};

/// What to answer when the store is unavailable (see [`Error::is_store_unavailable`]). Every other error is
/// returned, whatever the policy.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum OnError {
    /// Fail open: allow the request (the default: an outage of the limiter must not become one of the service).
    #[default]
    Allow,
    /// Fail closed: deny the request.
    Deny,
    /// Return the error.
    Throw,
    /// Decide in this process, under a local limit, with the memory backend ([`Memory`], on the system clock):
    /// [`Reason::Insurance`]. Every call still asks the store first, within its timeout, so decisions are the store's
    /// again as soon as it answers; nothing decided locally is written to it. The local limit is this `Ratelimit`'s
    /// (one process, one isolate): state it as the global limit divided by the processes expected.
    Insurance(Insurance),
}

/// The local limit of [`OnError::Insurance`]. Its decisions are made afresh in this process: they know nothing of
/// what the store counted before it failed, and the store learns nothing of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Insurance {
    /// The limits the call is decided under: the `Ratelimit`'s own, or those given to
    /// [`limit_all`](Ratelimit::limit_all).
    Same,
    /// These limits, for every call (one or several, all of which must allow, as in the store). No concurrency limit:
    /// a lease taken locally could not be released through the store.
    Limits(Vec<Limit>),
}

impl FromStr for OnError {
    type Err = Error;

    fn from_str(text: &str) -> Result<OnError> {
        match text {
            "allow" => Ok(OnError::Allow),
            "deny" => Ok(OnError::Deny),
            "throw" => Ok(OnError::Throw),
            other => {
                Err(Error::InvalidConfig(format!("onError must be \"allow\", \"deny\" or \"throw\", got {other:?}")))
            }
        }
    }
}

/// Why an [`Outcome`] is what it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Reason {
    /// Redis decided (or, in [`Ratelimit::in_memory`], this process).
    Decided,
    /// The block cache answered: the identifier was denied moments ago and cannot succeed yet. No round trip.
    Cache,
    /// Permits this client reserved answered, with no round trip (see [`Options::reserve`]), or took part beside
    /// Redis's grant under several limits. `remaining` is an estimate.
    Reserved,
    /// The store did not answer in time; [`OnError`] decided.
    Timeout,
    /// The store was otherwise unavailable (unreachable, 502–504 or 520–524, Redis loading, busy, failing over or
    /// read-only; not out of memory, which is an error); [`OnError`] decided.
    Error,
    /// The store was unavailable and [`OnError::Insurance`]'s local limit decided, in this process.
    Insurance,
}

impl Reason {
    /// Why a failure policy had to decide: the store timed out, or failed otherwise.
    pub(crate) fn of_failure(error: &Error) -> Reason {
        match error {
            Error::Timeout { .. } => Reason::Timeout,
            _ => Reason::Error,
        }
    }

    /// The JS spelling: `decided`, `cache`, `reserved`, `timeout`, `error`, `insurance`.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Decided => "decided",
            Reason::Cache => "cache",
            Reason::Reserved => "reserved",
            Reason::Timeout => "timeout",
            Reason::Error => "error",
            Reason::Insurance => "insurance",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A limit of a [`Ratelimit`]: a quota and the name its keys live under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limit {
    /// What the limit allows.
    pub quota: Quota,
    /// The name its keys are under; by default the algorithm and interval (e.g. `sliding_window-1000ms`), so changing
    /// the limit keeps the state while changing the algorithm starts afresh.
    pub name: Option<String>,
}

impl Limit {
    /// A limit under its default name.
    pub fn new(quota: Quota) -> Limit {
        Limit { quota, name: None }
    }

    fn name(&self) -> String {
        self.name.clone().unwrap_or_else(|| self.default_name())
    }

    /// The name used when none is given: the algorithm and the interval, e.g. `sliding_window-1000ms`.
    pub(crate) fn default_name(&self) -> String {
        format!("{}-{}ms", self.quota.algorithm().script_name(), self.quota.interval_ms())
    }
}

/// How a [`Ratelimit`] keys, caches and fails.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Before every key; default `edgelimit`.
    pub prefix: String,
    /// Where state lives: [`KeyLayout::PerLimiter`] by default; [`KeyLayout::PerIdentifier`] on a Redis Cluster.
    pub layout: KeyLayout,
    /// What to answer when the store is unavailable; default [`OnError::Allow`].
    pub on_error: OnError,
    /// How many denied identifiers the block cache remembers; 0 turns it off. Default 10 000.
    pub cache_entries: usize,
    /// Reserve permits usable within this long for identifiers this client sees often, and grant them with no round
    /// trip ([`limit::Reserved`] for one limit, [`limit::ReservedAll`] for several). The price: unused reserved permits
    /// are lost (under-admission, never over), `remaining` is an estimate, and a grant from reserved permits cannot be
    /// refunded. Default `None`: every decision asks Redis.
    pub reserve: Option<Duration>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            prefix: DEFAULT_PREFIX.to_owned(),
            layout: KeyLayout::default(),
            on_error: OnError::default(),
            cache_entries: 10_000,
            reserve: None,
        }
    }
}

/// A decision and where it came from.
#[derive(Debug)]
pub struct Outcome {
    /// The decision that speaks for all limits (see [`limit::Decisions::speaking_for_all`]); with several limits, each
    /// one's receipt is in its own decision in `limits`.
    pub decision: Decision,
    /// Who decided.
    pub reason: Reason,
    /// Each limit's own decision, in order, when Redis decided, or the local limits' under [`Reason::Insurance`]
    /// (without receipts); empty otherwise.
    pub limits: Vec<Decision>,
    /// The store's failure that [`OnError`] turned into this decision.
    pub error: Option<Error>,
}

impl Attempt for Outcome {
    /// Waiting is pointless when the store failed: the policy's answer is final.
    fn ask_again_after(&self) -> Option<u64> {
        match self.reason {
            Reason::Decided | Reason::Cache | Reason::Reserved => self.decision.ask_again_after(),
            // The next attempt asks the store first again. A request larger than the local limit never fits (no wait).
            Reason::Insurance => self.decision.ask_again_after().filter(|&wait| wait > 0),
            Reason::Timeout | Reason::Error => None,
        }
    }
}

/// Limits identifiers under one or several limits at once. Cheap to share; every method takes `&self`.
#[derive(Debug)]
pub struct Ratelimit {
    client: RestClient,
    prefix: String,
    layout: KeyLayout,
    limiters: Vec<Limiter>,
    on_error: OnError,
    cache: Option<Mutex<BlockCache>>,
    reserved: Option<Reservations>,
    /// The memory backend ([`Ratelimit::in_memory`]), deciding instead of Redis; `client` is then never used.
    memory: Option<Memory>,
    /// [`OnError::Insurance`]'s local limit.
    insured: Option<Insured>,
}

/// The local limit of [`OnError::Insurance`], ready: its memory and the stated limits' limiters (`None`: the call's).
#[derive(Debug)]
struct Insured {
    memory: Memory,
    limiters: Option<Vec<Limiter>>,
}

/// What [`Ratelimit::give_back`] gives back of a grant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Returned {
    /// Every limit's permits: a refund.
    Grant,
    /// The concurrency limits' leases only: a release.
    Leases,
}

/// The permits a [`Ratelimit`] reserves (see [`Options::reserve`]).
#[derive(Debug)]
enum Reservations {
    /// One limit's, which lends concurrency leases and waits for another request's reservation.
    One(Box<limit::Reserved>),
    /// Several limits', taken together.
    All(limit::ReservedAll),
}

impl Ratelimit {
    /// A rate limiter enforcing every one of `limits` (at least one) on each identifier.
    pub fn new(client: RestClient, limits: &[Limit], options: Options) -> Result<Ratelimit> {
        let mut ratelimit = Ratelimit {
            client,
            prefix: options.prefix,
            layout: options.layout,
            limiters: Vec::new(),
            on_error: options.on_error,
            cache: (options.cache_entries > 0).then(|| Mutex::new(BlockCache::new(options.cache_entries))),
            reserved: None,
            memory: None,
            insured: None,
        };
        ratelimit.limiters = ratelimit.limiters_for(limits)?;
        if let OnError::Insurance(insurance) = &ratelimit.on_error {
            let limiters = match insurance {
                Insurance::Same => None,
                Insurance::Limits(limits) => Some(ratelimit.limiters_for(limits).map_err(|error| match error {
                    Error::InvalidConfig(message) => Error::InvalidConfig(format!("the insurance limit: {message}")),
                    other => other,
                })?),
            };
            if limiters.as_ref().unwrap_or(&ratelimit.limiters).iter().any(Limiter::frees_early) {
                return Err(Error::InvalidConfig(
                    "the insurance limit cannot be a concurrency limit: a lease taken in this process could not be \
                     released through the store; state the insurance limit with another algorithm"
                        .into(),
                ));
            }
            ratelimit.insured = Some(Insured { memory: Memory::default(), limiters });
        }
        if let Some(length) = options.reserve {
            ratelimit.reserved = Some(match ratelimit.limiters.as_slice() {
                [limiter] => Reservations::One(Box::new(limit::Reserved::new(limiter.clone(), length)?)),
                several => Reservations::All(limit::ReservedAll::new(several.to_vec(), length)?),
            });
        }
        Ok(ratelimit)
    }

    /// The memory backend: every limit decided in this process by its model ([`limit::model`]) on `memory`'s clock,
    /// with the results, receipts and errors of the Redis path. For tests and single-process apps: the limits are this
    /// object's, shared with no other process. No block cache (it would answer on the system clock), no reserved
    /// permits (no round trip to save), and no failure policy (there is no store to fail); [`state`](Ratelimit::state)
    /// reads Redis only.
    pub fn in_memory(limits: &[Limit], memory: Memory, prefix: &str) -> Result<Ratelimit> {
        // A client to nowhere (`.invalid` never resolves), which no method uses when `memory` is set.
        let client = RestClient::new("http://memory.invalid", "memory")?;
        let options =
            Options { prefix: prefix.to_owned(), on_error: OnError::Throw, cache_entries: 0, ..Options::default() };
        let ratelimit = Ratelimit::new(client, limits, options)?;
        Ok(Ratelimit { memory: Some(memory), ..ratelimit })
    }

    /// The client every limit decides through; `None` for the memory backend.
    pub fn client(&self) -> Option<&RestClient> {
        self.memory.is_none().then_some(&self.client)
    }

    /// The limiters enforced by [`limit`](Ratelimit::limit).
    pub fn limiters(&self) -> &[Limiter] {
        &self.limiters
    }

    fn limiters_for(&self, limits: &[Limit]) -> Result<Vec<Limiter>> {
        if limits.is_empty() {
            return Err(Error::InvalidConfig(
                "no limits: give at least one, e.g. Ratelimit.slidingWindow(10, \"1 s\")".into(),
            ));
        }
        let mut limiters: Vec<Limiter> = Vec::with_capacity(limits.len());
        for limit in limits {
            let name = limit.name();
            if limiters.iter().any(|other| other.name() == name) {
                return Err(Error::InvalidConfig(format!(
                    "two limits are named {name:?}: their state would collide; give each a distinct name"
                )));
            }
            let limiter = Limiter::new(self.client.clone(), &name, limit.quota)?.with_prefix(&self.prefix)?;
            limiters.push(limiter.with_layout(self.layout)?);
        }
        Ok(limiters)
    }

    /// Takes `permits` for `id` under every limit, all or nothing, in one round trip (none when cached or reserved).
    pub async fn limit<'i>(&self, id: impl Into<Identifier<'i>>, permits: u32) -> Result<Outcome> {
        let id = id.into();
        match &self.reserved {
            Some(reserved) => crate::rare_paths::out_of_line(self.decide_reserved(reserved, &id, permits)).await,
            None => self.decide(&self.limiters, &id, permits).await,
        }
    }

    /// A decision through reserved permits (which remember denials themselves): one limit's, or several limits'.
    async fn decide_reserved(&self, reserved: &Reservations, id: &Identifier<'_>, permits: u32) -> Result<Outcome> {
        // The decision, whether it took reserved permits, and each limit's decision when Redis made any.
        let decided = match reserved {
            Reservations::One(reserved) => (reserved.limit(id, permits).await).map(|decided| {
                let limits = if decided.local { Vec::new() } else { vec![decided.decision] };
                (decided.decision, decided.local, limits)
            }),
            // A decision that took any reserved permit is marked as one (its `remaining` is an estimate).
            Reservations::All(reserved) => (reserved.limit(id, permits).await).map(|decided| {
                let took = decided.limits.iter().any(|limit| limit.local && limit.decision.success);
                let limits = match decided.local {
                    true => Vec::new(),
                    false => decided.limits.iter().map(|limit| limit.decision).collect(),
                };
                (decided.decision, decided.local || took, limits)
            }),
        };
        match decided {
            Ok((decision, reserved, limits)) => Ok(Outcome {
                decision,
                reason: if reserved { Reason::Reserved } else { Reason::Decided },
                limits,
                error: None,
            }),
            Err(error) => self.on_failure(&self.limiters, id, permits, error),
        }
    }

    /// [`limit`](Ratelimit::limit) under these `limits` instead of this limiter's own.
    pub async fn limit_all<'i>(
        &self,
        id: impl Into<Identifier<'i>>,
        limits: &[Limit],
        permits: u32,
    ) -> Result<Outcome> {
        self.decide(&self.limiters_for(limits)?, &id.into(), permits).await
    }

    /// Takes `permits` for `id`, waiting each denial's exact `retry_after`, up to `timeout`. Returns the last
    /// outcome: denied if the time ran out, or the failure policy's answer as soon as the store fails.
    pub async fn block_until_ready<'i>(
        &self,
        id: impl Into<Identifier<'i>>,
        permits: u32,
        timeout: Duration,
    ) -> Result<Outcome> {
        let (id, longest_sleep) = (id.into(), limit::longest_sleep(&self.limiters));
        retry_until_granted(timeout, longest_sleep, || self.limit(&id, permits)).await
    }

    /// Gives back the grant of [`limit`](Ratelimit::limit) whose receipts are `receipts` (one per limit, in order, as
    /// in [`Outcome::limits`]): each limit gives back exactly what its grant took, as far as its rule allows (see
    /// [`Receipt`]). One round trip, sent once. A receipt no grant made is [`Error::InvalidArgument`]; if one limit's
    /// refund fails, its error is returned and the others have given back. For a request that did not run; to end a
    /// lease of one that did, [`release`](Ratelimit::release).
    pub async fn refund<'i>(&self, id: impl Into<Identifier<'i>>, receipts: &[Receipt]) -> Result<Vec<Decision>> {
        self.give_back(&id.into(), None, receipts, Returned::Grant).await
    }

    /// [`refund`](Ratelimit::refund) of a grant of [`limit_all`](Ratelimit::limit_all) under these `limits`.
    pub async fn refund_all<'i>(
        &self,
        id: impl Into<Identifier<'i>>,
        limits: &[Limit],
        receipts: &[Receipt],
    ) -> Result<Vec<Decision>> {
        self.give_back(&id.into(), Some(limits), receipts, Returned::Grant).await
    }

    /// Ends the leases of a grant whose work is done: only the concurrency limits' receipts are given back, and the
    /// other limits go on counting the grant, since its request ran. Returns the concurrency limits' decisions; with
    /// none among the limits it is [`Error::InvalidArgument`].
    pub async fn release<'i>(&self, id: impl Into<Identifier<'i>>, receipts: &[Receipt]) -> Result<Vec<Decision>> {
        self.give_back(&id.into(), None, receipts, Returned::Leases).await
    }

    /// [`release`](Ratelimit::release) of a grant of [`limit_all`](Ratelimit::limit_all) under these `limits`.
    pub async fn release_all<'i>(
        &self,
        id: impl Into<Identifier<'i>>,
        limits: &[Limit],
        receipts: &[Receipt],
    ) -> Result<Vec<Decision>> {
        self.give_back(&id.into(), Some(limits), receipts, Returned::Leases).await
    }

    /// Refunds and releases: what `returned` names of the grant `receipts` name, under this limiter's limits or
    /// `limits`.
    pub(crate) async fn give_back(
        &self,
        id: &Identifier<'_>,
        limits: Option<&[Limit]>,
        receipts: &[Receipt],
        returned: Returned,
    ) -> Result<Vec<Decision>> {
        let given;
        let limiters = match limits {
            None => self.limiters.as_slice(),
            Some(limits) => {
                given = self.limiters_for(limits)?;
                given.as_slice()
            }
        };
        if receipts.len() != limiters.len() {
            return Err(Error::InvalidArgument(format!(
                "{} receipts for {} limits: pass one per limit, in order, as the grant's results carry them",
                receipts.len(),
                limiters.len()
            )));
        }
        let leases = |limiter: &Limiter| {
            (limiter.quota()).is_some_and(|quota| quota.algorithm() == crate::limit::Algorithm::Concurrency)
        };
        let refunds: Vec<_> = (limiters.iter().zip(receipts))
            .filter(|(limiter, _)| returned == Returned::Grant || leases(limiter))
            .map(|(limiter, receipt)| (limiter.request(id, receipt.permits()), *receipt))
            .collect();
        if refunds.is_empty() {
            return Err(Error::InvalidArgument(
                "none of these limits is a concurrency limit, so there is no lease to release; refund gives a \
                 grant's permits back"
                    .into(),
            ));
        }
        // A lease lent from this limiter's reserved permits goes back to them, with no round trip.
        if let (Some(Reservations::One(reserved)), [receipt], None) = (&self.reserved, receipts, limits) {
            if let Some(released) = reserved.take_back(id, receipt) {
                return Ok(vec![released]);
            }
        }
        let refunded = match &self.memory {
            Some(memory) => memory.refund_all(&refunds),
            None => limit::refund_all(&refunds).await,
        };
        refunded?.into_iter().collect()
    }

    /// What is left for `id` now, taking nothing: the limit with the fewest permits left.
    pub async fn remaining<'i>(&self, id: impl Into<Identifier<'i>>) -> Result<Decision> {
        let id = id.into();
        let requests: Vec<_> = self.limiters.iter().map(|limiter| limiter.request(&id, 1)).collect();
        let peeked = match &self.memory {
            Some(memory) => memory.peek_all(&requests),
            None => limit::peek_all(&requests).await,
        };
        Ok(peeked?.speaking_for_all())
    }

    /// `id`'s state under every limit, as Redis holds it at one moment, in one round trip, writing nothing. Not for
    /// the memory backend ([`Error::InvalidArgument`]).
    pub async fn state<'i>(&self, id: impl Into<Identifier<'i>>) -> Result<Vec<LimitState>> {
        if self.memory.is_some() {
            return Err(Error::InvalidArgument(
                "state reads what Redis holds, and the memory backend holds its state in this process: use \
                 getRemaining (remaining in Rust), or give url and token instead of memory"
                    .into(),
            ));
        }
        let id = id.into();
        let requests: Vec<_> = self.limiters.iter().map(|limiter| (limiter, &id)).collect();
        limit::state_all(&requests).await
    }

    /// Forgets `id`'s state under every limit (one `DEL`) and its cached denials. Returns whether there was any.
    pub async fn reset<'i>(&self, id: impl Into<Identifier<'i>>) -> Result<bool> {
        let id = id.into();
        let keys = self.limiters.iter().map(|limiter| limiter.state_key(&id));
        let deleted = match &self.memory {
            Some(memory) => memory.reset(&self.limiters, &id)?,
            None => self.client.command(&Command::new("DEL").args(keys)).await?.into_int()? > 0,
        };
        // After the DEL, so that a denial remembered while it was under way is forgotten too.
        if let Some(cache) = &self.cache {
            // Every cached denial of this identifier, under any set of limits, starts with its key part.
            let identifier = cache_key_part(id.key_part());
            lock(cache).forget(|key| key.starts_with(&identifier));
        }
        match &self.reserved {
            Some(Reservations::One(reserved)) => reserved.forget_denials(&id),
            Some(Reservations::All(reserved)) => reserved.forget_denials(&id),
            None => {}
        }
        Ok(deleted)
    }

    async fn decide(&self, limiters: &[Limiter], id: &Identifier<'_>, permits: u32) -> Result<Outcome> {
        // A denial that a lease released early can cut short is not one to remember.
        let cache = (self.cache.as_ref())
            .filter(|_| !limiters.iter().any(Limiter::frees_early))
            .map(|cache| (cache, cache_key(limiters, id)));
        let sent = Instant::now();
        if let Some(decision) = cache.as_ref().and_then(|(cache, key)| lock(cache).check(key, permits, sent)) {
            return Ok(Outcome { decision, reason: Reason::Cache, limits: Vec::new(), error: None });
        }
        let requests: Vec<_> = limiters.iter().map(|limiter| limiter.request(id, permits)).collect();
        match self.limit_all_requests(&requests).await {
            Ok(decisions) => {
                let decision = decisions.speaking_for_all();
                if let Some((cache, key)) = &cache {
                    lock(cache).block(key, permits, sent, decision);
                }
                Ok(Outcome { decision, reason: Reason::Decided, limits: decisions.decisions, error: None })
            }
            Err(error) => self.on_failure(limiters, id, permits, error),
        }
    }

    /// [`limit::limit_all`], or the memory backend's.
    async fn limit_all_requests(&self, requests: &[LimitRequest<'_>]) -> Result<Decisions> {
        match &self.memory {
            Some(memory) => memory.limit_all(requests),
            None => limit::limit_all(requests).await,
        }
    }

    /// Applies the failure policy when the store is unavailable; any other error is returned as it is.
    fn on_failure(&self, limiters: &[Limiter], id: &Identifier<'_>, permits: u32, error: Error) -> Result<Outcome> {
        if !error.is_store_unavailable() || self.on_error == OnError::Throw {
            return Err(error);
        }
        if let Some(insured) = &self.insured {
            return insured.decide(limiters, id, permits, error);
        }
        let reason = Reason::of_failure(&error);
        let limit = limiters
            .iter()
            .filter_map(|limiter| limiter.quota())
            .map(|quota| u64::from(quota.limit()))
            .min()
            .unwrap_or(0);
        // Nothing is known of the store's state: no permits promised, no wait made up.
        let decision = Decision {
            success: self.on_error == OnError::Allow,
            limit,
            remaining: 0,
            reset: 0,
            retry_after: 0,
            receipt: None,
        };
        Ok(Outcome { decision, reason, limits: Vec::new(), error: Some(error) })
    }
}

impl Insured {
    /// The local limit's decision on `permits` for `id`, `error` being the store's unavailability it stands in for. The
    /// limits are the stated ones, or the call's own (`limiters`): a concurrency limit among those is not decided here,
    /// and the store's error is returned. More permits than a local limit holds is a denial, since the store, with its
    /// larger limit, would have decided the request.
    fn decide(&self, limiters: &[Limiter], id: &Identifier<'_>, permits: u32, error: Error) -> Result<Outcome> {
        let limiters = self.limiters.as_deref().unwrap_or(limiters);
        if limiters.iter().any(Limiter::frees_early) {
            return Err(error);
        }
        let requests: Vec<_> = limiters.iter().map(|limiter| limiter.request(id, permits)).collect();
        let (decision, limits) = match self.memory.limit_all(&requests) {
            // No receipts: a refund or release goes to the store, which never saw these grants.
            Ok(decisions) => {
                let unreceipted = |decision: Decision| Decision { receipt: None, ..decision };
                let limits: Vec<Decision> = decisions.decisions.iter().copied().map(unreceipted).collect();
                (unreceipted(decisions.speaking_for_all()), limits)
            }
            Err(Error::PermitsExceedRate { .. }) => {
                let limit = (limiters.iter().filter_map(Limiter::quota)).map(|quota| quota.limit().into()).min();
                let decision = Decision {
                    success: false,
                    limit: limit.unwrap_or(0),
                    remaining: 0,
                    reset: 0,
                    retry_after: 0,
                    receipt: None,
                };
                (decision, Vec::new())
            }
            Err(other) => return Err(other),
        };
        Ok(Outcome { decision, reason: Reason::Insurance, limits, error: Some(error) })
    }
}

/// The block cache's key: the identifier's key part, then the limits' names (a denial under one set says nothing
/// of another), each length-prefixed so no text can make another identifier's or set's key.
fn cache_key(limiters: &[Limiter], id: &Identifier<'_>) -> String {
    let mut key = cache_key_part(id.key_part());
    for limiter in limiters {
        key.push_str(&cache_key_part(limiter.name()));
    }
    key
}

/// One part of a block cache key: `<length in bytes>:<text>`.
fn cache_key_part(text: &str) -> String {
    format!("{}:{text}", text.len())
}

/// The cache stays usable even if a panic poisoned its lock: it holds no invariant a half-done update could break.
fn lock(cache: &Mutex<BlockCache>) -> std::sync::MutexGuard<'_, BlockCache> {
    cache.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limit::Decisions;

    fn decision(success: bool, remaining: u64, retry_after: u64) -> Decision {
        Decision { success, limit: 10, remaining, reset: 5_000 + retry_after, retry_after, receipt: None }
    }

    #[test]
    fn granted_speaks_with_the_fewest_left_denied_with_the_longest_wait() {
        let granted = Decisions {
            success: true,
            decisions: vec![decision(true, 7, 0), decision(true, 2, 0), decision(true, 4, 0)],
        };
        assert_eq!(granted.speaking_for_all().remaining, 2);
        let denied = Decisions {
            success: false,
            decisions: vec![decision(false, 0, 300), decision(true, 9, 0), decision(false, 0, 900)],
        };
        let speaker = denied.speaking_for_all();
        assert_eq!((speaker.success, speaker.retry_after), (false, 900));
    }

    #[test]
    fn on_error_spellings() {
        assert_eq!("deny".parse::<OnError>().unwrap(), OnError::Deny);
        let wrong = "fail-open".parse::<OnError>().unwrap_err();
        assert_eq!(wrong.code(), "EDGELIMIT_INVALID_CONFIG");
        assert!(wrong.to_string().contains("\"allow\", \"deny\" or \"throw\""));
    }

    #[test]
    fn default_names_keep_state_across_limit_changes_not_algorithm_changes() {
        let second = Duration::from_secs(1);
        let name = |quota| Limit::new(quota).name();
        assert_eq!(name(Quota::fixed_window(10, second).unwrap()), "fixed_window-1000ms");
        assert_eq!(name(Quota::fixed_window(10, second).unwrap()), name(Quota::fixed_window(20, second).unwrap()));
        assert_ne!(name(Quota::fixed_window(10, second).unwrap()), name(Quota::sliding_window(10, second).unwrap()));
    }
}
