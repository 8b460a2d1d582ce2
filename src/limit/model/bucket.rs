//! Token bucket and GCRA: one decision over "units" (a permit is `interval` units; `rate` units return per ms; the
//! limit holds limit × interval units), two ways to store it. A grant's receipt mark is its time; a refund gives back
//! what the grant took less what has refilled since (see [`credit`]).

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
    let retry_after = if allowed {
        0
    } else {
        ((need - available) as u64).div_ceil(rate as u64)
    };
    Verdict::new(allowed, retry_after, standing(available), standing(available - need))
}

/// Units a refund at `now` gives back for a grant of `permits` at `granted`: the grant took permits × interval units
/// and `rate` units have come back every ms since, so at most permits × interval − (now − granted) × rate are still
/// missing because of it (fewer if the bucket was full meanwhile). Crediting no more keeps the bucket at or below
/// where it would be had the grant never been made.
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

/// GCRA state: the theoretical arrival time as (whole ms, remainder in 1/rate ms); `None` is no debt.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Gcra(pub(super) Option<(u64, u64)>);

impl Gcra {
    /// (TAT − now) × rate, at least 0.
    pub(super) fn debt(&self, q: &Quota, now: u64) -> u64 {
        match self.0 {
            // Saturating: a stored state read back (limit::state) may hold any time, written by something else.
            Some((ms, rem)) if ms >= now => (ms - now)
                .saturating_mul(u64::from(q.rate()))
                .saturating_add(rem.min(u64::from(q.rate()) - 1)),
            _ => 0,
        }
    }

    fn write(&mut self, q: &Quota, now: u64, debt: u64) {
        let rate = u64::from(q.rate());
        self.0 = (debt > 0).then_some((now + debt / rate, debt % rate));
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
    pub(super) fn refund(&mut self, q: &Quota, now: u64, granted: u64, permits: u64) -> bool {
        let (debt, credit) = (self.debt(q, now), credit(q, now, granted, permits));
        let given = credit > 0 && debt > 0;
        if given {
            self.write(q, now, debt.saturating_sub(credit));
        }
        given
    }
}
