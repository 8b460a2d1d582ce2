//! Reserved permits under several limits at once ([`ReservedAll`]): a request granted with no round trip holds a
//! reserved permit of every limit, all used at one moment.
//!
//! Each limit keeps its own blocks, reserved and counted as a single limit's (see [`Reserved`]), so each stays exact
//! whatever the others do. When not every limit has permits usable now, Redis decides the request under the limits
//! that have none, all or nothing, and limits out of permits reserve in the same round trip. Concurrency limits do
//! not reserve here (a grant would have one receipt per limit, some lent). The rules, costs and partial failures:
//! docs/design/reserved-client.md.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures_channel::oneshot;

use super::{pool_of, Memory, Reserved, ReservedDecision, Reserving, MAX_TRACKED, MAX_WAITS};
use crate::block_cache::BlockCache;
use crate::decision::Decision;
use crate::error::{Error, Result};
use crate::identifier::Identifier;
use crate::limit::batch::{Batch, Operation};
use crate::limit::{Algorithm, Decisions, Limiter};
use crate::receipt;
use crate::rest;
use crate::rest::Script;
use crate::time::Instant;

/// GCRA, fixed-window and sliding-log limits that reserve permits together for the identifiers a client sees often.
#[derive(Debug, Clone)]
pub struct ReservedAll {
    /// One per limit, in order: each keeps that limit's blocks.
    parts: Vec<Reserved>,
    /// The denials Redis gave this client, by the first limit's state key.
    denials: Arc<Mutex<BlockCache>>,
}

/// One decision of a [`ReservedAll`], and where it was made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReservedDecisions {
    /// The decision speaking for every limit ([`Decisions::speaking_for_all`]). From reserved permits, `remaining` is
    /// the fewest a limit has left here (an estimate), and a grant has no receipt (it is not refunded).
    pub decision: Decision,
    /// Each limit's part, in order: its decision, whether it was made here, and its span (see
    /// [`ReservedDecision::span`]; (0, 0) for a limit Redis decided). Empty for a remembered denial.
    pub limits: Vec<ReservedDecision>,
    /// True when it was made here, with no round trip.
    pub local: bool,
}

/// What [`ReservedAll::look`] found in the reserved permits: an answer, a reservation to wait for, or what to ask
/// Redis (which limits take their permits here once Redis grants the others', and the reservations to make).
enum Look {
    Answer(ReservedDecisions),
    /// Another request of this client is reserving for the identifier: its reply may answer this one too.
    Wait(oneshot::Receiver<bool>),
    Ask {
        here: Vec<bool>,
        plans: Vec<Plan>,
    },
}

/// A reservation to make with a decision: the limit's index, the block, the pace and the returns.
#[derive(Clone)]
struct Plan {
    index: usize,
    block: u32,
    pace: u64,
    returns: Vec<String>,
}

impl ReservedAll {
    /// Reserves permits used within `length` for every one of `limiters` (at least one), each with a GCRA, fixed-window
    /// or sliding-log quota in code (see [`Reserved::new`]). Requests go through the first limiter's client, and on a
    /// Redis Cluster every key must be in one slot (as for [`limit_all`](crate::limit::limit_all)).
    pub fn new(limiters: Vec<Limiter>, length: Duration) -> Result<ReservedAll> {
        if limiters.is_empty() {
            return Err(Error::InvalidConfig("no limits to reserve permits of: give at least one".into()));
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
        // One limit twice would be reserved and granted twice from one reading.
        for (i, limiter) in limiters.iter().enumerate() {
            if (limiters[..i].iter()).any(|other| other.state_key("") == limiter.state_key("")) {
                return Err(Error::InvalidConfig(format!(
                    "limiter {:?} is given twice (one state): give each limit once",
                    limiter.name
                )));
            }
        }
        let parts = (limiters.into_iter()).map(|limiter| Reserved::new(limiter, length)).collect::<Result<Vec<_>>>()?;
        Ok(ReservedAll { parts, denials: Arc::new(Mutex::new(BlockCache::new(MAX_TRACKED))) })
    }

    /// A client of the same limits sharing nothing with this one, as another process would be. Clones share permits.
    pub fn fresh(&self) -> ReservedAll {
        ReservedAll {
            parts: self.parts.iter().map(Reserved::fresh).collect(),
            denials: Arc::new(Mutex::new(BlockCache::new(MAX_TRACKED))),
        }
    }

    /// Takes `permits` for `id` under every limit: locally when every limit has permits usable now, else from Redis for
    /// the limits that have none, all or nothing, which may reserve more for them.
    pub async fn limit<'i>(&self, id: impl Into<Identifier<'i>>, permits: u32) -> Result<ReservedDecisions> {
        let id = id.into();
        for part in &self.parts {
            part.limiter.check_permits(permits)?;
        }
        let keys: Vec<String> = self.parts.iter().map(|part| part.limiter.state_key(&id)).collect();
        // How many times this request waited for another's reservation, and whether the last of those calls failed.
        let (mut waits, mut failed) = (0, false);
        let (here, plans) = loop {
            match self.look(&keys, permits, (waits, failed)) {
                Look::Answer(answer) => return Ok(answer),
                Look::Ask { here, plans } => break (here, plans),
                Look::Wait(reply_in) => {
                    failed = !reply_in.await.unwrap_or(false);
                    waits += 1;
                }
            }
        };
        // However this call ends, each limit it reserves for is no longer reserving.
        let mut reserving: Vec<Reserving> = (plans.iter())
            .map(|plan| Reserving { memory: &self.parts[plan.index].memory, key: &keys[plan.index], replied: false })
            .collect();
        let requests: Vec<_> = (self.parts.iter().zip(&here))
            .filter(|(_, here)| !**here)
            .map(|(part, _)| part.limiter.request(&id, permits))
            .collect();
        let batch = Batch::new(Operation::Limit, &requests)?;
        let mut calls = vec![batch.call()];
        let mut ids = Vec::with_capacity(plans.len());
        for plan in plans.iter().cloned() {
            let part = &self.parts[plan.index];
            let id = part.quota.algorithm().names_grants().then(receipt::fresh_grant_id);
            let only = (plan.block, plan.pace, true);
            calls.push(part.reserve_call(&keys[plan.index], permits, only, id.as_deref(), plan.returns));
            ids.push(id);
        }
        let sent = Instant::now();
        let mut replies = Script::run_many(&self.parts[0].limiter.client, &calls).await?.into_iter();
        let decided = replies.next().ok_or_else(|| Error::malformed("a reply per call", "none"))?;
        let mut failure = None;
        for (((plan, id), reply), guard) in plans.iter().zip(&ids).zip(replies).zip(&mut reserving) {
            let part = &self.parts[plan.index];
            let only = (plan.block, true);
            match reply.and_then(|reply| part.read_reply(reply, permits, only, id.as_deref(), sent)) {
                Ok(reservation) => {
                    guard.replied = true;
                    let memory = &mut *part.memory.lock().unwrap_or_else(PoisonError::into_inner);
                    if let Some(pool) = memory.pools.get_mut(&keys[plan.index]) {
                        pool.blocks.extend(reservation.blocks);
                        pool.room = Some(reservation.decision.remaining);
                    }
                }
                // The store refused the reservation or did not answer it: no block, and the decision stands (as an
                // error, the failure policy could admit a denial). Any other error is reported, never absorbed.
                Err(Error::StoreFull(_)) => {}
                Err(error) if error.is_store_unavailable() => {}
                Err(error) => failure = failure.or(Some(error)),
            }
        }
        // A reservation's error the policy never absorbs goes first: an unavailable decision must not hide it.
        if let Some(error) = failure {
            return Err(error);
        }
        let decided = batch.decode(decided?)?;
        let answer = self.complete(&keys, permits, &here, decided);
        if !answer.decision.success {
            lock(&self.denials).block(&keys[0], permits, sent, answer.decision);
        }
        Ok(answer)
    }

    /// Looks for `permits` in every limit's reserved permits: a local grant or denial, a reservation to wait for, or
    /// what to ask Redis. `waits`: how many times this request waited already (counted in the demand the first time);
    /// `failed`: whether the last call waited for failed.
    fn look(&self, keys: &[String], permits: u32, (waits, failed): (u32, bool)) -> Look {
        let mut memories = self.lock_all();
        let now = Instant::now();
        // Each limit's permits (from when, until when, in which block), and whether they stay usable a round trip more.
        let mut found = Vec::with_capacity(self.parts.len());
        let mut lasting = Vec::with_capacity(self.parts.len());
        for ((part, memory), key) in self.parts.iter().zip(&mut memories).zip(keys) {
            let pool = pool_of(&mut memory.pools, key, now, part.length);
            let soonest = pool.and_then(|pool| {
                if waits == 0 {
                    pool.ask(permits, now, part.length);
                }
                let soonest = pool.soonest(permits, &part.quota, now)?;
                let block = &pool.blocks[soonest.2];
                lasting.push(soonest.1 > now + block.received.saturating_duration_since(block.sent));
                Some(soonest)
            });
            if soonest.is_none() {
                lasting.push(false);
            }
            found.push(soonest);
        }
        let usable: Vec<bool> = (found.iter().zip(&lasting))
            .map(|(found, lasting)| *lasting && found.is_some_and(|(from, ..)| from <= now))
            .collect();
        if let Some(found) = found.iter().copied().collect::<Option<Vec<_>>>() {
            // Every limit has permits: taken now when all are usable; else a denial until they all are, if that comes
            // before any of them ends (else Redis decides).
            let everywhere = vec![true; self.parts.len()];
            if let Some(taken) = self.take_here(&mut memories, keys, permits, &everywhere, now) {
                return Look::Answer(ReservedDecisions::made_here(taken.into_iter().flatten().collect()));
            }
            let all_from = found.iter().map(|&(from, ..)| from).max();
            if all_from < found.iter().map(|&(_, until, _)| until).min() {
                let limits = (self.parts.iter().zip(&mut memories).zip(keys).zip(&found))
                    .filter_map(|(((part, memory), key), &(from, _, index))| {
                        let pool = memory.pools.get_mut(key)?;
                        Some(ReservedDecision {
                            decision: pool.standing(index, &part.quota, from, now),
                            local: true,
                            span: (0, 0),
                        })
                    })
                    .collect();
                return Look::Answer(ReservedDecisions::made_here(limits));
            }
        }
        if let Some(denial) = lock(&self.denials).check(&keys[0], permits, now) {
            return Look::Answer(ReservedDecisions { decision: denial, limits: Vec::new(), local: true });
        }
        // Another request of this client is reserving for the identifier: wait for its reply, as a single limit's
        // requests do; else under load the calls that queue up time out before any reservation lands.
        if waits < MAX_WAITS && !failed && rest::requests_may_wait_on_each_other() {
            let reserving = (self.parts.iter().zip(&mut memories).zip(keys))
                .filter_map(|((_, memory), key)| memory.pools.get_mut(key))
                .find(|pool| pool.is_reserving(now));
            if let Some(pool) = reserving {
                let (sender, reply_in) = oneshot::channel::<bool>();
                pool.waiters.push(sender);
                return Look::Wait(reply_in);
            }
        }
        let mut plans = Vec::new();
        for (index, (((part, memory), key), found)) in
            self.parts.iter().zip(&mut memories).zip(keys).zip(&found).enumerate()
        {
            let Some(pool) = memory.pools.get_mut(key) else {
                continue;
            };
            // A limit with permits for the request, now or later, has its block: reserving again would hold twice what
            // this client uses.
            if found.is_some() || pool.is_reserving(now) {
                continue;
            }
            let (block, pace) = part.block_and_pace(pool, permits);
            // Returns go with this call, at most MAX_RETURNS; the rest free by themselves.
            let returns: Vec<String> = pool.returns.drain(..).take(super::MAX_RETURNS).collect();
            if block > 0 || !returns.is_empty() {
                pool.reserving = Some(now);
                plans.push(Plan { index, block, pace, returns });
            }
        }
        Look::Ask { here: usable, plans }
    }

    /// Forgets the denial Redis gave this client for `id` (after a reset of its state). Reserved permits stay.
    pub fn forget_denials<'i>(&self, id: impl Into<Identifier<'i>>) {
        let key = self.parts[0].limiter.state_key(id);
        lock(&self.denials).forget(|denied| denied == key);
    }

    /// Every limit's lock, in order (the one order every call takes them in).
    fn lock_all(&self) -> Vec<MutexGuard<'_, Memory>> {
        (self.parts.iter()).map(|part| part.memory.lock().unwrap_or_else(PoisonError::into_inner)).collect()
    }

    /// Takes `permits` now from each limit marked `here`, all or none: each one's part (`None` for one not marked), or
    /// `None` when one has no permits usable now.
    fn take_here(
        &self,
        memories: &mut [MutexGuard<'_, Memory>],
        keys: &[String],
        permits: u32,
        here: &[bool],
        now: Instant,
    ) -> Option<Vec<Option<ReservedDecision>>> {
        let mut blocks = Vec::with_capacity(self.parts.len());
        for (((part, memory), key), here) in self.parts.iter().zip(memories.iter_mut()).zip(keys).zip(here) {
            blocks.push(match here {
                true => match memory.pools.get_mut(key)?.soonest(permits, &part.quota, now)? {
                    (from, _, index) if from <= now => Some(index),
                    _ => return None,
                },
                false => None,
            });
        }
        Some(
            (self.parts.iter().zip(memories).zip(keys).zip(blocks))
                .map(|(((part, memory), key), index)| {
                    Some(memory.pools.get_mut(key)?.take(index?, permits, &part.quota, now))
                })
                .collect(),
        )
    }

    /// The answer once Redis `decided` the limits not taken `here`: when it granted, the others' permits are taken now,
    /// all or none (else the request is denied and Redis's grants are held unused until they free).
    fn complete(&self, keys: &[String], permits: u32, here: &[bool], decided: Decisions) -> ReservedDecisions {
        let taken = decided.success.then(|| {
            let mut memories = self.lock_all();
            self.take_here(&mut memories, keys, permits, here, Instant::now())
        });
        let success = matches!(taken, Some(Some(_)));
        let redis_granted = decided.success;
        let mut taken = taken.flatten().unwrap_or_default().into_iter();
        let mut from_redis = decided.decisions.into_iter();
        let limits: Vec<ReservedDecision> = (self.parts.iter().zip(here))
            .map(|(part, here)| {
                let decided = if *here { None } else { from_redis.next() };
                match taken.next().flatten() {
                    Some(taken) => taken,
                    None => ReservedDecision {
                        // Not taken here: Redis's part; or permits held for a request another limit denied, or that ran
                        // out.
                        decision: decided.unwrap_or_else(|| untaken(part, !redis_granted)),
                        local: false,
                        span: (0, 0),
                    },
                }
            })
            .collect();
        if success {
            // The grants Redis made (a take here counted its own).
            for ((part, key), _) in self.parts.iter().zip(keys).zip(here).filter(|(_, here)| !**here) {
                let memory = &mut *part.memory.lock().unwrap_or_else(PoisonError::into_inner);
                if let Some(pool) = memory.pools.get_mut(key) {
                    pool.granted = pool.granted.saturating_add(permits);
                }
            }
        }
        let decisions = Decisions { success, decisions: limits.iter().map(|limit| limit.decision).collect() };
        ReservedDecisions { decision: decisions.speaking_for_all(), limits, local: false }
    }
}

/// A limit's part of a request that neither Redis nor its reserved permits decided: `allowed` when its permits were
/// there but another limit denied, else denied (they ran out meanwhile). No standing or wait is known.
fn untaken(part: &Reserved, allowed: bool) -> Decision {
    Decision {
        success: allowed,
        limit: part.quota.limit().into(),
        remaining: 0,
        reset: 0,
        retry_after: 0,
        receipt: None,
    }
}

impl ReservedDecisions {
    /// A decision made here from every limit's part of it.
    fn made_here(limits: Vec<ReservedDecision>) -> ReservedDecisions {
        let decisions = Decisions {
            success: limits.iter().all(|limit| limit.decision.success),
            decisions: limits.iter().map(|limit| limit.decision).collect(),
        };
        ReservedDecisions { decision: decisions.speaking_for_all(), limits, local: true }
    }
}

fn lock(denials: &Mutex<BlockCache>) -> MutexGuard<'_, BlockCache> {
    denials.lock().unwrap_or_else(PoisonError::into_inner)
}
