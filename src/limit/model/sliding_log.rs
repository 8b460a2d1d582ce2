//! Sliding log: at most `limit` permits granted in (now − interval, now]; a grant at t frees its permits at
//! exactly t + interval.

use super::Verdict;
use crate::limit::Quota;

/// Grants still in the window, as (when they free, permits, grant id).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SlidingLog(Vec<(u64, u64, u64)>);

impl SlidingLog {
    /// Permits granted less than an interval before `at`.
    fn held(&self, at: u64) -> u64 {
        self.0.iter().filter(|&&(free_at, _, _)| free_at > at).map(|&(_, permits, _)| permits).sum()
    }

    /// Forgets the grants that left the window by `now`: they change no decision from then on.
    fn forget(&mut self, now: u64) {
        self.0.retain(|&(free_at, _, _)| free_at > now);
    }

    pub(super) fn decide(&mut self, q: &Quota, now: u64, permits: u64) -> Verdict {
        self.forget(now);
        let fits = |at: u64| self.held(at) + permits <= u64::from(q.limit());
        let newest = self.0.iter().map(|&(free_at, _, _)| free_at).max().unwrap_or(now);
        Verdict::of_log(q, now, permits, self.held(now), newest, || {
            // Nothing changes between the moments grants free, so the first of those at which the request fits is the
            // exact wait (one exists: the scripts refuse requests above the limit).
            let first = self.0.iter().map(|&(free_at, _, _)| free_at).filter(|&at| fits(at)).min();
            first.map_or(0, |at| at - now)
        })
    }

    pub(super) fn grant(&mut self, q: &Quota, now: u64, permits: u64, id: u64) {
        self.0.push((now + q.interval_ms(), permits, id));
    }

    /// Gives back the grant (expiry, permits, id) if it is still in the window; false when it is not.
    pub(super) fn refund(&mut self, now: u64, grant: (u64, u64, u64)) -> bool {
        self.forget(now);
        super::give_back_grant(&mut self.0, now, grant)
    }
}
