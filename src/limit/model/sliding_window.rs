//! Sliding window counter: previous window's count × the share of it still covered, plus the current count.

use super::{Standing, Verdict};
use crate::limit::Quota;

/// (window, current count, previous window's count); `None` is nothing counted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SlidingWindow(pub(super) Option<(u64, u64, u64)>);

impl SlidingWindow {
    /// (window, ms elapsed in it, current, previous) at `now`.
    pub(super) fn counts(&self, q: &Quota, now: u64) -> (u64, u64, u64, u64) {
        let interval = q.interval_ms();
        let window = now / interval;
        let (window, current, previous) = match self.0 {
            Some((stored, current, previous)) if stored >= window => (stored, current, previous),
            Some((stored, current, _)) if stored + 1 == window => (window, 0, current),
            _ => (window, 0, 0),
        };
        // Saturating: a stored window far ahead (written by something else) must not overflow.
        (window, now.saturating_sub(window.saturating_mul(interval)), current, previous)
    }

    pub(super) fn decide(&mut self, q: &Quota, now: u64, permits: u64) -> Verdict {
        let (window, elapsed, current, previous) = self.counts(q, now);
        let (limit, interval) = (i128::from(q.limit()), i128::from(q.interval_ms()));
        let weighted_previous = i128::from(previous) * (interval - i128::from(elapsed));
        // Room in 1/interval permits with `counted` in the current window: limit − weighted count, exactly.
        let room = |counted: u64| limit * interval - weighted_previous - i128::from(counted) * interval;
        let standing = |counted: u64| Standing {
            remaining: (room(counted).max(0) / interval) as u64,
            reset: if counted > 0 {
                (window + 2) * q.interval_ms()
            } else if previous > 0 {
                (window + 1) * q.interval_ms()
            } else {
                now
            },
        };
        let allowed = room(current + permits) >= 0;
        let retry_after = if allowed { 0 } else { first_fit(q, window, current, previous, permits) - now };
        Verdict::new(allowed, retry_after, standing(current), standing(current + permits))
    }

    /// Records a grant; returns its window, its receipt's mark.
    pub(super) fn grant(&mut self, q: &Quota, now: u64, permits: u64) -> u64 {
        let (window, _, current, previous) = self.counts(q, now);
        self.0 = Some((window, current + permits, previous));
        window
    }

    /// The current window (a stored later one stays current): a receipt's window may not be after it.
    pub(super) fn window(&self, q: &Quota, now: u64) -> u64 {
        self.counts(q, now).0
    }

    /// Gives back a grant of `permits` in `granted_in` to that window's count while it counts (current or previous);
    /// false when that gives nothing back.
    pub(super) fn refund(&mut self, q: &Quota, now: u64, granted_in: u64, permits: u64) -> bool {
        let (window, _, mut current, mut previous) = self.counts(q, now);
        let count = if granted_in == window {
            &mut current
        } else if granted_in + 1 == window {
            &mut previous
        } else {
            return false;
        };
        let given = *count > 0;
        *count = count.saturating_sub(permits);
        if given {
            self.0 = (current > 0 || previous > 0).then_some((window, current, previous));
        }
        given
    }
}

/// The first ms at which `permits` fit, by search rather than algebra: this window, the next, then the start of the
/// one after. Slow, obviously right, used only by the model.
fn first_fit(q: &Quota, window: u64, current: u64, previous: u64, permits: u64) -> u64 {
    let (limit, interval) = (u64::from(q.limit()), q.interval_ms());
    let fits = |weighted: u64, counted: u64, elapsed: u64| {
        u128::from(weighted) * u128::from(interval - elapsed) + u128::from(counted + permits) * u128::from(interval)
            <= u128::from(limit) * u128::from(interval)
    };
    // Binary search works: the weighted part only falls as `elapsed` grows.
    let search = |weighted: u64, counted: u64| {
        if !fits(weighted, counted, interval - 1) {
            return None;
        }
        let (mut low, mut high) = (0, interval - 1);
        while low < high {
            let middle = (low + high) / 2;
            if fits(weighted, counted, middle) {
                high = middle;
            } else {
                low = middle + 1;
            }
        }
        Some(low)
    };
    if let Some(elapsed) = search(previous, current) {
        return window * interval + elapsed;
    }
    if let Some(elapsed) = search(current, 0) {
        return (window + 1) * interval + elapsed;
    }
    (window + 2) * interval
}
