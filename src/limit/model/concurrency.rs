//! Concurrency: leases held at once, each expiring `interval` ms after its grant.

use super::Verdict;
use crate::limit::Quota;

/// Live leases as (expiry, permits, grant id).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Concurrency(Vec<(u64, u64, u64)>);

impl Concurrency {
    fn expire(&mut self, now: u64) {
        self.0.retain(|&(expiry, _, _)| expiry > now);
        self.0.sort_unstable();
    }

    pub(super) fn decide(&mut self, q: &Quota, now: u64, permits: u64) -> Verdict {
        self.expire(now);
        let held: u64 = self.0.iter().map(|&(_, permits, _)| permits).sum();
        let last_expiry = self.0.last().map_or(now, |&(expiry, _, _)| expiry);
        Verdict::of_log(q, now, permits, held, last_expiry, || {
            // Until the soonest-expiring leases free the excess (requests above the limit are refused before this).
            let (mut freed, excess) = (0, held + permits - u64::from(q.limit()));
            let enough = self.0.iter().find(|&&(_, lease_permits, _)| {
                freed += lease_permits;
                freed >= excess
            });
            enough.map_or(0, |&(expiry, _, _)| expiry - now)
        })
    }

    pub(super) fn grant(&mut self, q: &Quota, now: u64, permits: u64, id: u64) {
        self.0.push((now + q.interval_ms(), permits, id));
        self.0.sort_unstable();
    }

    /// Releases the lease (expiry, permits, id) if it is still held; false when it is not.
    pub(super) fn release(&mut self, now: u64, lease: (u64, u64, u64)) -> bool {
        self.expire(now);
        super::give_back_grant(&mut self.0, now, lease)
    }
}
