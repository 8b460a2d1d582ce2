//! Reserved blocks: decisions with no round trip for the identifiers a client sees often, exact by construction
//! (GCRA).
//!
//! A [`Reserved`] limiter sends each request it cannot answer itself to Redis (`lua/reserve/gcra.lua`), which decides
//! it as a plain GCRA decision and reserves, along with it, a block of permits for the identifier: as many as the
//! client expects to need before the block ends. The client then grants them locally, each from its own start
//! time on (the limit's refill pace when the bucket is empty; at once when it has room) and until the block's end,
//! with no round trip. The script gives each reserved permit a GCRA slot after the block's end that still ends
//! within the limit's burst of its start, so that whenever each permit is used within its span, no span of time
//! holds more grants than the limit allows (the script's comment has the rule and why).
//!
//! What the client must keep, and how:
//! - **Use within the span.** The spans are on the server's clock. A permit's start moves to local time from when
//!   the reply arrived (after the server's `now`, so the local start falls after the server's), the block's end
//!   from when the request left (before the server's `now`, so the local end falls before the server's), and the
//!   end less a margin of a tenth of the block's length: clocks' rates drift, and in Workers the clock stands
//!   still between I/O.
//! - **Size to demand.** A block is what this client asked for the identifier in the last span of the block's
//!   length: a client that sees an identifier once never reserves.
//! - **What it costs.** Permits not used by the block's end are lost until the limit refills, and while the bucket
//!   is not busy a block skips the refill between its start and its end. Both are bounded by the block's length
//!   (`bench/reserved.mjs` measures the grants against the limit's capacity). Reserved permits are never returned:
//!   a return would have to prove that no decision since was made against them.
//! - **Denials** are answered locally too: until a denial's `retry_after`, or until the block's next permit starts.
//!
//! A decision from a block carries the permits left in that block as `remaining` (an estimate: other clients hold
//! theirs), the `reset` of the reply that reserved it, and no receipt (a reserved grant is not refunded). `reset()`
//! on the identifier, or a lowered quota, does not recall a block: it runs out within its length.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use web_time::Instant;

use super::{Algorithm, Limiter, Quota};
use crate::decision::Decision;
use crate::error::{Error, Result};
use crate::identifier::Identifier;
use crate::lua::RESERVE_GCRA;

/// The identifiers a client tracks at most; past it, a new identifier is decided without reserving.
const MAX_TRACKED: usize = 10_000;

/// A GCRA limiter that reserves blocks of permits for the identifiers it sees often: see the module's docs.
#[derive(Debug, Clone)]
pub struct Reserved {
    limiter: Limiter,
    quota: Quota,
    length: Duration,
    pools: Arc<Mutex<HashMap<String, Pool>>>,
    last_round_trip_ms: Arc<AtomicU64>,
}

/// One decision of a [`Reserved`] limiter, and where it was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReservedDecision {
    /// The decision.
    pub decision: Decision,
    /// True when it was made locally (from a block, or a denial remembered): no round trip.
    pub local: bool,
    /// For a grant, the span on the server's clock (unix ms) within which it is used: the block's `[now, until]`,
    /// or `[now, now]` for a request decided alone. (0, 0) for a denial. What an exactness check counts it in.
    pub span: (u64, u64),
}

/// What a client keeps per identifier.
#[derive(Debug, Default)]
struct Pool {
    /// Blocks not used up: more than one when this client's tasks asked Redis at the same time.
    blocks: Vec<Block>,
    /// When a denial stops holding: until then, the same denial is the answer.
    denied_until: Option<(Instant, Decision)>,
    /// Permits asked in the current span of the block's length (from `span_started`), and in the one before.
    asked: u32,
    asked_before: u32,
    span_started: Option<Instant>,
}

/// A reserved block: its permits `next..=last` (counted from 1 as the script counts them) are the client's.
#[derive(Debug, Clone, Copy)]
struct Block {
    next: u64,
    last: u64,
    /// Where the permits' starts are counted from: local time when the reply arrived, and the server's `now`.
    received: Instant,
    now: u64,
    /// The script's `charged`: the i-th permit starts ceil((charged + i × interval − full) / rate) ms after `now`.
    charged: u64,
    /// The block's end on the server's clock, and in local time less the margin.
    until: u64,
    use_by: Instant,
    reset: u64,
}

impl Block {
    /// Server ms after `now` from which the `i`-th permit may be used.
    fn start_of(&self, i: u64, quota: &Quota) -> u64 {
        let (interval, rate) = (quota.interval_ms(), u64::from(quota.rate()));
        let full = u64::from(quota.limit()) * interval;
        (self.charged + i * interval).saturating_sub(full).div_ceil(rate)
    }
}

impl Pool {
    /// Counts a request for the demand estimate.
    fn ask(&mut self, permits: u32, now: Instant, length: Duration) {
        let started = *self.span_started.get_or_insert(now);
        let elapsed = now.saturating_duration_since(started);
        if elapsed >= length {
            self.asked_before = if elapsed < 2 * length { self.asked } else { 0 };
            self.asked = 0;
            self.span_started = Some(now);
        }
        self.asked = self.asked.saturating_add(permits);
    }

    /// How many permits to reserve besides a request of `permits`: what was asked lately, but for this request.
    fn demand(&self, permits: u32) -> u32 {
        (self.asked - permits).max(self.asked_before)
    }

    /// A local answer, if there is one: a block's permits (or the wait until a block's next ones start), or a
    /// denial still holding.
    fn answer(&mut self, permits: u32, quota: &Quota, now: Instant) -> Option<ReservedDecision> {
        // Each block's next `permits`: the last of them, from when they may be used. A block that cannot give
        // them before its end is done (what it has left is lost: see the module's docs).
        self.blocks
            .retain(|block| block.use_by > now && block.next + u64::from(permits) - 1 <= block.last);
        let soonest = (self.blocks.iter().enumerate())
            .map(|(index, block)| {
                let last = block.next + u64::from(permits) - 1;
                let start = block.start_of(last, quota);
                // A millisecond more than the reply's arrival: the server's clock counts whole ms.
                (block.received + Duration::from_millis(start + 1), index, last, start)
            })
            .filter(|(usable_from, index, ..)| *usable_from < self.blocks[*index].use_by)
            .min_by_key(|(usable_from, ..)| *usable_from);
        if let Some((usable_from, index, last, start)) = soonest {
            let block = &mut self.blocks[index];
            let success = usable_from <= now;
            let span = if success {
                block.next = last + 1;
                (block.now + start, block.until)
            } else {
                (0, 0)
            };
            let decision = Decision {
                success,
                limit: quota.limit().into(),
                remaining: block.last + 1 - block.next,
                reset: block.reset,
                retry_after: millis_until(now, usable_from),
                receipt: None,
            };
            return Some(ReservedDecision {
                decision,
                local: true,
                span,
            });
        }
        match self.denied_until {
            Some((until, decision)) if until > now => Some(ReservedDecision {
                decision: Decision {
                    retry_after: millis_until(now, until),
                    ..decision
                },
                local: true,
                span: (0, 0),
            }),
            _ => None,
        }
    }

    /// Nothing worth keeping: no block, no denial, no recent demand.
    fn idle(&self, now: Instant) -> bool {
        self.blocks.iter().all(|block| block.use_by <= now)
            && self.denied_until.is_none_or(|(until, _)| until <= now)
            && self.asked == 0
            && self.asked_before == 0
    }
}

/// Whole ms from `now` until `then`, rounded up; 0 when it has passed.
fn millis_until(now: Instant, then: Instant) -> u64 {
    let wait = then.saturating_duration_since(now);
    wait.as_millis() as u64 + u64::from(wait.subsec_nanos() % 1_000_000 > 0)
}

impl Reserved {
    /// Taken off a block's end: a tenth of its length, at least 1 ms.
    fn margin(&self) -> Duration {
        (self.length / 10).max(Duration::from_millis(1))
    }

    /// The last round trip's time, what a block's usable span loses (0 before the first).
    fn round_trip_ms(&self) -> u64 {
        self.last_round_trip_ms.load(Ordering::Relaxed)
    }

    /// Reserves blocks of up to `length` (1 ms to 60 s, and at most half the time the bucket takes to refill from
    /// empty) for `limiter`, whose quota must be a GCRA quota given in code, decided on the server's clock.
    pub fn new(limiter: Limiter, length: Duration) -> Result<Reserved> {
        let quota = match limiter.quota {
            Some(quota) if quota.algorithm() == Algorithm::Gcra => quota,
            _ => {
                return Err(Error::InvalidConfig(format!(
                    "limiter {:?}: reserved blocks need a GCRA quota given in code (Quota::gcra)",
                    limiter.name
                )))
            }
        };
        if limiter.now_ms.is_some() {
            return Err(Error::InvalidConfig(
                "reserved blocks run on the server's clock and local time: not at an explicit time".into(),
            ));
        }
        if length.is_zero() || length > Duration::from_secs(60) {
            return Err(Error::InvalidConfig(format!(
                "a block's length must be from 1 ms to 60 s, got {} ms",
                length.as_millis()
            )));
        }
        // A block is charged the refill of its whole length (see the script): one as long as the bucket takes to
        // refill from empty never fits, and one of half that leaves at most half the burst to reserve.
        let refill_ms = quota.interval_ms() * u64::from(quota.limit()) / u64::from(quota.rate());
        if length.as_millis() as u64 * 2 > refill_ms {
            return Err(Error::InvalidConfig(format!(
                "a block of {} ms is too long for limiter {:?}: its bucket refills from empty in {refill_ms} ms, and \
                 a block is charged its whole length's refill; use at most {} ms",
                length.as_millis(),
                limiter.name,
                refill_ms / 2
            )));
        }
        Ok(Reserved {
            limiter,
            quota,
            length,
            pools: Arc::default(),
            last_round_trip_ms: Arc::default(),
        })
    }

    /// A client of the same limit that shares nothing with this one (no block, no remembered denial): what
    /// another process or isolate would be. Clones share their blocks.
    pub fn fresh(&self) -> Reserved {
        Reserved {
            pools: Arc::default(),
            last_round_trip_ms: Arc::default(),
            ..self.clone()
        }
    }

    /// Takes `permits` for `id`: from a block this client holds when it can (no round trip), else from Redis, which
    /// may reserve a block along with it.
    pub async fn limit<'i>(&self, id: impl Into<Identifier<'i>>, permits: u32) -> Result<ReservedDecision> {
        let limit = self.quota.limit();
        if permits == 0 || permits > limit {
            return Err(Error::PermitsExceedRate {
                permits,
                rate: limit.into(),
            });
        }
        let key = self.limiter.state_key(id);
        let block = {
            let mut pools = self.pools.lock().unwrap_or_else(PoisonError::into_inner);
            let now = Instant::now();
            if pools.len() >= MAX_TRACKED && !pools.contains_key(&key) {
                pools.retain(|_, pool| !pool.idle(now));
            }
            if pools.len() < MAX_TRACKED || pools.contains_key(&key) {
                let pool = pools.entry(key.clone()).or_default();
                pool.ask(permits, now, self.length);
                if let Some(answer) = pool.answer(permits, &self.quota, now) {
                    return Ok(answer);
                }
                pool.demand(permits).min(limit)
            } else {
                0
            }
        };
        let sent = Instant::now();
        let request = format!("{permits}:{limit}:{}:{}", self.quota.interval_ms(), self.quota.rate());
        let length_ms = self.length.as_millis() as u64;
        // A permit is worth reserving if it starts in time to be used: before the block's local end (its length
        // less the margin), with the round trip's time lost at both ends (see the module's docs).
        let latest = length_ms.saturating_sub(self.margin().as_millis() as u64 + self.round_trip_ms());
        let arguments = [request, format!("{block}:{length_ms}:{latest}")];
        let reply = RESERVE_GCRA.run(&self.limiter.client, &[&key], &arguments).await?;
        let received = Instant::now();
        self.last_round_trip_ms
            .store(millis_until(sent, received), Ordering::Relaxed);
        let [granted, now, until, reserved, charged, remaining, reset, retry_after] =
            reply.into_tuple()?.map(|value| value.into_u64());
        let (granted, now, until, reserved, charged) = (granted?, now?, until?, reserved?, charged?);
        if !(granted == 0 || granted == u64::from(permits)) || until != now + length_ms || reserved > u64::from(block) {
            return Err(Error::malformed(
                format!("{permits} or no permits granted, at most {block} reserved, for {length_ms} ms"),
                format!("{granted} granted, {reserved} reserved, from {now} to {until}"),
            ));
        }
        let mut decision = Decision {
            success: granted > 0,
            limit: limit.into(),
            remaining: remaining?,
            reset: reset?,
            retry_after: retry_after?,
            receipt: None,
        };
        let mut pools = self.pools.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(pool) = pools.get_mut(&key) {
            // The block's end in local time, from when the request left, less the margin.
            let block = match (reserved, self.length.checked_sub(self.margin())) {
                (1.., Some(usable)) => Some(Block {
                    next: 1,
                    last: reserved,
                    received,
                    now,
                    charged,
                    until,
                    use_by: sent + usable,
                    reset: decision.reset,
                }),
                _ => None,
            };
            if granted > 0 {
                pool.denied_until = None;
            } else if let Some(block) = block.filter(|_| u64::from(permits) <= reserved) {
                // The wait is for the block's permits now: the slots the bucket would have given are its.
                decision.retry_after = block.start_of(u64::from(permits), &self.quota) + 1;
            } else {
                pool.denied_until = Some((sent + Duration::from_millis(decision.retry_after), decision));
            }
            pool.blocks.extend(block);
        }
        Ok(ReservedDecision {
            decision,
            local: false,
            span: if granted > 0 { (now, now) } else { (0, 0) },
        })
    }
}
