//! Concurrency: leases held at once, each expiring `interval` ms after its grant.

use super::{Standing, Verdict};
use crate::limit::Quota;

/// Live leases as (expiry, permits, id).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Concurrency(Vec<(u64, u64, u64)>);

impl Concurrency {
    fn expire(&mut self, now: u64) {
        self.0.retain(|&(expiry, _, _)| expiry > now);
        self.0.sort_unstable();
    }

    pub(super) fn decide(&mut self, q: &Quota, now: u64, permits: u64) -> Verdict {
        self.expire(now);
        let limit = u64::from(q.limit());
        let held: u64 = self.0.iter().map(|&(_, permits, _)| permits).sum();
        let last_expiry = self.0.last().map_or(now, |&(expiry, _, _)| expiry);
        let allowed = held + permits <= limit;
        let mut retry_after = 0;
        if !allowed {
            let (mut freed, excess) = (0, held + permits - limit);
            for &(expiry, lease_permits, _) in &self.0 {
                freed += lease_permits;
                if freed >= excess {
                    retry_after = expiry - now;
                    break;
                }
            }
        }
        let now_standing = Standing {
            remaining: limit.saturating_sub(held),
            reset: last_expiry,
        };
        let after = Standing {
            remaining: limit.saturating_sub(held + permits),
            reset: last_expiry.max(now + q.interval_ms()),
        };
        Verdict::new(allowed, retry_after, now_standing, after)
    }

    pub(super) fn grant(&mut self, q: &Quota, now: u64, permits: u64, id: u64) {
        self.0.push((now + q.interval_ms(), permits, id));
        self.0.sort_unstable();
    }

    pub(super) fn release(&mut self, now: u64, permits: u64, id: u64) -> bool {
        self.expire(now);
        let before = self.0.len();
        self.0.retain(|&(_, held, lease)| (held, lease) != (permits, id));
        self.0.len() < before
    }
}
