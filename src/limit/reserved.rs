//! Reserved blocks: decisions with no round trip for the identifiers a client sees often, exact by construction
//! (GCRA).
//!
//! A [`Reserved`] limiter asks Redis, along with a request it cannot answer itself, for a small block of permits
//! for the identifier (`lua/reserve/gcra.lua`): the request's permits and, when the limit has room, more, to grant
//! locally until a short deadline. The script charges the block as if every permit were used at the block's end
//! and checks it as if every one were used at its start, so that whenever its permits are used within the block's
//! span, no span of time holds more grants than the limit allows (the script's comment has the rule and why).
//!
//! What the client must keep, and how:
//! - **Use by the deadline.** The block's span is on the server's clock, `[now, until]`. The client stops granting
//!   from it at `sent + (until − now) − margin`, where `sent` is its own monotonic time when it sent the request
//!   (before the server's `now`, so the local deadline falls before the server's) and `margin` a tenth of the
//!   block's length, for clock rates that drift and for runtimes whose clock stands still between I/O (Workers).
//! - **Size to demand.** A block is what this client asked for the identifier in the last span of the block's
//!   length, plus the request: a client that sees an identifier once never reserves. The script gives at most half
//!   of what the limit has left, so several clients share, and when that is no more than the request, decides the
//!   request alone.
//! - **What it costs.** Permits reserved and not used before the deadline are lost until the limit refills: they
//!   count as used. So do the refill between a block's start and its end while the bucket was not busy. Both are
//!   bounded by the block's length (`bench`: under-admission). They are never returned (a return would have to
//!   prove that no decision since was made against them).
//! - **Denials** are remembered until their `retry_after` passes: answered locally, as the block cache does.
//!
//! A decision from a block carries the remaining permits of that block as `remaining` (an estimate: other clients
//! hold theirs), the `reset` of the reply that reserved it, and no receipt (a reserved grant is not refunded).
//! `reset()` on the identifier, or a lowered quota, does not recall a block: it runs out within its length.

use std::collections::HashMap;
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
    blocks: Vec<Block>,
    /// When a denial stops holding: until then, the same denial is the answer.
    denied_until: Option<(Instant, Decision)>,
    /// Permits asked in the current span of the block's length (from `span_started`), and in the one before.
    asked: u32,
    asked_before: u32,
    span_started: Option<Instant>,
}

#[derive(Debug, Clone, Copy)]
struct Block {
    left: u32,
    use_by: Instant,
    span: (u64, u64),
    reset: u64,
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

    /// A local answer, if there is one: a block's permits, or a denial still holding.
    fn answer(&mut self, permits: u32, limit: u64, now: Instant) -> Option<ReservedDecision> {
        self.blocks.retain(|block| block.left > 0 && block.use_by > now);
        if let Some(block) = self.blocks.iter_mut().find(|block| block.left >= permits) {
            block.left -= permits;
            let decision = Decision {
                success: true,
                limit,
                remaining: block.left.into(),
                reset: block.reset,
                retry_after: 0,
                receipt: None,
            };
            return Some(ReservedDecision {
                decision,
                local: true,
                span: block.span,
            });
        }
        match self.denied_until {
            Some((until, decision)) if until > now => Some(ReservedDecision {
                decision: Decision {
                    retry_after: until.saturating_duration_since(now).as_millis() as u64 + 1,
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
        self.blocks.iter().all(|block| block.left == 0 || block.use_by <= now)
            && self.denied_until.is_none_or(|(until, _)| until <= now)
            && self.asked == 0
            && self.asked_before == 0
    }
}

impl Reserved {
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
        })
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
            match pools.len() < MAX_TRACKED || pools.contains_key(&key) {
                true => {
                    let pool = pools.entry(key.clone()).or_default();
                    pool.ask(permits, now, self.length);
                    if let Some(answer) = pool.answer(permits, limit.into(), now) {
                        return Ok(answer);
                    }
                    permits.saturating_add(pool.asked.max(pool.asked_before)).min(limit)
                }
                false => permits,
            }
        };
        let sent = Instant::now();
        let request = format!("{permits}:{limit}:{}:{}", self.quota.interval_ms(), self.quota.rate());
        let arguments = [request, format!("{block}:{}", self.length.as_millis())];
        let reply = RESERVE_GCRA.run(&self.limiter.client, &[&key], &arguments).await?;
        let [granted, now, until, remaining, reset, retry_after] = reply.into_tuple()?.map(|value| value.into_u64());
        let (granted, now, until) = (granted?, now?, until?);
        if !(granted == 0 || (u64::from(permits)..=u64::from(block)).contains(&granted))
            || until < now
            || until - now > self.length.as_millis() as u64
        {
            return Err(Error::malformed(
                format!(
                    "a reserved block of 0 or {permits} to {block} permits within {} ms",
                    self.length.as_millis()
                ),
                format!("{granted} permits from {now} to {until}"),
            ));
        }
        let decision = Decision {
            success: granted > 0,
            limit: limit.into(),
            remaining: remaining?,
            reset: reset?,
            retry_after: retry_after?,
            receipt: None,
        };
        let mut pools = self.pools.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(pool) = pools.get_mut(&key) {
            if granted == 0 {
                pool.denied_until = Some((sent + Duration::from_millis(decision.retry_after), decision));
            } else if granted > u64::from(permits) {
                // The server's span, moved to local time from when the request left, less the margin.
                let margin = (self.length / 10).max(Duration::from_millis(1));
                if let Some(usable) = Duration::from_millis(until - now).checked_sub(margin) {
                    pool.blocks.push(Block {
                        left: (granted - u64::from(permits)) as u32,
                        use_by: sent + usable,
                        span: (now, until),
                        reset: decision.reset,
                    });
                }
            }
        }
        Ok(ReservedDecision {
            decision,
            local: false,
            span: if granted > 0 { (now, until) } else { (0, 0) },
        })
    }
}
