//! Fixed window: `limit` per aligned window of `interval` ms.

use super::{Standing, Verdict};
use crate::limit::Quota;

/// The counted window and its count; `None` is nothing counted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FixedWindow(pub(super) Option<(u64, u64)>);

impl FixedWindow {
    /// The current window (a stored later one stays current) and its count.
    pub(super) fn count(&self, q: &Quota, now: u64) -> (u64, u64) {
        let window = now / q.interval_ms();
        match self.0 {
            Some((stored, count)) if stored >= window => (stored, count),
            _ => (window, 0),
        }
    }

    pub(super) fn decide(&mut self, q: &Quota, now: u64, permits: u64) -> Verdict {
        let (window, count) = self.count(q, now);
        let (limit, window_end) = (u64::from(q.limit()), (window + 1) * q.interval_ms());
        let standing = |counted: u64| Standing {
            remaining: limit.saturating_sub(counted),
            reset: if counted > 0 { window_end } else { now },
        };
        let allowed = count + permits <= limit;
        let retry_after = if allowed { 0 } else { window_end - now };
        Verdict::new(allowed, retry_after, standing(count), standing(count + permits))
    }

    /// Records a grant; returns its window, its receipt's mark.
    pub(super) fn grant(&mut self, q: &Quota, now: u64, permits: u64) -> u64 {
        let (window, count) = self.count(q, now);
        self.0 = Some((window, count + permits));
        window
    }

    /// The current window (a stored later one stays current): a receipt's window may not be after it.
    pub(super) fn window(&self, q: &Quota, now: u64) -> u64 {
        self.count(q, now).0
    }

    /// Gives back a grant of `permits` in `granted_in` (not after the current window), only while that window is the
    /// current one; false when that gives nothing back.
    pub(super) fn refund(&mut self, q: &Quota, now: u64, granted_in: u64, permits: u64) -> bool {
        let (window, count) = self.count(q, now);
        let given = granted_in == window && count > 0;
        if given {
            self.0 = (count > permits).then(|| (window, count - permits));
        }
        given
    }
}
