//! Reserved permits: decisions with no round trip for the identifiers a client sees often, exact by construction
//! (GCRA, fixed window, sliding log, concurrency).
//!
//! A [`Reserved`] limiter sends each request it cannot answer itself to Redis (`lua/reserve/<algorithm>.lua`), which
//! decides it as the algorithm's plain decision and reserves, along with it, permits for the identifier: as many as
//! the client asked for in the last span of the block's length. Each reserved permit has a span of the server's
//! clock in which its use keeps every window within the limit (each script's comment has the argument):
//! - **GCRA**: each permit is a slot, usable from its slot's end less the burst (so permits start on the pace the
//!   limit refills at when the bucket is empty, at once when it has room) until its slot's start; slots start within
//!   the block's length. When the bucket is busy a permit can wait almost the burst's whole time for its use. The
//!   script marks where its slots end in the state, and a refund of a plain grant never moves TAT back over them.
//! - **Fixed window**: the permits are counted in the current window, and usable until its last ms (at most 60 s).
//!   A window with less than a quarter of the length left reserves nothing.
//! - **Sliding log**: the permits are logged in tranches (up to 8 grants), each usable for the block's length from its
//!   start (within the length, else fewer are reserved), and freeing one interval after that use may end. The permits
//!   free now start at once; on a busy identifier the others start as grants free, each tranche no sooner than this
//!   client's requests reach it at the pace they came lately (the client sends the pace). A tranche counts against the
//!   limit from its start only, so the grants that free between this client's tranches go to other clients' decisions
//!   instead of waiting unused for this client's requests. When this client is done with a tranche (used up, or its
//!   span over), its next call for the identifier returns it: the unused permits free at once, the used ones one
//!   interval after their use, in groups by the latest server time each use may have had (a return is idempotent: it
//!   names the tranche's grant and absolute numbers). A tranche never returned (its identifier went cold) is held for
//!   the length plus the interval.
//!
//! - **Concurrency**: the permits are logged as one grant (`lua/reserve/concurrency.lua`, the sliding log's script
//!   with concurrency's decision), of the permits free now only (a lease is mostly released well before its expiry,
//!   so booking the ones after it would hold permits idle), freeing one interval after the block's length. Within
//!   the length the client lends them as leases: a lease given back with [`Reserved::release`] (or held for the
//!   interval) is lent again, so at most the block's permits are out at once, each for at most the interval, all
//!   within the grant's life. The block is returned as a sliding log's tranche is, naming the leases still out
//!   (each frees one interval after it was lent; the others at once). A lease lent from the block has a local
//!   receipt (`<permits>:local-<id>`) that only this client's [`Reserved::release`] knows; a request Redis decided
//!   has its lease's usual receipt.
//!
//! The other algorithms reserve nothing: the token bucket's limit is GCRA's (use GCRA, whose state says where each
//! slot lies); the sliding window is an estimate whose stated error a reservation would widen.
//!
//! What the client must keep, and how:
//! - **Use within the span.** The spans are on the server's clock. A permit's start moves to local time from when
//!   the reply arrived (after the server's `now`, so the local start falls after the server's), its end from when
//!   the request left (before the server's `now`, so the local end falls before the server's), and the end less a
//!   margin of a tenth of the span: clocks' rates drift, and in Workers the clock stands still between I/O.
//! - **Size to demand.** What this client asked for the identifier in the last span of the block's length: a
//!   client that sees an identifier once never reserves. A sliding log reserves a quarter of that, and no more than
//!   the client was granted lately (see `SLIDING_LOG_SHARE`). Concurrency reserves the most permits this client held
//!   at once lately (its leases lent and those Redis granted, with the request) besides the request, since a lease
//!   is lent again: a client that holds one lease at a time reserves nothing.
//! - **One reservation at a time.** A request that finds no permit while another request of this client is asking
//!   Redis for the identifier waits for that reply (for two at most, none after a failed call) and looks again:
//!   reservations made at once would each be sized to the whole demand. In Cloudflare Workers it asks Redis itself,
//!   without reserving, instead: there a request that waits for another request's call is cancelled when that
//!   request ends.
//! - **What it costs.** A permit not used by its end is lost until the limit refills (GCRA), its window ends (fixed
//!   window) or it frees (sliding log); a sliding log's permit is held from its start to its use; and on a GCRA
//!   bucket that is not busy, a reservation skips the refill up to a quarter of the block's length from now, so
//!   that its first permits have time to be used. `bench/reserved.mjs`
//!   measures the grants against the limit's capacity. Only a sliding log's blocks are returned (see above): a GCRA
//!   or fixed-window return would have to prove that no decision since was made against the permits it gives back.
//! - **Denials** are answered locally too: until the next reserved permit starts, or as the block cache answers them
//!   ([`BlockCache`]: until a denial's `retry_after`, for requests at least as large).
//!
//! Under several limits at once, [`ReservedAll`] keeps each limit's blocks as this module does, and grants locally
//! when every limit has a permit (see `several.rs`).
//!
//! A decision from reserved permits carries how many are left as `remaining` (an estimate: other clients hold
//! theirs), the `reset` of the reply that reserved them, and no receipt (a reserved grant is not refunded), but for
//! a concurrency lease: its local receipt, to release it.
//! `reset()` on the identifier, or a lowered quota, does not recall reserved permits: they run out within the burst's
//! time (GCRA) or the block's length.

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
use crate::script::{Script, ScriptCall};
use crate::time::Instant;
use crate::value::Value;

mod several;
pub use several::{ReservedAll, ReservedDecisions};

/// The identifiers a client tracks at most (and the denials it remembers); past it, a new identifier is decided
/// without reserving.
const MAX_TRACKED: usize = 10_000;

/// A reservation's call under way for this long was abandoned (see [`Pool::is_reserving`]): longer than any call
/// lasts (a client's timeout is at most what a JS timer waits, but a reservation waited on so long helps no one).
const ABANDONED_AFTER: Duration = Duration::from_secs(60);

/// The returns one call carries at most, and the groups of uses one return names at most, as
/// `lua/reserve/sliding_log.lua` accepts them.
const MAX_RETURNS: usize = 100;
const MAX_GROUPS: usize = 16;

/// The times a request waits for another request's reservation at most (see [`Reserved::limit`]).
const MAX_WAITS: u32 = 2;

/// A sliding log reserves this part of what a client asked for in the last span of the block's length (see where
/// it is used).
const SLIDING_LOG_SHARE: u32 = 4;

/// The tranches one sliding-log reply holds at most (`lua/reserve/sliding_log.lua`).
const MAX_TRANCHES: usize = 8;

/// How the mark of a lease lent from reserved permits begins (`<permits>:local-<id>`): no script's receipt begins
/// so (theirs start with a digit), so such a receipt sent to Redis is refused, never taken for a grant.
const LOCAL_MARK: &str = "local-";

/// A GCRA, fixed-window, sliding-log or concurrency limiter that reserves permits for the identifiers it sees often:
/// see the module's docs.
#[derive(Debug, Clone)]
pub struct Reserved {
    limiter: Limiter,
    quota: Quota,
    /// The algorithm's script that decides and reserves (`lua/reserve/<algorithm>.lua`).
    script: &'static Script,
    length: Duration,
    memory: Arc<Mutex<Memory>>,
}

/// What a client remembers: its reserved permits and demand per identifier (by state key), and the denials Redis
/// gave it, which answer again until their `retry_after` as the block cache's rule allows.
#[derive(Debug)]
struct Memory {
    pools: HashMap<String, Pool>,
    denials: BlockCache,
}

impl Default for Memory {
    fn default() -> Memory {
        Memory {
            pools: HashMap::new(),
            denials: BlockCache::new(MAX_TRACKED),
        }
    }
}

/// One decision of a [`Reserved`] limiter, and where it was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReservedDecision {
    /// The decision.
    pub decision: Decision,
    /// True when it was made locally (from reserved permits, or a denial remembered): no round trip.
    pub local: bool,
    /// For a grant, the span on the server's clock (unix ms) within which it is used: a reserved GCRA permit's span
    /// (see the module's docs); for a fixed window's or sliding log's reserved permit, where this use falls on the
    /// server's clock, from the local times the reservation left and arrived; or `[now, now]` for a request Redis
    /// decided. (0, 0) for a denial, and for a request decided without reserving after Redis refused a reservation
    /// (its receipt names when). What an exactness check counts it in.
    pub span: (u64, u64),
}

/// What a client keeps per identifier.
#[derive(Debug, Default)]
struct Pool {
    /// Blocks not used up: more than one when this client's tasks asked Redis at the same time.
    blocks: Vec<Block>,
    /// Returns of blocks this client is done with, for the next call to Redis for the identifier (sliding log: see
    /// [`Block::grant`]).
    returns: Vec<String>,
    /// Since when a request of this client is asking Redis for the identifier, if one is (see
    /// [`Pool::is_reserving`]), and the requests waiting for its reply (see [`Reserved::limit`]).
    reserving: Option<Instant>,
    waiters: Vec<oneshot::Sender<bool>>,
    /// Permits asked in the current span of the block's length (from `span_started`), and in the one before; and
    /// permits granted in the same spans.
    asked: u32,
    asked_before: u32,
    granted: u32,
    granted_before: u32,
    span_started: Option<Instant>,
    /// The permits the limit had left for the identifier after this client's last call to Redis for it, if it made
    /// one: a sliding log with room for more than this client asks is not contended (see
    /// [`Reserved::block_and_pace`]).
    room: Option<u64>,
    /// Concurrency: the most permits this client held at once in the current span and the one before (see
    /// [`Pool::hold`]), and the leases Redis granted it that it has not released: their receipts, and when they
    /// expire locally.
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
    /// Grants (GCRA, fixed window, sliding log), in groups: how many, and the latest server time (unix ms) at which
    /// the last of them may have been used, in the order used; at most [`MAX_GROUPS`], the last one taking in later
    /// uses (a later time only frees them later).
    Grants(Vec<(u64, u64)>),
    /// Concurrency: the leases lent out and not given back (released, or held for the interval). Only a build
    /// with the `lend` feature has any (see [`Lending`]).
    #[cfg_attr(not(feature = "lend"), allow(dead_code))]
    Loans(Vec<Loan>, Lending),
}

/// Whether this build lends reserved concurrency permits: `()` with the `lend` feature. Without it (the Worker's
/// module: its rules have no concurrency limits) an empty type, so that no [`Uses::Loans`] can exist and the
/// compiler leaves out every path that handles one (2.3 KB of the module, gzipped), with no `cfg` on each of them.
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

/// Reserved permits: `next..=last` (counted from 1 as the script counts them) are the client's, each usable in its
/// own span (see [`Block::span`]). For concurrency `next - 1` are lent out, and go back to the block as their
/// leases are given back.
#[derive(Debug, Clone)]
struct Block {
    next: u64,
    last: u64,
    /// What the block's permits were used for: what a return says (see `grant`).
    uses: Uses,
    /// Whether its span has ended: it lends nothing more (a concurrency block's permits come back while it lasts).
    ended: bool,
    /// For a block that frees earlier when returned (a sliding log's tranche), the grant that logged it,
    /// '<expiry>-<id>': when the client is done with the block, the next call for the identifier says when it used
    /// its permits (`lua/reserve/log.lua`).
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
    /// The `i`-th permit's span on the server's clock, in ms after `now`: for a GCRA slot, from its end less the
    /// burst to its start (see `lua/reserve/gcra.lua`); else the block's one span, shared by its permits.
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

    /// Counts `count` permits used, the last of them at `latest` on the server's clock at the latest: a grant, or
    /// for concurrency a lease lent (its local receipt is returned).
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
                loans.push(Loan {
                    id,
                    permits: count,
                    latest,
                    lent: now,
                });
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

    /// What the client says when it is done with a block that is returned: '<grant>:<permits>' then each group of
    /// uses, '<used>:<last use>' ('0:<now>' when none was used; for concurrency, when no lease is out).
    fn return_of(&self, grant: &str) -> String {
        let mut text = format!("{grant}:{}", self.last);
        let groups = match &self.uses {
            Uses::Grants(groups) => groups.clone(),
            Uses::Loans(loans, _) => {
                // The leases still out in at most MAX_GROUPS groups, in the order lent (which is the order of the
                // latest time each may have been lent), each with the latest of its leases: later only frees later.
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

    /// The `i`-th permit's span in local time: its start from when the reply arrived (after the server's `now`),
    /// plus a millisecond for a clock that reads whole milliseconds (a permit usable at the server's `now` is usable
    /// from the reply on: that moment has passed); its end from when the request left (before the server's `now`),
    /// less a margin of a tenth of the span.
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

    /// Concurrency: the permits this client holds now (leases lent from its blocks and those Redis granted it that
    /// it has not released nor seen expire) with `permits` more, counted in the current span's peak.
    fn hold(&mut self, permits: u32, now: Instant) {
        self.leases.retain(|(_, expires)| now < *expires);
        let lent = (self.blocks.iter())
            .filter(|block| matches!(block.uses, Uses::Loans(..)))
            .map(|block| block.next - 1);
        let from_redis = self.leases.iter().map(|(lease, _)| u64::from(lease.permits()));
        let holding = u32::try_from(lent.chain(from_redis).sum::<u64>() + u64::from(permits)).unwrap_or(u32::MAX);
        self.peak = self.peak.max(holding);
    }

    /// Concurrency: how many permits to reserve besides a request of `permits`: the most this client held at once
    /// lately, with that request, less the request (a lease is lent again once given back, so what it needs is how
    /// many it holds at once, not how many it asks). A client that holds one lease at a time reserves nothing.
    fn held_at_once(&self, permits: u32) -> u32 {
        self.peak.max(self.peak_before).saturating_sub(permits)
    }

    /// How many permits to reserve besides a request of `permits`: what was asked lately, but for this request.
    fn demand(&self, permits: u32) -> u32 {
        // Saturating: a request that waited for another's reply was counted in the span it came in, and `asked` may
        // have started a new span since (with less).
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
        Some(ReservedDecision {
            decision: self.standing(index, quota, usable_from, now),
            local: true,
            span: (0, 0),
        })
    }

    /// What the block at `index`, whose permits for a request are usable from `usable_from` (see [`Pool::soonest`]),
    /// answers now without taking them: allowed once they are usable, and how many it holds.
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

    /// The block whose `permits` next can be used soonest, from when and until when (local time), and its index:
    /// after dropping the permits whose span has ended, and the blocks done (a sliding log's to be returned). `None`
    /// when no block holds them.
    fn soonest(&mut self, permits: u32, quota: &Quota, now: Instant) -> Option<(Instant, Instant, usize)> {
        let count = u64::from(permits);
        // Permits whose span has ended are lost (see the module's docs); a block that cannot give `permits` is done.
        for block in &mut self.blocks {
            block.give_back(Duration::from_millis(quota.interval_ms()), None, now);
            match block.schedule {
                // Slots end one after another: skip those that have ended.
                Schedule::Slots { .. } => {
                    while block.next <= block.last && block.local_span(block.next, quota).1 <= now {
                        block.next += 1;
                    }
                }
                // One span for every permit: all have ended, or none (a block may hold many permits). A concurrency
                // block with every permit lent out still lends each again when its lease is given back.
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
                // A concurrency block whose span has ended lends nothing more, but while leases are still out it
                // waits for them (for as long again as its span): returned then, the permits of leases given back
                // free at once, instead of one interval after they were lent.
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
        // The `permits` next of each block are used at one moment: after the last one's start, before the first
        // one's end. The block whose moment comes soonest answers.
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
            // Every permit of the block shares its span: the one of this use is narrower, from when it is on the
            // server's clock at the earliest (measured from the reply's arrival) to the latest (from the request's
            // departure). A return frees this use one interval after the latest (and a margin), so it is what a
            // check must count.
            Schedule::Span { .. } => (
                (now.saturating_duration_since(block.received).as_millis() as u64).max(start),
                ceil_ms(now.saturating_duration_since(block.sent)).min(end),
            ),
        };
        // A return frees the use one interval after this (see `lua/reserve/log.lua`): the latest server time
        // it may have had, with a margin for a clock that runs slow (1 ms and a hundredth of the time since the
        // reservation left), as the span's end has its own.
        let receipt = block.record_use(count, block.now + span.1 + 1 + span.1 / 100, now);
        let decision = Decision {
            success: true,
            limit: quota.limit().into(),
            remaining: block.last + 1 - block.next,
            reset: block.reset,
            retry_after: 0,
            receipt,
        };
        ReservedDecision {
            decision,
            local: true,
            span: (block.now + span.0, block.now + span.1),
        }
    }

    /// Nothing worth keeping: no demand for two spans of `length` (what it asked then would no longer size a
    /// block), no call under way, and no lease out that its holder may still release here. (Counting what it asked
    /// instead kept every pool: a request always asks.) Its blocks and returns go with it: their unused permits are
    /// lost and its tranches free by themselves, under-admission only. (Keeping every pool that holds a block kept,
    /// for good, each identifier that asked twice and never came back: after 10,000 of them no new one reserved.)
    fn idle(&self, now: Instant, length: Duration) -> bool {
        let quiet = (self.span_started).is_none_or(|started| now.saturating_duration_since(started) >= 2 * length);
        let lending = self.leases.iter().any(|(_, expires)| now < *expires)
            || (self.blocks.iter()).any(|block| matches!(&block.uses, Uses::Loans(loans, _) if !loans.is_empty()));
        quiet && !self.is_reserving(now) && !lending
    }

    /// Whether a request of this client is asking Redis for the identifier. A call under way for longer than
    /// [`ABANDONED_AFTER`] was abandoned: its request's future was neither run to its end nor dropped (workerd may
    /// leave a cancelled request's so), and its guard would then never say it ended: the identifier would never
    /// reserve again, and its pool never be dropped.
    fn is_reserving(&self, now: Instant) -> bool {
        (self.reserving).is_some_and(|since| now.saturating_duration_since(since) < ABANDONED_AFTER)
    }
}

/// The pool of the identifier whose state key is `key`, made if new; `None` when this client tracks
/// [`MAX_TRACKED`] identifiers already, none of them idle (that identifier is then decided without reserving).
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

/// A request asking Redis for an identifier's permits: when it ends, however (a reply, an error, or the call
/// dropped), the pool is no longer reserving and the requests that waited for it are woken, told whether a reply
/// came, to look again. Dropped after the reply's blocks are in the pool.
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
    /// Reserves permits used within `length` (1 ms to 60 s; at most half the time a GCRA bucket takes to refill
    /// from empty, or half a fixed window's, sliding log's or concurrency limit's interval) for `limiter`, whose
    /// quota must be a GCRA, fixed-window, sliding-log or concurrency quota given in code, decided on the server's
    /// clock.
    pub fn new(limiter: Limiter, length: Duration) -> Result<Reserved> {
        let (quota, script) = match limiter
            .quota
            .and_then(|quota| Some((quota, Reserved::script_of(quota.algorithm())?)))
        {
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
        // GCRA: on an idle bucket a reservation skips the refill of a quarter of its length (see the script): at most
        // half the time the bucket takes to refill from empty keeps that to an eighth of the burst. A sliding log
        // (and a concurrency block) holds reserved permits for the length beyond the interval, and a fixed window's
        // reservations end with it: at most half the interval keeps what unused permits cost below half the limit's
        // time.
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
        Ok(Reserved {
            limiter,
            quota,
            script,
            length,
            memory: Arc::default(),
        })
    }

    /// The script that decides a request and reserves permits for `algorithm`, if it reserves any (see the module's
    /// docs for why the others do not).
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

    /// A client of the same limit that shares nothing with this one (no reserved permit, no remembered denial):
    /// what another process or isolate would be. Clones share their reserved permits.
    pub fn fresh(&self) -> Reserved {
        Reserved {
            memory: Arc::default(),
            ..self.clone()
        }
    }

    /// Takes `permits` for `id`: from permits this client reserved when it can (no round trip), else from Redis,
    /// which may reserve more along with it.
    pub async fn limit<'i>(&self, id: impl Into<Identifier<'i>>, permits: u32) -> Result<ReservedDecision> {
        self.limiter.check_permits(permits)?;
        let identifier = id.into();
        let key = self.limiter.state_key(&identifier);
        // How many times this request waited for another's reply (see below; then it has been counted already), and
        // whether the last of those calls failed.
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
                    return Ok(ReservedDecision {
                        decision,
                        local: true,
                        span: (0, 0),
                    });
                }
                match pool {
                    // Another request of this client is asking Redis for the identifier: its reply may answer this
                    // one too. Two reservations at once would each be sized to the whole demand, and a block twice
                    // too large leaves its permits idle (a sliding log's) or lost. A request waits for two calls
                    // at most (the first may have left before this request's demand was seen), and for none after
                    // one that failed (a store that times out); then it asks Redis itself, without reserving. So
                    // no request waits for more than three calls' time, or two timeouts. In Cloudflare Workers
                    // a request never waits for another's call (see `requests_may_wait_on_each_other`).
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
                        // Returns go with this call; at most 100 (the script's bound), the rest free by themselves.
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
        // However this call ends, the requests waiting for it look again (see `Reserving`).
        // (Built only when reserving: a guard built and dropped would end another request's reservation.)
        let mut reserving = reserving.then(|| Reserving {
            memory: &self.memory,
            key: &key,
            replied: false,
        });
        let algorithm = self.quota.algorithm();
        let id = algorithm.names_grants().then(receipt::fresh_grant_id);
        let call = self.reserve_call(&key, permits, (block, pace, false), id.as_deref(), returns);
        let sent = Instant::now();
        let reply = match call.script.run(&self.limiter.client, &call.keys, &call.args).await {
            // Redis refused the call (out of memory, loading, …): a reservation writes even when the request is
            // denied, where a plain denial mostly writes nothing (a log's drops what has freed, which out of memory
            // still allows) and may still be answered. Asked plainly then (one more round trip, only on this
            // failure), so that a denial Redis can give is not left to the failure policy, which may admit. (A
            // concurrency lease it grants is not counted in this client's next block's size: a smaller block,
            // nothing else.)
            Err(Error::Unavailable { .. } | Error::StoreFull(_)) => {
                let decision = self.limiter.limit(&identifier, permits).await?;
                return Ok(ReservedDecision {
                    decision,
                    local: false,
                    span: (0, 0),
                });
            }
            reply => reply?,
        };
        let Reservation {
            now,
            mut decision,
            blocks,
        } = self.read_reply(reply, permits, (block, false), id.as_deref(), sent)?;
        if let Some(reserving) = reserving.as_mut() {
            reserving.replied = true;
        }
        let memory = &mut *self.memory.lock().unwrap_or_else(PoisonError::into_inner);
        match blocks.first().filter(|block| u64::from(permits) <= block.last) {
            // The wait is for the block's permits now: the slots the bucket would have given are its.
            Some(block) if !decision.success => {
                decision.retry_after = block.span(u64::from(permits), &self.quota).0 + 1
            }
            // A concurrency denial's wait is an upper bound (leases are released sooner): never remembered.
            _ if algorithm == Algorithm::Concurrency => {}
            _ => memory.denials.block(&key, permits, sent, decision),
        }
        if let Some(pool) = memory.pools.get_mut(&key) {
            pool.blocks.extend(blocks);
            pool.room = Some(decision.remaining);
            if decision.success {
                pool.granted = pool.granted.saturating_add(permits);
            }
            // A concurrency lease Redis granted: this client holds it until it releases it or it expires.
            if let Some(lease) = decision.receipt.filter(|_| algorithm == Algorithm::Concurrency) {
                let expires = sent + Duration::from_millis(self.quota.interval_ms());
                pool.leases.push((lease, expires));
            }
        }
        Ok(ReservedDecision {
            decision,
            local: false,
            span: if decision.success { (now, now) } else { (0, 0) },
        })
    }

    /// What a reservation asks besides a request of `permits`, from this client's demand in `pool`: the block, and
    /// for a sliding log the pace (see lua/reserve/log.lua, Pacing).
    fn block_and_pace(&self, pool: &Pool, permits: u32) -> (u32, u64) {
        let (demand, pace) = match self.quota.algorithm() {
            // A sliding log's tranches start as permits free, no sooner than this client's requests reach them at
            // the pace they came lately (ms apart), but a tranche of several requests waits for the last of them. On
            // a contended log a quarter of the demand keeps tranches to a request or two (eight at most), for more
            // round trips (bench/reserved.mjs measures both): a permit held waiting for this client's requests is
            // one no other client may use. A log that had room for all of it after this client's last call is not
            // contended: the whole demand, which its room holds at once.
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
    /// (they are counted in it whenever they are used, and a block sized for the length need not be lost at its end:
    /// at most 60 s, the scripts' bound).
    fn horizon(&self) -> u64 {
        let length = self.length.as_millis() as u64;
        match self.quota.algorithm() {
            Algorithm::FixedWindow => self.quota.interval_ms().clamp(length, 60_000),
            _ => length,
        }
    }

    /// The call of the algorithm's reserve script for a request of `permits` on `key`, reserving `block` more with
    /// the sliding log's `pace`, and taking the request too unless `only` (a request under several limits is decided
    /// by all of them together: see [`ReservedAll`]). `id` is a log's fresh grant id; `returns`, its tranches this
    /// client is done with.
    fn reserve_call(
        &self,
        key: &str,
        permits: u32,
        (block, pace, only): (u32, u64, bool),
        id: Option<&str>,
        returns: Vec<String>,
    ) -> ScriptCall<'static> {
        // Each reserved permit has at least a quarter of the length (the lead) to be used in: a round trip and the
        // margin must fit.
        let lead = (self.length.as_millis() as u64 / 4).max(1);
        let horizon = self.horizon();
        let only = if only { ":only" } else { "" };
        let mut args = vec![
            self.quota.request_argument(permits),
            format!("{block}:{lead}:{horizon}:{pace}{only}"),
        ];
        if let Some(id) = id {
            // The grant id, the server's clock, then the returns (lua/reserve/log.lua).
            args.extend([id.to_owned(), String::new()]);
            args.extend(returns);
        }
        ScriptCall {
            script: self.script,
            keys: vec![key.to_owned()],
            args,
        }
    }

    /// The reply of [`reserve_call`](Reserved::reserve_call), sent at `sent` (local time), checked: the request's
    /// decision and the blocks reserved with it.
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
        let numbers = (reply.into_array()?.into_iter())
            .map(Value::into_u64)
            .collect::<Result<Vec<u64>>>()?;
        // Seven numbers, then for a sliding log a pair for each tranche after the first (see its script).
        let most = if algorithm.names_grants() {
            5 + 2 * MAX_TRANCHES
        } else {
            7
        };
        let &[granted, now, reserved, fourth, remaining, reset, retry_after, ref pairs @ ..] = &numbers[..] else {
            return Err(Error::malformed("7 numbers", format!("{} numbers", numbers.len())));
        };
        if numbers.len() > most || pairs.len() % 2 == 1 {
            return Err(Error::malformed(
                format!("7 numbers, then at most {} pairs", (most - 7) / 2),
                format!("{} numbers", numbers.len()),
            ));
        }
        // The tranches, (permits, the fourth number): the first holds what the later ones leave of `reserved`. The
        // fourth number is GCRA's slots' start (in units), a fixed window's end of use, a sliding log's start of use
        // (its end is the horizon after it).
        let mut tranches = vec![(reserved, fourth)];
        for pair in pairs.chunks(2) {
            tranches[0].0 = tranches[0].0.saturating_sub(pair[0]);
            tranches.push((pair[0], pair[1]));
        }
        let counted: u64 = tranches.iter().fold(0, |sum, &(count, _)| sum.saturating_add(count));
        let schedule_of = |fourth: u64| match algorithm {
            Algorithm::Gcra => Schedule::Slots { charged: fourth },
            Algorithm::FixedWindow => Schedule::Span { from: 0, until: fourth },
            _ => Schedule::Span {
                from: fourth,
                until: fourth.saturating_add(horizon),
            },
        };
        // Uses past the horizon would be uses Redis did not count (a window's end past it; a log's start past it).
        let well_formed = |&(count, fourth): &(u64, u64)| {
            (count > 0 || reserved == 0)
                && !matches!(schedule_of(fourth), Schedule::Span { from, until } if from > horizon || until > from + horizon)
        };
        // The server's clock within JS's exact integers, and GCRA's slots starting within what the script reserves
        // from (the limit's units and the horizon's): bounds that keep every span's arithmetic far from overflow.
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
                    if only {
                        "no".to_owned()
                    } else {
                        format!("{permits} or no")
                    }
                ),
                format!(
                    "{granted} granted, {reserved} reserved, {fourth} (where their use starts or ends), then {}",
                    (pairs.iter().map(u64::to_string).collect::<Vec<_>>()).join(" ")
                ),
            ));
        }
        // A concurrency lease Redis granted has the receipt the single-limit script would give it (its grant was
        // logged by the same code: see lua/reserve/log.lua), to release it.
        let lease = match (&id, algorithm) {
            (Some(id), Algorithm::Concurrency) if granted > 0 => {
                let expiry = now.saturating_add(self.quota.interval_ms());
                Some(format!("{permits}:{}", receipt::log_mark(expiry, id)).parse::<Receipt>()?)
            }
            _ => None,
        };
        let decision = Decision {
            success: granted > 0,
            limit: limit.into(),
            remaining,
            reset,
            retry_after,
            receipt: lease,
        };
        let blocks: Vec<Block> = (tranches.into_iter())
            .filter(|&(count, _)| count > 0)
            .map(|(count, fourth)| Block {
                next: 1,
                last: count,
                uses: Uses::none(algorithm),
                ended: false,
                // A tranche was logged to free one interval after its span (lua/reserve/log.lua).
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

    /// Forgets the denials Redis gave this client for `id`, which it would answer again until their `retry_after`:
    /// after a reset of the identifier's state. Its reserved permits stay (see the module's docs).
    pub fn forget_denials<'i>(&self, id: impl Into<Identifier<'i>>) {
        let key = self.limiter.state_key(id);
        let memory = &mut *self.memory.lock().unwrap_or_else(PoisonError::into_inner);
        memory.denials.forget(|denied| denied == key);
    }

    /// Releases a concurrency lease this limiter granted: one lent from reserved permits goes back to them (no round
    /// trip); one Redis granted is released there ([`Limiter::release`]). Returns `false` if it was not held any
    /// more: released before, expired, or lent from a block this client has returned since (its permits then stay
    /// held in Redis until the lease would expire: under-admission, never over).
    pub async fn release<'i>(&self, id: impl Into<Identifier<'i>>, lease: &Lease) -> Result<bool> {
        let id = id.into();
        match self.take_back(&id, lease) {
            Some(released) => Ok(released.success),
            None => self.limiter.release(id, lease).await,
        }
    }

    /// The local part of [`release`](Reserved::release): for a lease lent from reserved permits, the release's
    /// decision (`success`: whether it was out; `remaining`: the permits its block has to lend now, an estimate);
    /// for a lease Redis granted, `None` (after forgetting it here: this client no longer holds it), to be released
    /// in Redis.
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
