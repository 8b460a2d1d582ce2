//! Token bucket and GCRA: one decision over "units" (a permit is `interval` units; `rate` units return per ms),
//! stored two ways. A grant's receipt mark is its time; a refund gives back what is still missing (see [`credit`]).

use super::{Standing, Verdict};
use crate::limit::Quota;

fn full(q: &Quota) -> u64 {
    u64::from(q.limit()) * q.interval_ms()
}

/// The shared decision: `available` units (negative when the limit was lowered under existing debt).
fn verdict(q: &Quota, now: u64, available: i128, permits: u64) -> Verdict {
    let (full, rate, interval) = (i128::from(full(q)), i128::from(q.rate()), i128::from(q.interval_ms()));
    let need = i128::from(permits) * interval;
    let standing = |units: i128| Standing {
        remaining: (units.max(0) / interval) as u64,
        reset: now + ((full - units) as u64).div_ceil(rate as u64),
    };
    let allowed = available >= need;
    let retry_after = if allowed { 0 } else { ((need - available) as u64).div_ceil(rate as u64) };
    Verdict::new(allowed, retry_after, standing(available), standing(available - need))
}

/// Units a refund at `now` gives back for a grant of `permits` at `granted`: what it took less what has refilled
/// since, so the bucket never rises above where it would be had the grant never been made.
fn credit(q: &Quota, now: u64, granted: u64, permits: u64) -> u64 {
    let taken = u128::from(permits) * u128::from(q.interval_ms());
    let refilled = u128::from(now - granted) * u128::from(q.rate());
    taken.saturating_sub(refilled) as u64
}

/// Token bucket state: units in the bucket at ms `at`; `None` is a full bucket.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TokenBucket(pub(super) Option<(u64, u64)>);

impl TokenBucket {
    /// Units at `now` after continuous refill, and the time they are as of.
    pub(super) fn units(&self, q: &Quota, now: u64) -> (u64, u64) {
        let full = full(q);
        let Some((units, at)) = self.0 else {
            return (full, now);
        };
        let units = units.min(full);
        if now <= at {
            return (units, at);
        }
        let refilled = u128::from(units) + u128::from(now - at) * u128::from(q.rate());
        (refilled.min(u128::from(full)) as u64, now)
    }

    fn write(&mut self, q: &Quota, units: u64, at: u64) {
        self.0 = (units < full(q)).then_some((units, at));
    }

    pub(super) fn decide(&mut self, q: &Quota, now: u64, permits: u64) -> Verdict {
        verdict(q, now, i128::from(self.units(q, now).0), permits)
    }

    pub(super) fn grant(&mut self, q: &Quota, now: u64, permits: u64) {
        let (units, at) = self.units(q, now);
        self.write(q, units - permits * q.interval_ms(), at);
    }

    /// Gives back the grant of `permits` made at `granted` (not after `now`); false when that gives nothing back.
    pub(super) fn refund(&mut self, q: &Quota, now: u64, granted: u64, permits: u64) -> bool {
        let (units, at) = self.units(q, now);
        let credit = credit(q, now, granted, permits);
        let given = credit > 0 && units < full(q);
        if given {
            self.write(q, (units + credit).min(full(q)), at);
        }
        given
    }
}

/// GCRA state: the theoretical arrival time as (whole ms, remainder in 1/rate ms); `None` is no debt. A remainder
/// of 2^32 or more also marks where slots reserved for a client end (see [`Gcra::floor`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Gcra(pub(super) Option<(u64, u64)>);

/// A remainder at or above this carries a floor (`lua/limits/gcra.lua`); an unmarked one is below the rate.
const FLOOR_MARKED: u64 = 1 << 32;

/// The offset of a marked remainder, in 1/rate ms: the least multiple of `rate` above 2^32, over `rate`.
fn floor_mark(rate: u64) -> u64 {
    FLOOR_MARKED / rate + 1
}

impl Gcra {
    /// (TAT − now) × rate, at least 0.
    pub(super) fn debt(&self, q: &Quota, now: u64) -> u64 {
        let rate = u64::from(q.rate());
        match self.0 {
            // Saturating: a stored state read back (limit::state) may hold any time, written by something else.
            Some((ms, rem)) if ms >= now => {
                let part = if rem >= FLOOR_MARKED { rem % rate } else { rem.min(rate - 1) };
                (ms - now).saturating_mul(rate).saturating_add(part)
            }
            _ => 0,
        }
    }

    /// Where permits reserved for a client end (unix ms, rounded up; 0 when none is marked): a refund does not move
    /// TAT back over them (`lua/limits/gcra.lua` has why).
    pub(super) fn floor(&self, q: &Quota) -> u64 {
        let rate = u64::from(q.rate());
        match self.0 {
            Some((ms, rem)) if rem >= FLOOR_MARKED => {
                (ms + 1 + floor_mark(rate)).saturating_sub((rem - rem % rate) / rate)
            }
            _ => 0,
        }
    }

    /// Stores `debt` at `now`, keeping the floor marked while it is ahead, as the scripts do.
    fn write(&mut self, q: &Quota, now: u64, debt: u64) {
        let (rate, floor) = (u64::from(q.rate()), self.floor(q));
        let whole_ms = now + debt / rate;
        let part = match debt % rate {
            part if floor > now => part + rate * (floor_mark(rate) + whole_ms + 1).saturating_sub(floor),
            part => part,
        };
        self.0 = (debt > 0).then_some((whole_ms, part));
    }

    pub(super) fn decide(&mut self, q: &Quota, now: u64, permits: u64) -> Verdict {
        let available = i128::from(full(q)) - i128::from(self.debt(q, now));
        verdict(q, now, available, permits)
    }

    pub(super) fn grant(&mut self, q: &Quota, now: u64, permits: u64) {
        let debt = self.debt(q, now) + permits * q.interval_ms();
        self.write(q, now, debt);
    }

    /// Gives back the grant of `permits` made at `granted` (not after `now`); false when that gives nothing back.
    /// Never below the debt of slots reserved for a client.
    pub(super) fn refund(&mut self, q: &Quota, now: u64, granted: u64, permits: u64) -> bool {
        let (debt, credit) = (self.debt(q, now), credit(q, now, granted, permits));
        let floor = self.floor(q);
        let least = if floor > now { ((floor - now) * u64::from(q.rate())).min(debt) } else { 0 };
        let given = credit > 0 && debt > least;
        if given {
            self.write(q, now, debt.saturating_sub(credit).max(least));
        }
        given
    }
}
