//! Reserved permits under several limits at once ([`ReservedAll`]): a request granted with no round trip holds a
//! reserved permit of every limit, all used at one moment.
//!
//! Each limit keeps its own blocks, reserved by its own script (`lua/reserve/<algorithm>.lua`) as a single limit's
//! are and counted as that script counts them, so each limit stays exact whatever the others do: a use within a
//! permit's span keeps every window of that limit within it (see [`Reserved`]). A request is granted locally only when
//! every limit has its permits usable now; they are taken together, under every limit's lock (taken in order). Else
//! Redis decides it under all the limits together (`lua/limits.lua`: all or nothing, as without reserving: a request
//! denied by one limit takes from none), and in the same round trip, right after that decision, each limit that had
//! no permit usable reserves (its reserve script with `:only`, which reserves without taking the request), sized to
//! this client's demand as a single limit's are.
//!
//! What it costs beyond a single limit's reservations: the permits of one limit left over while another's have run
//! out are held, unused, until their span ends (a sliding log's until they are returned): each limit reserves what
//! this client asked lately, so the limit that runs out first is the tightest one, and the others' blocks mostly
//! last as long. A limit whose reservation is under way is not asked again meanwhile, and the requests that come
//! meanwhile go to Redis themselves (a single limit's wait for the reply instead; here a request would wait for
//! several replies).
//!
//! Partial failure: the calls of one round trip are each atomic, not together. When the decision ran and a
//! reservation's reply is an error, the call is that error, the blocks of the other reservations are kept, and the
//! decision stays recorded in Redis: a grant the caller never hears of holds its permits until they free
//! (under-admission, never over); a reservation whose reply is lost (a timeout) holds its permits until its span
//! ends or they free (a sliding log's tranches are never returned then).
//!
//! Concurrency limits do not reserve here: a lease lent from reserved permits goes back with its local receipt,
//! and a grant under several limits has a receipt per limit, some lent and some Redis's; a [`Reserved`] with one
//! concurrency limit lends them.

use std::sync::{MutexGuard, PoisonError};
use std::time::Duration;

use super::{pool_of, Memory, Reserved, ReservedDecision, Reserving};
use crate::error::{Error, Result};
use crate::identifier::Identifier;
use crate::limit::batch::{Batch, Operation};
use crate::limit::{Algorithm, Decisions, Limiter};
use crate::receipt;
use crate::script::Script;
use crate::time::Instant;

/// GCRA, fixed-window and sliding-log limits that reserve permits together for the identifiers a client sees often:
/// see the module's docs.
#[derive(Debug, Clone)]
pub struct ReservedAll {
    /// One per limit, in order: each keeps that limit's blocks.
    parts: Vec<Reserved>,
}

/// One decision of a [`ReservedAll`], and where it was made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReservedDecisions {
    /// The decisions, one per limit in order, as [`limit_all`](crate::limit::limit_all) gives them (`success`: every
    /// limit granted). From reserved permits, each carries how many its limit has left here (an estimate: other
    /// clients hold theirs) and no receipt: a reserved grant is not refunded.
    pub decisions: Decisions,
    /// True when it was made from reserved permits: no round trip.
    pub local: bool,
    /// For a grant from reserved permits, each limit's span on the server's clock within which the permit was used
    /// (see [`ReservedDecision::span`]), in order. Empty for a decision Redis made: that one is made on the server's
    /// clock between the call's start and its end.
    pub spans: Vec<(u64, u64)>,
}

impl ReservedAll {
    /// Reserves permits used within `length` for every one of `limiters` (at least one), each with a GCRA,
    /// fixed-window or sliding-log quota given in code and within the length's bound of [`Reserved::new`]. Requests
    /// go through the first limiter's client, and in a Redis Cluster every limit's key must be in one slot (as for
    /// [`limit_all`](crate::limit::limit_all)).
    pub fn new(limiters: Vec<Limiter>, length: Duration) -> Result<ReservedAll> {
        if limiters.is_empty() {
            return Err(Error::InvalidConfig(
                "no limits to reserve permits of: give at least one".into(),
            ));
        }
        if let Some(limiter) = (limiters.iter())
            .find(|limiter| (limiter.quota).is_some_and(|quota| quota.algorithm() == Algorithm::Concurrency))
        {
            return Err(Error::InvalidConfig(format!(
                "limiter {:?}: a concurrency limit reserves permits only alone (its leases are lent and given back \
                 one receipt at a time); reserve with GCRA, fixed-window and sliding-log limits, or give the \
                 concurrency limit its own Ratelimit",
                limiter.name
            )));
        }
        let parts = (limiters.into_iter())
            .map(|limiter| Reserved::new(limiter, length))
            .collect::<Result<Vec<_>>>()?;
        Ok(ReservedAll { parts })
    }

    /// A client of the same limits that shares nothing with this one: what another process or isolate would be.
    /// Clones share their reserved permits.
    pub fn fresh(&self) -> ReservedAll {
        ReservedAll {
            parts: self.parts.iter().map(Reserved::fresh).collect(),
        }
    }

    /// Takes `permits` for `id` under every limit: from permits this client reserved when every limit has them
    /// usable now (no round trip), else from Redis, all or nothing, which may reserve more for the limits that had
    /// none.
    pub async fn limit<'i>(&self, id: impl Into<Identifier<'i>>, permits: u32) -> Result<ReservedDecisions> {
        let id = id.into();
        for part in &self.parts {
            part.limiter.check_permits(permits)?;
            let limit = part.quota.limit();
            if permits > limit {
                return Err(Error::PermitsExceedRate {
                    permits,
                    rate: limit.into(),
                });
            }
        }
        let keys: Vec<String> = self.parts.iter().map(|part| part.limiter.state_key(&id)).collect();
        // Each limit's reservation to make with the decision, if it makes one: (limit's index, block, pace, returns).
        let plans = {
            let mut memories: Vec<MutexGuard<Memory>> = (self.parts.iter())
                .map(|part| part.memory.lock().unwrap_or_else(PoisonError::into_inner))
                .collect();
            let now = Instant::now();
            let mut soonest = Vec::with_capacity(self.parts.len());
            for ((part, memory), key) in self.parts.iter().zip(&mut memories).zip(&keys) {
                let pool = pool_of(&mut memory.pools, key, now, part.length);
                soonest.push(pool.and_then(|pool| {
                    pool.ask(permits, now, part.length);
                    pool.soonest(permits, &part.quota, now)
                }));
            }
            if soonest.iter().all(|found| found.is_some_and(|(from, _)| from <= now)) {
                let taken: Vec<ReservedDecision> = (self.parts.iter().zip(&mut memories).zip(&keys).zip(soonest))
                    .filter_map(|(((part, memory), key), found)| {
                        let pool = memory.pools.get_mut(key)?;
                        Some(pool.take(found?.1, permits, &part.quota, now))
                    })
                    .collect();
                return Ok(ReservedDecisions {
                    decisions: Decisions {
                        success: true,
                        decisions: taken.iter().map(|taken| taken.decision).collect(),
                    },
                    local: true,
                    spans: taken.iter().map(|taken| taken.span).collect(),
                });
            }
            let mut plans = Vec::new();
            for (index, (((part, memory), key), found)) in
                self.parts.iter().zip(&mut memories).zip(&keys).zip(soonest).enumerate()
            {
                let Some(pool) = memory.pools.get_mut(key) else {
                    continue;
                };
                if found.is_some_and(|(from, _)| from <= now) || pool.is_reserving(now) {
                    continue;
                }
                let (block, pace) = part.block_and_pace(pool, permits);
                // Returns go with this call; at most 100 (the script's bound), the rest free by themselves.
                let returns: Vec<String> = pool.returns.drain(..).take(super::MAX_RETURNS).collect();
                if block > 0 || !returns.is_empty() {
                    pool.reserving = Some(now);
                    plans.push((index, block, pace, returns));
                }
            }
            plans
        };
        // However this call ends, each limit it reserves for is no longer reserving (see `Reserving`).
        let mut reserving: Vec<Reserving> = (plans.iter())
            .map(|&(index, ..)| Reserving {
                memory: &self.parts[index].memory,
                key: &keys[index],
                replied: false,
            })
            .collect();
        let requests: Vec<_> = (self.parts.iter())
            .map(|part| part.limiter.request(&id, permits))
            .collect();
        let batch = Batch::new(Operation::Limit, &requests)?;
        let mut calls = vec![batch.call()];
        let mut ids = Vec::with_capacity(plans.len());
        for (index, block, pace, returns) in plans.iter().cloned() {
            let part = &self.parts[index];
            let id = part.quota.algorithm().names_grants().then(receipt::fresh_grant_id);
            calls.push(part.reserve_call(&keys[index], permits, (block, pace, true), id.as_deref(), returns));
            ids.push(id);
        }
        let sent = Instant::now();
        let mut replies = Script::run_many(&self.parts[0].limiter.client, &calls)
            .await?
            .into_iter();
        let decided = replies
            .next()
            .ok_or_else(|| Error::malformed("a reply per call", "none"))?;
        let mut failure = None;
        for (((&(index, block, ..), id), reply), guard) in plans.iter().zip(&ids).zip(replies).zip(&mut reserving) {
            let part = &self.parts[index];
            match reply.and_then(|reply| part.read_reply(reply, permits, (block, true), id.as_deref(), sent)) {
                Ok(reservation) => {
                    guard.replied = true;
                    let memory = &mut *part.memory.lock().unwrap_or_else(PoisonError::into_inner);
                    if let Some(pool) = memory.pools.get_mut(&keys[index]) {
                        pool.blocks.extend(reservation.blocks);
                    }
                }
                Err(error) => failure = failure.or(Some(error)),
            }
        }
        let decisions = batch.decode(decided?)?;
        if let Some(error) = failure {
            return Err(error);
        }
        if decisions.success {
            for (part, key) in self.parts.iter().zip(&keys) {
                let memory = &mut *part.memory.lock().unwrap_or_else(PoisonError::into_inner);
                if let Some(pool) = memory.pools.get_mut(key) {
                    pool.granted = pool.granted.saturating_add(permits);
                }
            }
        }
        Ok(ReservedDecisions {
            decisions,
            local: false,
            spans: Vec::new(),
        })
    }
}
