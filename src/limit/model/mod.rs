//! Reference model: each algorithm's decision in plain Rust with time passed in, written from the algorithm's
//! definition rather than from the Lua. The property tests require it and the scripts on a real Redis to decide
//! alike on random schedules (which also checks that the scripts only expire state that no longer matters).

mod bucket;
mod concurrency;
mod fixed_window;
mod sliding_log;
mod sliding_window;
pub(crate) mod stored;

use super::quota::{Algorithm, Quota};
use super::Receipt;
use crate::error::{Error, Result};

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
        Verdict { allowed, retry_after, now, after: if allowed { after } else { now } }
    }

    /// The verdict of a limit whose grants hold permits until they free (concurrency, sliding log): `held` permits at
    /// `now`, the last freeing at `last_free`; `retry_after` is asked only when the request does not fit.
    fn of_log(q: &Quota, now: u64, permits: u64, held: u64, last_free: u64, retry_after: impl FnOnce() -> u64) -> Self {
        let limit = u64::from(q.limit());
        let allowed = held + permits <= limit;
        let now_standing = Standing { remaining: limit.saturating_sub(held), reset: last_free };
        let after =
            Standing { remaining: limit.saturating_sub(held + permits), reset: last_free.max(now + q.interval_ms()) };
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

    /// Keeps this state under `quota`, as the scripts keep a state when its limit changes; another algorithm's
    /// state is [`Error::ForeignState`], as the scripts refuse one (two limits sharing a name).
    pub fn requota(&mut self, quota: Quota) -> Result<()> {
        let (held, wanted) = (self.quota.algorithm(), quota.algorithm());
        if held != wanted {
            return Err(Error::ForeignState(format!(
                "a {wanted} limit found a {held} limit's state: two limits share its name with different \
                 algorithms; give each its own name"
            )));
        }
        self.quota = quota;
        Ok(())
    }

    /// Whether the limit is whole at `now` (nothing held, counted or owed): such a state decides as a fresh one.
    pub fn is_whole(&mut self, now: u64) -> bool {
        self.decide(now, 1).now.reset <= now
    }

    /// The verdict on `permits` at `now`; changes nothing that matters (logs forget what has expired).
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

    /// Records a grant of `permits` at `now` (after an allowing [`decide`](ModelLimit::decide) at the same time) and
    /// returns its receipt, as the scripts do. `grant_id` names a log's grant.
    pub fn grant(&mut self, now: u64, permits: u32, grant_id: u64) -> Receipt {
        let (q, n) = (&self.quota, u64::from(permits));
        let mark = match &mut self.state {
            State::TokenBucket(state) => {
                state.grant(q, now, n);
                now.to_string()
            }
            State::Gcra(state) => {
                state.grant(q, now, n);
                now.to_string()
            }
            State::FixedWindow(state) => state.grant(q, now, n).to_string(),
            State::SlidingWindow(state) => state.grant(q, now, n).to_string(),
            State::Concurrency(state) => {
                state.grant(q, now, n, grant_id);
                format!("{}-{grant_id:016x}", now + q.interval_ms())
            }
            State::SlidingLog(state) => {
                state.grant(q, now, n, grant_id);
                format!("{}-{grant_id:016x}", now + q.interval_ms())
            }
        };
        format!("{permits}:{mark}").parse().expect("a receipt of whole numbers or hex digits")
    }

    /// Gives back the grant `receipt` names at `now` (see [`Receipt`]). Returns whether anything was given back, or
    /// [`Error::InvalidArgument`] for a receipt no grant of this limit made, as the scripts refuse them.
    pub fn refund(&mut self, now: u64, receipt: &Receipt) -> Result<bool> {
        let (q, n) = (&self.quota, u64::from(receipt.permits()));
        let forged = || Error::InvalidArgument(format!("receipt {receipt} names no grant of this limit"));
        if n > u64::from(q.limit()) {
            return Err(forged());
        }
        let number_up_to = |most: u64| receipt.mark().parse::<u64>().ok().filter(|&mark| mark <= most);
        // A log's grant: '<expiry>-<grant id>' (a mark of another form is no log's receipt).
        let logged = || {
            let (expiry, id) = receipt.mark().split_once('-')?;
            Some((expiry.parse::<u64>().ok()?, u64::from_str_radix(id, 16).ok()?))
        };
        Ok(match &mut self.state {
            State::TokenBucket(state) => state.refund(q, now, number_up_to(now).ok_or_else(forged)?, n),
            State::Gcra(state) => state.refund(q, now, number_up_to(now).ok_or_else(forged)?, n),
            State::FixedWindow(state) => {
                let granted_in = number_up_to(state.window(q, now)).ok_or_else(forged)?;
                state.refund(q, now, granted_in, n)
            }
            State::SlidingWindow(state) => {
                let granted_in = number_up_to(state.window(q, now)).ok_or_else(forged)?;
                state.refund(q, now, granted_in, n)
            }
            State::Concurrency(state) => {
                let (expiry, id) = logged().ok_or_else(forged)?;
                state.release(now, (expiry, n, id))
            }
            State::SlidingLog(state) => {
                let (expiry, id) = logged().ok_or_else(forged)?;
                state.refund(now, (expiry, n, id))
            }
        })
    }
}

/// Removes the logged grant (expiry, permits, id) if still held at `now`, as the scripts remove the one member that
/// names it.
fn give_back_grant(grants: &mut Vec<(u64, u64, u64)>, now: u64, grant: (u64, u64, u64)) -> bool {
    let Some(index) = grants.iter().position(|&logged| logged == grant && grant.0 > now) else {
        return false;
    };
    grants.remove(index);
    true
}

/// Decides several limits together, all or nothing, as the driver script does: each entry is a limit, its permits
/// and its grant id. Returns each verdict and, when granted, each receipt.
pub fn decide_all(limits: &mut [(&mut ModelLimit, u32, u64)], now: u64) -> (Vec<Verdict>, Option<Vec<Receipt>>) {
    let verdicts: Vec<Verdict> = limits.iter_mut().map(|(limit, permits, _)| limit.decide(now, *permits)).collect();
    let receipts = verdicts
        .iter()
        .all(|verdict| verdict.allowed)
        .then(|| (limits.iter_mut()).map(|(limit, permits, grant_id)| limit.grant(now, *permits, *grant_id)).collect());
    (verdicts, receipts)
}
