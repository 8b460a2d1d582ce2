//! Reference model: each algorithm's decision function in plain Rust, with time passed in (the injectable clock),
//! written from the algorithm's definition rather than from the Lua.
//!
//! The property tests run the same random schedules through this model and through the scripts on a real Redis
//! (with explicit time) and require identical decisions. The model keeps state forever where Redis lets a key
//! expire; the scripts only expire state that no longer changes any decision, which is exactly what those tests
//! check.

mod bucket;
mod concurrency;
mod fixed_window;
mod sliding_log;
mod sliding_window;

use super::quota::{Algorithm, Quota};

/// A limit's standing at some moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Standing {
    /// Permits left.
    pub remaining: u64,
    /// Unix ms when the limit is whole again if no further request comes.
    pub reset: u64,
}

/// What a limit answers to a request: the shape the scripts reply with (see `lua/limits/prelude.lua`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    /// Whether the limit allows the request.
    pub allowed: bool,
    /// Ms until it would be allowed (0 when it is). For concurrency an upper bound: leases may be released sooner.
    pub retry_after: u64,
    /// The standing without this request.
    pub now: Standing,
    /// The standing with it (equal to `now` when not allowed).
    pub after: Standing,
}

impl Verdict {
    fn new(allowed: bool, retry_after: u64, now: Standing, after: Standing) -> Verdict {
        Verdict {
            allowed,
            retry_after,
            now,
            after: if allowed { after } else { now },
        }
    }

    /// The verdict of a limit whose grants hold their permits until they free (concurrency, sliding log): `held`
    /// permits at `now`, the last of them freeing at `last_free` (`now` when none); `retry_after` is asked only when
    /// the request does not fit.
    fn of_log(q: &Quota, now: u64, permits: u64, held: u64, last_free: u64, retry_after: impl FnOnce() -> u64) -> Self {
        let limit = u64::from(q.limit());
        let allowed = held + permits <= limit;
        let now_standing = Standing {
            remaining: limit.saturating_sub(held),
            reset: last_free,
        };
        let after = Standing {
            remaining: limit.saturating_sub(held + permits),
            reset: last_free.max(now + q.interval_ms()),
        };
        Verdict::new(allowed, if allowed { 0 } else { retry_after() }, now_standing, after)
    }
}

/// One identifier's state under one quota.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelLimit {
    quota: Quota,
    state: State,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    TokenBucket(bucket::TokenBucket),
    Gcra(bucket::Gcra),
    FixedWindow(fixed_window::FixedWindow),
    SlidingWindow(sliding_window::SlidingWindow),
    Concurrency(concurrency::Concurrency),
    SlidingLog(sliding_log::SlidingLog),
}

impl ModelLimit {
    /// A fresh identifier under `quota` (a full bucket, empty windows, no leases, an empty log).
    pub fn new(quota: Quota) -> ModelLimit {
        let state = match quota.algorithm() {
            Algorithm::TokenBucket => State::TokenBucket(Default::default()),
            Algorithm::Gcra => State::Gcra(Default::default()),
            Algorithm::FixedWindow => State::FixedWindow(Default::default()),
            Algorithm::SlidingWindow => State::SlidingWindow(Default::default()),
            Algorithm::Concurrency => State::Concurrency(Default::default()),
            Algorithm::SlidingLog => State::SlidingLog(Default::default()),
        };
        ModelLimit { quota, state }
    }

    /// The quota.
    pub fn quota(&self) -> Quota {
        self.quota
    }

    /// The verdict on `permits` at `now`; changes nothing that matters (concurrency and the sliding log forget what
    /// has expired).
    pub fn decide(&mut self, now: u64, permits: u32) -> Verdict {
        let (q, n) = (&self.quota, u64::from(permits));
        match &mut self.state {
            State::TokenBucket(state) => state.decide(q, now, n),
            State::Gcra(state) => state.decide(q, now, n),
            State::FixedWindow(state) => state.decide(q, now, n),
            State::SlidingWindow(state) => state.decide(q, now, n),
            State::Concurrency(state) => state.decide(q, now, n),
            State::SlidingLog(state) => state.decide(q, now, n),
        }
    }

    /// Records a grant of `permits` at `now` (call only after an allowing [`decide`](ModelLimit::decide) at the same
    /// time). `lease_id` names the concurrency lease.
    pub fn grant(&mut self, now: u64, permits: u32, lease_id: u64) {
        let (q, n) = (&self.quota, u64::from(permits));
        match &mut self.state {
            State::TokenBucket(state) => state.grant(q, now, n),
            State::Gcra(state) => state.grant(q, now, n),
            State::FixedWindow(state) => state.grant(q, now, n),
            State::SlidingWindow(state) => state.grant(q, now, n),
            State::Concurrency(state) => state.grant(q, now, n, lease_id),
            State::SlidingLog(state) => state.grant(q, now, n),
        }
    }

    /// Gives back `permits` at `now` (for concurrency: releases the lease `lease_id` holding them). Returns false
    /// when a lease was not held.
    pub fn refund(&mut self, now: u64, permits: u32, lease_id: u64) -> bool {
        let (q, n) = (&self.quota, u64::from(permits));
        match &mut self.state {
            State::TokenBucket(state) => state.refund(q, now, n),
            State::Gcra(state) => state.refund(q, now, n),
            State::FixedWindow(state) => state.refund(q, now, n),
            State::SlidingWindow(state) => state.refund(q, now, n),
            State::Concurrency(state) => return state.release(now, n, lease_id),
            State::SlidingLog(state) => state.refund(now, n),
        }
        true
    }
}

/// Decides several limits together, all or nothing, as the driver script does: each entry is a limit, the permits
/// asked of it, and the id its lease gets if it is a concurrency limit. Returns whether the request was granted and
/// each limit's verdict.
pub fn decide_all(limits: &mut [(&mut ModelLimit, u32, u64)], now: u64) -> (bool, Vec<Verdict>) {
    let verdicts: Vec<Verdict> = limits
        .iter_mut()
        .map(|(limit, permits, _)| limit.decide(now, *permits))
        .collect();
    let granted = verdicts.iter().all(|verdict| verdict.allowed);
    if granted {
        for (limit, permits, lease_id) in limits.iter_mut() {
            limit.grant(now, *permits, *lease_id);
        }
    }
    (granted, verdicts)
}
