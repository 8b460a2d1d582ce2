//! Reserved permits: decisions with no round trip for the identifiers a client sees often, exact by construction
//! (GCRA, fixed window, sliding log, concurrency).
//!
//! A [`Reserved`] limiter sends each request it cannot answer itself to the algorithm's reserve script, which
//! decides it and reserves, along with it, permits for the identifier sized to this client's recent demand. Each
//! permit has a span of the server's clock in which its use keeps every window within the limit; the client moves
//! it to local time conservatively and loses what it does not use in time (under-admission, never over). Denials
//! are remembered as the block cache does. [`ReservedAll`] does the same under several limits (`several.rs`).
//!
//! The client's rules: docs/design/reserved-client.md; why each script is exact: docs/design/reserve.md.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_channel::oneshot;

use super::{Algorithm, Limiter, Quota};
use crate::block_cache::{ceil_ms, BlockCache};
use crate::decision::Decision;
use crate::error::{Error, Result};
use crate::identifier::Identifier;
#[cfg(feature = "lend")]
use crate::lua::RESERVE_CONCURRENCY;
use crate::lua::{RESERVE_FIXED_WINDOW, RESERVE_GCRA, RESERVE_SLIDING_LOG};
use crate::receipt::{self, Lease, Receipt};
use crate::rest;
use crate::rest::{Script, ScriptCall};
use crate::time::Instant;
use crate::value::Value;

mod several;
pub use several::{ReservedAll, ReservedDecisions};

/// The identifiers a client tracks at most (and the denials it remembers); past it, new ones are decided without
/// reserving.
const MAX_TRACKED: usize = 10_000;

/// A reservation's call under way for this long was abandoned (see [`Pool::is_reserving`]).
const ABANDONED_AFTER: Duration = Duration::from_secs(60);

/// The returns one call carries at most, and the groups of uses one return names at most (the script's bounds).
const MAX_RETURNS: usize = 100;
const MAX_GROUPS: usize = 16;

/// The times a request waits for another request's reservation at most (see [`Reserved::limit`]).
const MAX_WAITS: u32 = 2;

/// A sliding log reserves this part of the recent demand on a contended log (see [`Reserved::block_and_pace`]).
const SLIDING_LOG_SHARE: u32 = 4;

/// The tranches one sliding-log reply holds at most (the script's bound).
const MAX_TRANCHES: usize = 8;

/// How a lease lent from reserved permits is marked (`<permits>:local-<id>`): script receipts start with a digit,
/// so Redis refuses such a receipt, never takes it for a grant.
const LOCAL_MARK: &str = "local-";

/// A GCRA, fixed-window, sliding-log or concurrency limiter that reserves permits for the identifiers it sees often
/// (see the module's docs).
#[derive(Debug, Clone)]
pub struct Reserved {
    limiter: Limiter,
    quota: Quota,
    /// The algorithm's script that decides and reserves (`edgelimit scripts reserve/<algorithm>`).
    script: &'static Script,
    length: Duration,
    memory: Arc<Mutex<Memory>>,
}

/// What a client remembers: reserved permits and demand per identifier (by state key), and Redis's denials.
#[derive(Debug)]
struct Memory {
    pools: HashMap<String, Pool>,
    denials: BlockCache,
}

impl Default for Memory {
    fn default() -> Memory {
        Memory { pools: HashMap::new(), denials: BlockCache::new(MAX_TRACKED) }
    }
}

/// One decision of a [`Reserved`] limiter, and where it was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReservedDecision {
    /// The decision.
    pub decision: Decision,
    /// True when it was made locally (from reserved permits, or a denial remembered): no round trip.
    pub local: bool,
    /// For a grant, its span on the server's clock (unix ms): a GCRA slot's span, where a block's use falls given when
    /// the reservation left and arrived, or `[now, now]` for a request Redis decided. (0, 0) for a denial and for a
    /// plain decision after a refused reservation. What an exactness check counts it in.
    pub span: (u64, u64),
}

/// What a client keeps per identifier.
#[derive(Debug, Default)]
struct Pool {
    /// Blocks not used up: more than one when this client's tasks asked Redis at the same time.
    blocks: Vec<Block>,
    /// Returns of blocks this client is done with, for its next call to Redis for the identifier.
    returns: Vec<String>,
    /// Since when a request of this client is asking Redis for the identifier, and the requests waiting for its reply.
    reserving: Option<Instant>,
    waiters: Vec<oneshot::Sender<bool>>,
    /// Permits asked in the current span of the block's length (from `span_started`) and the one before; and permits
    /// granted in the same spans.
    asked: u32,
    asked_before: u32,
    granted: u32,
    granted_before: u32,
    span_started: Option<Instant>,
    /// The permits left for the identifier after this client's last call: a sliding log with room for more than this
    /// client asks is not contended (see [`Reserved::block_and_pace`]).
    room: Option<u64>,
    /// Concurrency: the most permits held at once in this span and the one before (see [`Pool::hold`]), and the
    /// unreleased leases Redis granted, with when they expire locally.
    peak: u32,
    peak_before: u32,
    leases: Vec<(Receipt, Instant)>,
}

/// Where a block's permits may be used, from the reply's fourth number.
#[derive(Debug, Clone, Copy)]
enum Schedule {
    /// GCRA: each permit is a slot, and the slots start `charged` units after the reply's `now`.
    Slots { charged: u64 },
    /// Fixed window, sliding log: every permit from `from` ms after the reply's `now` until `until` ms after it.
    Span { from: u64, until: u64 },
}

/// What a block's permits were used for.
#[derive(Debug, Clone)]
enum Uses {
    /// Grants (GCRA, fixed window, sliding log), in at most [`MAX_GROUPS`] groups: how many, and the latest server time
    /// (unix ms) the last of them may have been used (the last group takes in later uses).
    Grants(Vec<(u64, u64)>),
    /// Concurrency: the leases lent out and not given back. Only a build with the `lend` feature has any.
    #[cfg_attr(not(feature = "lend"), allow(dead_code))]
    Loans(Vec<Loan>, Lending),
}

/// Whether this build lends reserved concurrency permits: `()` with the `lend` feature, else an empty type, so no
/// [`Uses::Loans`] can exist and the compiler drops every path handling one without a `cfg` on each (the Worker's
/// rules have no concurrency limits).
#[cfg(feature = "lend")]
type Lending = ();
#[cfg(not(feature = "lend"))]
type Lending = std::convert::Infallible;

impl Uses {
    /// What a block reserved for `algorithm` starts with: nothing used.
    fn none(algorithm: Algorithm) -> Uses {
        match algorithm {
            #[cfg(feature = "lend")]
            Algorithm::Concurrency => Uses::Loans(Vec::new(), ()),
            _ => Uses::Grants(Vec::new()),
        }
    }
}

/// A concurrency lease lent from a block.
#[derive(Debug, Clone)]
struct Loan {
    /// What its local receipt names (`<permits>:local-<id>`).
    id: u64,
    permits: u64,
    /// The latest server time (unix ms) at which it may have been lent: it is held one interval after that at most.
    latest: u64,
    /// When it was lent, in local time: it is given back by itself one interval later.
    lent: Instant,
}

/// Reserved permits: `next..=last` (counted from 1, as the script counts them) are the client's, each usable in its
/// own span (see [`Block::span`]). For concurrency `next - 1` are lent out.
#[derive(Debug, Clone)]
struct Block {
    next: u64,
    last: u64,
    /// What the block's permits were used for: what a return says (see `grant`).
    uses: Uses,
    /// Whether its span has ended: it lends nothing more.
    ended: bool,
    /// For a block returned when done (a sliding log's tranche), the grant that logged it, '<expiry>-<id>'.
    grant: Option<String>,
    /// Local times when the request left and the reply arrived, and the server's `now` between them.
    sent: Instant,
    received: Instant,
    now: u64,
    schedule: Schedule,
    reset: u64,
}

/// What a reservation's reply says: the server's `now`, the request's decision (taken only when the call took the
/// request), and the blocks reserved.
struct Reservation {
    now: u64,
    decision: Decision,
    blocks: Vec<Block>,
}

impl Block {
    /// The `i`-th permit's span on the server's clock, in ms after `now`: for a GCRA slot, from its end less the burst
    /// to its start; else the block's one span.
    fn span(&self, i: u64, quota: &Quota) -> (u64, u64) {
        match self.schedule {
            Schedule::Slots { charged } => {
                let (interval, rate) = (quota.interval_ms(), u64::from(quota.rate()));
                let full = u64::from(quota.limit()) * interval;
                let start = (charged + i * interval).saturating_sub(full).div_ceil(rate);
                (start, (charged + (i - 1) * interval) / rate)
            }
            Schedule::Span { from, until } => (from, until),
        }
    }

    /// Counts `count` permits used, the last at `latest` (server clock) at the latest; for concurrency a lease lent,
    /// whose local receipt is returned.
    fn record_use(&mut self, count: u64, latest: u64, now: Instant) -> Option<Receipt> {
        match &mut self.uses {
            Uses::Grants(groups) => {
                let full = groups.len() == MAX_GROUPS;
                match groups.last_mut() {
                    Some(group) if group.1 >= latest || full => {
                        *group = (group.0 + count, group.1.max(latest));
                    }
                    _ => groups.push((count, latest)),
                }
                None
            }
            Uses::Loans(loans, _) => {
                // Unguessable: whoever holds one lease's receipt must not be able to name another's.
                let id = crate::unique_id::unguessable_u64();
                loans.push(Loan { id, permits: count, latest, lent: now });
                // A count of at most the limit (a u32) and a mark of 6 + 16 characters: always a receipt.
                format!("{count}:{LOCAL_MARK}{id:016x}").parse().ok()
            }
        }
    }

    /// Concurrency: gives back the leases lent at least `interval` ago (they expire as Redis's do), and the one
    /// `receipt` names; returns whether that one was out.
    fn give_back(&mut self, interval: Duration, receipt: Option<&Receipt>, now: Instant) -> bool {
        let Uses::Loans(loans, _) = &mut self.uses else {
            return false;
        };
        // The loan a receipt names: its permits and its id (16 hex digits after LOCAL_MARK).
        let named = receipt.and_then(|receipt| {
            let id = receipt.mark().strip_prefix(LOCAL_MARK).filter(|id| id.len() == 16)?;
            Some((u64::from(receipt.permits()), u64::from_str_radix(id, 16).ok()?))
        });
        let (mut freed, mut found) = (0, false);
        loans.retain(|loan| {
            let named = named == Some((loan.permits, loan.id));
            found |= named;
            let keep = !named && now.saturating_duration_since(loan.lent) < interval;
            if !keep {
                freed += loan.permits;
            }
            keep
        });
        self.next -= freed;
        found
    }

    /// What the client says when done with a returned block: '<grant>:<permits>' then each group of uses,
    /// '<used>:<last use>' ('0:<now>' when none).
    fn return_of(&self, grant: &str) -> String {
        let mut text = format!("{grant}:{}", self.last);
        let groups = match &self.uses {
            Uses::Grants(groups) => groups.clone(),
            Uses::Loans(loans, _) => {
                // The leases still out in at most MAX_GROUPS groups, in the order lent, each with its latest time.
                let per_group = loans.len().div_ceil(MAX_GROUPS).max(1);
                (loans.chunks(per_group))
                    .map(|chunk| {
                        let permits = chunk.iter().map(|loan| loan.permits).sum();
                        (permits, chunk.iter().map(|loan| loan.latest).max().unwrap_or(self.now))
                    })
                    .collect()
            }
        };
        let none = [(0, self.now)];
        let groups = if groups.is_empty() { &none[..] } else { &groups[..] };
        for (count, latest) in groups {
            // Writing to a String cannot fail.
            let _ = write!(text, ":{count}:{latest}");
        }
        text
    }

    /// The `i`-th permit's span in local time: start from the reply's arrival (+1 ms for a clock of whole ms), end from
    /// the request's departure less a tenth of the span (clocks drift; a Worker's clock stands still between I/O).
    fn local_span(&self, i: u64, quota: &Quota) -> (Instant, Instant) {
        let (start, end) = self.span(i, quota);
        let margin = (end.saturating_sub(start) / 10).max(1);
        let after_reply = if start == 0 { 0 } else { start + 1 };
        (
            self.received + Duration::from_millis(after_reply),
            self.sent + Duration::from_millis(end.saturating_sub(margin)),
        )
    }
}

impl Pool {
    /// Counts a request for the demand estimate.
    fn ask(&mut self, permits: u32, now: Instant, length: Duration) {
        let started = *self.span_started.get_or_insert(now);
        let elapsed = now.saturating_duration_since(started);
        if elapsed >= length {
            let recent = elapsed < 2 * length;
            self.asked_before = if recent { self.asked } else { 0 };
            self.granted_before = if recent { self.granted } else { 0 };
            self.peak_before = if recent { self.peak } else { 0 };
            (self.asked, self.granted, self.peak) = (0, 0, 0);
            self.span_started = Some(now);
        }
        self.asked = self.asked.saturating_add(permits);
    }

    /// Concurrency: counts the permits this client holds now, with `permits` more, in the current span's peak.
    fn hold(&mut self, permits: u32, now: Instant) {
        self.leases.retain(|(_, expires)| now < *expires);
        let lent =
            (self.blocks.iter()).filter(|block| matches!(block.uses, Uses::Loans(..))).map(|block| block.next - 1);
        let from_redis = self.leases.iter().map(|(lease, _)| u64::from(lease.permits()));
        let holding = u32::try_from(lent.chain(from_redis).sum::<u64>() + u64::from(permits)).unwrap_or(u32::MAX);
        self.peak = self.peak.max(holding);
    }

    /// Concurrency: how many to reserve besides a request of `permits`: the most held at once lately, less the request
    /// (a lease is lent again once given back).
    fn held_at_once(&self, permits: u32) -> u32 {
        self.peak.max(self.peak_before).saturating_sub(permits)
    }

    /// How many permits to reserve besides a request of `permits`: what was asked lately, but for this request.
    fn demand(&self, permits: u32) -> u32 {
        // Saturating: a request that waited was counted in its span, and a new span may have started since.
        (self.asked.saturating_sub(permits)).max(self.asked_before)
    }

    /// How many permits this client was granted lately: its share of a limit it contends for.
    fn share(&self) -> u32 {
        self.granted.max(self.granted_before)
    }

    /// A local answer from reserved permits, if there is one: a grant, or the wait until the next ones start.
    fn answer(&mut self, permits: u32, quota: &Quota, now: Instant) -> Option<ReservedDecision> {
        let (usable_from, _, index) = self.soonest(permits, quota, now)?;
        if usable_from <= now {
            return Some(self.take(index, permits, quota, now));
        }
        Some(ReservedDecision { decision: self.standing(index, quota, usable_from, now), local: true, span: (0, 0) })
    }

    /// What the block at `index` answers now without taking its permits (usable from `usable_from`).
    fn standing(&self, index: usize, quota: &Quota, usable_from: Instant, now: Instant) -> Decision {
        let block = &self.blocks[index];
        Decision {
            success: usable_from <= now,
            limit: quota.limit().into(),
            remaining: block.last + 1 - block.next,
            reset: block.reset,
            retry_after: ceil_ms(usable_from.saturating_duration_since(now)),
            receipt: None,
        }
    }

    /// The block whose next `permits` can be used soonest, from when and until when (local time), and its index, after
    /// dropping ended permits and done blocks (queueing their returns).
    fn soonest(&mut self, permits: u32, quota: &Quota, now: Instant) -> Option<(Instant, Instant, usize)> {
        let count = u64::from(permits);
        // Permits whose span has ended are lost; a block that cannot give `permits` is done.
        for block in &mut self.blocks {
            block.give_back(Duration::from_millis(quota.interval_ms()), None, now);
            match block.schedule {
                // Slots end one after another: skip those that have ended.
                Schedule::Slots { .. } => {
                    while block.next <= block.last && block.local_span(block.next, quota).1 <= now {
                        block.next += 1;
                    }
                }
                // One span for every permit: all have ended, or none. A concurrency block still lends permits given
                // back.
                Schedule::Span { .. } => {
                    if block.local_span(block.next, quota).1 <= now {
                        block.ended = true;
                        if let Uses::Grants(_) = block.uses {
                            block.next = block.last + 1;
                        }
                    }
                }
            }
        }
        let returns = &mut self.returns;
        self.blocks.retain(|block| {
            let keep = match &block.uses {
                Uses::Grants(_) => block.next + count - 1 <= block.last,
                // An ended concurrency block waits for its leases (as long again as its span), so that returned then,
                // the permits of leases given back free at once.
                Uses::Loans(loans, _) => {
                    let (start, end) = block.local_span(1, quota);
                    !block.ended || (!loans.is_empty() && now < end + end.saturating_duration_since(start))
                }
            };
            if let (false, Some(grant)) = (keep, &block.grant) {
                returns.push(block.return_of(grant));
            }
            keep
        });
        // The next `permits` of a block are used at one moment: after the last one's start, before the first one's end.
        (self.blocks.iter().enumerate())
            .filter(|(_, block)| !block.ended && block.next + count - 1 <= block.last)
            .map(|(index, block)| {
                let last = block.next + count - 1;
                let usable_from = block.local_span(last, quota).0;
                let usable_until = block.local_span(block.next, quota).1;
                (usable_from, usable_until, index)
            })
            .filter(|(from, until, _)| from < until)
            .min_by_key(|(from, ..)| *from)
    }

    /// Grants `permits` from the block at `index` (see [`Pool::soonest`]), usable now.
    fn take(&mut self, index: usize, permits: u32, quota: &Quota, now: Instant) -> ReservedDecision {
        let count = u64::from(permits);
        let block = &mut self.blocks[index];
        let (first, last) = (block.next, block.next + count - 1);
        block.next = last + 1;
        self.granted = self.granted.saturating_add(permits);
        let (start, end) = (block.span(last, quota).0, block.span(first, quota).1);
        let span = match block.schedule {
            Schedule::Slots { .. } => (start, end),
            // The block's permits share one span; this use's is narrower: from its earliest server time (since the
            // reply arrived) to its latest (since the request left), which a return frees it after.
            Schedule::Span { .. } => (
                (now.saturating_duration_since(block.received).as_millis() as u64).max(start),
                ceil_ms(now.saturating_duration_since(block.sent)).min(end),
            ),
        };
        // A return frees the use one interval after its latest server time, with a margin for a slow clock (1 ms and a
        // hundredth of the time since the reservation left).
        let receipt = block.record_use(count, block.now + span.1 + 1 + span.1 / 100, now);
        let decision = Decision {
            success: true,
            limit: quota.limit().into(),
            remaining: block.last + 1 - block.next,
            reset: block.reset,
            retry_after: 0,
            receipt,
        };
        ReservedDecision { decision, local: true, span: (block.now + span.0, block.now + span.1) }
    }

    /// Nothing worth keeping: no demand for two spans of `length`, no call under way, and no lease its holder may still
    /// release here. Its blocks go with it: unused permits are lost, tranches free by themselves (under-admission).
    fn idle(&self, now: Instant, length: Duration) -> bool {
        let quiet = (self.span_started).is_none_or(|started| now.saturating_duration_since(started) >= 2 * length);
        let lending = self.leases.iter().any(|(_, expires)| now < *expires)
            || (self.blocks.iter()).any(|block| matches!(&block.uses, Uses::Loans(loans, _) if !loans.is_empty()));
        quiet && !self.is_reserving(now) && !lending
    }

    /// Whether a request of this client is asking Redis for the identifier. A call under way for longer than
    /// [`ABANDONED_AFTER`] was abandoned (workerd may leave a cancelled request's future neither finished nor dropped);
    /// else the identifier would never reserve again.
    fn is_reserving(&self, now: Instant) -> bool {
        (self.reserving).is_some_and(|since| now.saturating_duration_since(since) < ABANDONED_AFTER)
    }
}

/// The pool of `key`'s identifier, made if new; `None` when [`MAX_TRACKED`] identifiers are tracked, none idle.
fn pool_of<'p>(
    pools: &'p mut HashMap<String, Pool>,
    key: &str,
    now: Instant,
    length: Duration,
) -> Option<&'p mut Pool> {
    if pools.len() >= MAX_TRACKED && !pools.contains_key(key) {
        pools.retain(|_, pool| !pool.idle(now, length));
    }
    (pools.len() < MAX_TRACKED || pools.contains_key(key)).then(|| pools.entry(key.to_owned()).or_default())
}

/// A request asking Redis for an identifier's permits: when it ends, however, the pool is no longer reserving and
/// its waiters are woken, told whether a reply came.
struct Reserving<'a> {
    memory: &'a Mutex<Memory>,
    key: &'a str,
    replied: bool,
}

impl Drop for Reserving<'_> {
    fn drop(&mut self) {
        let memory = &mut *self.memory.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(pool) = memory.pools.get_mut(self.key) {
            pool.reserving = None;
            for waiter in pool.waiters.drain(..) {
                // A waiter that is gone (its request dropped) needs no answer.
                let _ = waiter.send(self.replied);
            }
        }
    }
}

impl Reserved {
    /// Reserves permits used within `length` for `limiter`, whose quota must be a GCRA, fixed-window, sliding-log or
    /// concurrency quota in code, on the server's clock. `length` is 1 ms to 60 s and at most half the bucket's refill
    /// time (GCRA) or the interval.
    pub fn new(limiter: Limiter, length: Duration) -> Result<Reserved> {
        let (quota, script) =
            match limiter.quota.and_then(|quota| Some((quota, Reserved::script_of(quota.algorithm())?))) {
                Some(found) => found,
                None => {
                    return Err(Error::InvalidConfig(format!(
                        "limiter {:?}: reserving permits needs a GCRA, fixed-window, sliding-log or concurrency quota \
                     given in code (Quota::gcra, Quota::fixed_window, Quota::sliding_log, Quota::concurrency)",
                        limiter.name
                    )))
                }
            };
        if limiter.now_ms.is_some() {
            return Err(Error::InvalidConfig(
                "reserved permits run on the server's clock and local time: not at an explicit time".into(),
            ));
        }
        if length < Duration::from_millis(1) || length > Duration::from_secs(60) {
            return Err(Error::InvalidConfig(format!(
                "a reservation's length must be from 1 ms to 60 s, got {} ms",
                length.as_millis()
            )));
        }
        // At most half the refill time keeps a GCRA reservation's skipped refill to an eighth of the burst; at most
        // half the interval keeps what unused permits cost below half the limit's time.
        let (span_ms, why) = match quota.algorithm() {
            Algorithm::Gcra => (
                quota.interval_ms() * u64::from(quota.limit()) / u64::from(quota.rate()),
                "its bucket refills from empty in",
            ),
            _ => (quota.interval_ms(), "its interval is"),
        };
        if length.as_millis() as u64 * 2 > span_ms {
            return Err(Error::InvalidConfig(format!(
                "a reservation of {} ms is too long for limiter {:?}: {why} {span_ms} ms, and a reservation may last \
                 at most half of that; use at most {} ms",
                length.as_millis(),
                limiter.name,
                span_ms / 2
            )));
        }
        Ok(Reserved { limiter, quota, script, length, memory: Arc::default() })
    }

    /// The script that decides a request and reserves permits for `algorithm`, if it reserves any.
    fn script_of(algorithm: Algorithm) -> Option<&'static Script> {
        match algorithm {
            Algorithm::Gcra => Some(&RESERVE_GCRA),
            Algorithm::FixedWindow => Some(&RESERVE_FIXED_WINDOW),
            Algorithm::SlidingLog => Some(&RESERVE_SLIDING_LOG),
            #[cfg(feature = "lend")]
            Algorithm::Concurrency => Some(&RESERVE_CONCURRENCY),
            _ => None,
        }
    }

    /// A client of the same limit sharing nothing with this one, as another process would be. Clones share permits.
    pub fn fresh(&self) -> Reserved {
        Reserved { memory: Arc::default(), ..self.clone() }
    }

    /// Takes `permits` for `id`: from this client's reserved permits when it can (no round trip), else from Redis,
    /// which may reserve more along with it.
    pub async fn limit<'i>(&self, id: impl Into<Identifier<'i>>, permits: u32) -> Result<ReservedDecision> {
        self.limiter.check_permits(permits)?;
        let identifier = id.into();
        let key = self.limiter.state_key(&identifier);
        // How many times this request waited for another's reply (it was counted already), and whether the last failed.
        let (mut waits, mut failed) = (0, false);
        let (block, pace, returns, reserving) = loop {
            let reply_in = {
                let memory = &mut *self.memory.lock().unwrap_or_else(PoisonError::into_inner);
                let now = Instant::now();
                let mut pool = pool_of(&mut memory.pools, &key, now, self.length);
                if let Some(pool) = pool.as_mut() {
                    if waits == 0 {
                        pool.ask(permits, now, self.length);
                        if self.quota.algorithm() == Algorithm::Concurrency {
                            pool.hold(permits, now);
                        }
                    }
                    if let Some(answer) = pool.answer(permits, &self.quota, now) {
                        return Ok(answer);
                    }
                }
                if let Some(decision) = memory.denials.check(&key, permits, now) {
                    return Ok(ReservedDecision { decision, local: true, span: (0, 0) });
                }
                match pool {
                    // Another request of this client is asking Redis for the identifier: its reply may answer this one
                    // too (two reservations at once would each be sized to the whole demand). Wait for two calls at
                    // most, none after a failure; never in Workers (see `requests_may_wait_on_each_other`).
                    Some(pool)
                        if pool.is_reserving(now)
                            && waits < MAX_WAITS
                            && !failed
                            && rest::requests_may_wait_on_each_other() =>
                    {
                        let (sender, reply_in) = oneshot::channel::<bool>();
                        pool.waiters.push(sender);
                        reply_in
                    }
                    Some(pool) if pool.is_reserving(now) => break (0, 0, Vec::new(), false),
                    Some(pool) => {
                        pool.reserving = Some(now);
                        // Returns go with this call, at most MAX_RETURNS; the rest free by themselves.
                        let returns = pool.returns.drain(..).take(MAX_RETURNS).collect();
                        let (block, pace) = self.block_and_pace(pool, permits);
                        break (block, pace, returns, true);
                    }
                    None => break (0, 0, Vec::new(), false),
                }
            };
            // The other request's reply is in, or its call failed or was dropped: look again.
            failed = !reply_in.await.unwrap_or(false);
            waits += 1;
        };
        // However this call ends, the requests waiting for it look again. Built only when reserving: a guard built
        // and dropped would end another request's reservation.
        let mut reserving = reserving.then(|| Reserving { memory: &self.memory, key: &key, replied: false });
        let algorithm = self.quota.algorithm();
        let id = algorithm.names_grants().then(receipt::fresh_grant_id);
        let call = self.reserve_call(&key, permits, (block, pace, false), id.as_deref(), returns);
        let sent = Instant::now();
        let reply = match call.script.run(&self.limiter.client, &call.keys, &call.args).await {
            // Redis refused the call (out of memory, loading, …): ask plainly, so that a denial Redis can give is not
            // left to the failure policy, which may admit.
            Err(Error::Unavailable { .. } | Error::StoreFull(_)) => {
                let decision = self.limiter.limit(&identifier, permits).await?;
                return Ok(ReservedDecision { decision, local: false, span: (0, 0) });
            }
            reply => reply?,
        };
        let Reservation { now, mut decision, blocks } =
            self.read_reply(reply, permits, (block, false), id.as_deref(), sent)?;
        if let Some(reserving) = reserving.as_mut() {
            reserving.replied = true;
        }
        let memory = &mut *self.memory.lock().unwrap_or_else(PoisonError::into_inner);
        match blocks.first().filter(|block| u64::from(permits) <= block.last) {
            // The wait is for the block's permits now: the slots the bucket would have given are its.
            Some(block) if !decision.success => {
                decision.retry_after = block.span(u64::from(permits), &self.quota).0 + 1
            }
            // A concurrency denial's wait is an upper bound: never remembered.
            _ if algorithm == Algorithm::Concurrency => {}
            _ => memory.denials.block(&key, permits, sent, decision),
        }
        if let Some(pool) = memory.pools.get_mut(&key) {
            pool.blocks.extend(blocks);
            pool.room = Some(decision.remaining);
            if decision.success {
                pool.granted = pool.granted.saturating_add(permits);
            }
            // A concurrency lease Redis granted: held until released or expired.
            if let Some(lease) = decision.receipt.filter(|_| algorithm == Algorithm::Concurrency) {
                let expires = sent + Duration::from_millis(self.quota.interval_ms());
                pool.leases.push((lease, expires));
            }
        }
        Ok(ReservedDecision { decision, local: false, span: if decision.success { (now, now) } else { (0, 0) } })
    }

    /// What a reservation asks besides a request of `permits`, from this client's demand: the block, and for a sliding
    /// log the pace (ms between this client's requests).
    fn block_and_pace(&self, pool: &Pool, permits: u32) -> (u32, u64) {
        let (demand, pace) = match self.quota.algorithm() {
            // On a contended log a quarter of the demand keeps tranches to a request or two: a permit held waiting for
            // this client's requests is one no other client may use. A log that had room for all of it is not
            // contended.
            Algorithm::SlidingLog => {
                let asked = pool.demand(permits);
                let lately = u64::from(asked) + u64::from(permits);
                let block = match pool.room {
                    Some(room) if room >= u64::from(asked) => asked,
                    _ => (asked.div_ceil(SLIDING_LOG_SHARE)).min(pool.share().max(permits)),
                };
                (block, self.length.as_millis() as u64 * u64::from(permits) / lately)
            }
            Algorithm::Concurrency => (pool.held_at_once(permits), 0),
            _ => (pool.demand(permits), 0),
        };
        (demand.min(self.quota.limit()), pace)
    }

    /// How far from now reserved permits may be used: the block's length, but a fixed window's until the window ends
    /// (they are counted in it whenever used), at most 60 s.
    fn horizon(&self) -> u64 {
        let length = self.length.as_millis() as u64;
        match self.quota.algorithm() {
            Algorithm::FixedWindow => self.quota.interval_ms().clamp(length, 60_000),
            _ => length,
        }
    }

    /// The call of the reserve script for `permits` on `key`, reserving `block` more at the sliding log's `pace`, and
    /// taking the request too unless `only` (see [`ReservedAll`]). `id` is a log's grant id; `returns`, its returns.
    fn reserve_call(
        &self,
        key: &str,
        permits: u32,
        (block, pace, only): (u32, u64, bool),
        id: Option<&str>,
        returns: Vec<String>,
    ) -> ScriptCall<'static> {
        // Each reserved permit has at least a quarter of the length (the lead) to be used in.
        let lead = (self.length.as_millis() as u64 / 4).max(1);
        let horizon = self.horizon();
        let only = if only { ":only" } else { "" };
        let mut args = vec![self.quota.request_argument(permits), format!("{block}:{lead}:{horizon}:{pace}{only}")];
        if let Some(id) = id {
            // The grant id, the server's clock, then the returns (lua/reserve/log.lua).
            args.extend([id.to_owned(), String::new()]);
            args.extend(returns);
        }
        ScriptCall { script: self.script, keys: vec![key.to_owned()], args }
    }

    /// The reply of [`reserve_call`](Reserved::reserve_call), sent at `sent`, checked: the decision and the blocks.
    fn read_reply(
        &self,
        reply: Value,
        permits: u32,
        (block, only): (u32, bool),
        id: Option<&str>,
        sent: Instant,
    ) -> Result<Reservation> {
        let received = Instant::now();
        let (limit, algorithm, horizon) = (self.quota.limit(), self.quota.algorithm(), self.horizon());
        let numbers = (reply.into_array()?.into_iter()).map(Value::into_u64).collect::<Result<Vec<u64>>>()?;
        // Seven numbers, then for a sliding log a pair for each tranche after the first (see its script).
        let most = if algorithm.names_grants() { 5 + 2 * MAX_TRANCHES } else { 7 };
        let &[granted, now, reserved, fourth, remaining, reset, retry_after, ref pairs @ ..] = &numbers[..] else {
            return Err(Error::malformed("7 numbers", format!("{} numbers", numbers.len())));
        };
        if numbers.len() > most || pairs.len() % 2 == 1 {
            return Err(Error::malformed(
                format!("7 numbers, then at most {} pairs", (most - 7) / 2),
                format!("{} numbers", numbers.len()),
            ));
        }
        // The tranches as (permits, fourth number); the first holds what the later ones leave of `reserved`. The fourth
        // number is GCRA's slots' start (units), a fixed window's end of use, or a sliding log's start of use.
        let mut tranches = vec![(reserved, fourth)];
        for pair in pairs.chunks(2) {
            tranches[0].0 = tranches[0].0.saturating_sub(pair[0]);
            tranches.push((pair[0], pair[1]));
        }
        let counted: u64 = tranches.iter().fold(0, |sum, &(count, _)| sum.saturating_add(count));
        let schedule_of = |fourth: u64| match algorithm {
            Algorithm::Gcra => Schedule::Slots { charged: fourth },
            Algorithm::FixedWindow => Schedule::Span { from: 0, until: fourth },
            _ => Schedule::Span { from: fourth, until: fourth.saturating_add(horizon) },
        };
        // Uses past the horizon would be uses Redis did not count.
        let well_formed = |&(count, fourth): &(u64, u64)| {
            (count > 0 || reserved == 0)
                && !matches!(schedule_of(fourth), Schedule::Span { from, until } if from > horizon || until > from + horizon)
        };
        // Bounds that keep every span's arithmetic far from overflow: the clock within JS's exact integers, GCRA's
        // slots within what the script reserves from.
        let rate = u64::from(self.quota.rate());
        let bounded = now <= 1 << 53
            && (algorithm != Algorithm::Gcra
                || reserved == 0
                || fourth <= u64::from(limit) * self.quota.interval_ms() + horizon * rate);
        if !(granted == 0 || (granted == u64::from(permits) && !only))
            || !bounded
            || reserved > u64::from(block)
            || counted != reserved
            || !tranches.iter().all(well_formed)
        {
            return Err(Error::malformed(
                format!(
                    "{} permits granted, at most {block} reserved in tranches of at least 1, usable for \
                     at most {horizon} ms",
                    if only { "no".to_owned() } else { format!("{permits} or no") }
                ),
                format!(
                    "{granted} granted, {reserved} reserved, {fourth} (where their use starts or ends), then {}",
                    (pairs.iter().map(u64::to_string).collect::<Vec<_>>()).join(" ")
                ),
            ));
        }
        // A concurrency lease Redis granted has the receipt the single-limit script would give it.
        let lease = match (&id, algorithm) {
            (Some(id), Algorithm::Concurrency) if granted > 0 => {
                let expiry = now.saturating_add(self.quota.interval_ms());
                Some(format!("{permits}:{}", receipt::log_mark(expiry, id)).parse::<Receipt>()?)
            }
            _ => None,
        };
        let decision =
            Decision { success: granted > 0, limit: limit.into(), remaining, reset, retry_after, receipt: lease };
        let blocks: Vec<Block> = (tranches.into_iter())
            .filter(|&(count, _)| count > 0)
            .map(|(count, fourth)| Block {
                next: 1,
                last: count,
                uses: Uses::none(algorithm),
                ended: false,
                // A tranche frees one interval after its span.
                grant: id.as_ref().map(|id| {
                    let expiry = now.saturating_add(fourth + horizon + self.quota.interval_ms());
                    receipt::log_mark(expiry, id)
                }),
                sent,
                received,
                now,
                schedule: schedule_of(fourth),
                reset,
            })
            .collect();
        Ok(Reservation { now, decision, blocks })
    }

    /// Forgets the denials Redis gave this client for `id` (after a reset of its state). Reserved permits stay.
    pub fn forget_denials<'i>(&self, id: impl Into<Identifier<'i>>) {
        let key = self.limiter.state_key(id);
        let memory = &mut *self.memory.lock().unwrap_or_else(PoisonError::into_inner);
        memory.denials.forget(|denied| denied == key);
    }

    /// Releases a concurrency lease this limiter granted: a lent one goes back to its block (no round trip), one Redis
    /// granted is released there. `false` if it was no longer held (a lease from a block returned since stays held in
    /// Redis until it would expire: under-admission).
    pub async fn release<'i>(&self, id: impl Into<Identifier<'i>>, lease: &Lease) -> Result<bool> {
        let id = id.into();
        match self.take_back(&id, lease) {
            Some(released) => Ok(released.success),
            None => self.limiter.release(id, lease).await,
        }
    }

    /// The local part of [`release`](Reserved::release): for a lent lease, the release's decision (`remaining`: what
    /// its block can lend now); for one Redis granted, `None` after forgetting it here.
    pub(crate) fn take_back(&self, id: &Identifier<'_>, lease: &Lease) -> Option<Decision> {
        let key = self.limiter.state_key(id);
        let memory = &mut *self.memory.lock().unwrap_or_else(PoisonError::into_inner);
        let pool = memory.pools.get_mut(&key);
        if !lease.mark().starts_with(LOCAL_MARK) {
            if let Some(pool) = pool {
                pool.leases.retain(|(held, _)| held != lease);
            }
            return None;
        }
        let interval = Duration::from_millis(self.quota.interval_ms());
        let now = Instant::now();
        let block = pool.and_then(|pool| {
            (pool.blocks.iter_mut()).find_map(|block| block.give_back(interval, Some(lease), now).then_some(block))
        });
        Some(Decision {
            success: block.is_some(),
            limit: self.quota.limit().into(),
            remaining: block.as_ref().map_or(0, |block| block.last + 1 - block.next),
            reset: block.map_or(0, |block| block.reset),
            retry_after: 0,
            receipt: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quiet_pool_is_dropped_with_its_block_but_not_while_a_lease_is_out() {
        let (length, start) = (Duration::from_millis(100), Instant::now());
        let mut pool = Pool::default();
        pool.ask(1, start, length);
        pool.blocks.push(Block {
            next: 1,
            last: 3,
            uses: Uses::Grants(Vec::new()),
            ended: false,
            grant: None,
            sent: start,
            received: start,
            now: 0,
            schedule: Schedule::Span { from: 0, until: 100 },
            reset: 0,
        });
        // Asked within two spans of the length: kept.
        assert!(!pool.idle(start + length, length));
        // Quiet since: dropped, unused permits and all.
        let later = start + 2 * length;
        assert!(pool.idle(later, length));
        // A call under way, or a lease its holder may still release here, keeps it.
        pool.reserving = Some(later);
        assert!(!pool.idle(later, length));
        // Unless the call was abandoned long ago.
        assert!(pool.idle(later + ABANDONED_AFTER, length));
        pool.reserving = None;
        pool.leases.push(("1:5-a".parse().unwrap(), later + length));
        assert!(!pool.idle(later, length));
        assert!(pool.idle(later + length, length));
    }
}
