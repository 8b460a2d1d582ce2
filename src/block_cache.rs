//! The block cache: identifiers known to be denied until a time, kept in memory so that repeated denied requests
//! cost no round trip.
//!
//! It never denies what Redis would allow: a denial's deadline counts from when the request was *sent*, and a
//! smaller request than the one denied still goes to Redis. Concurrency limits (capacity can come back early) are
//! never cached.

use std::collections::HashMap;
use std::time::Duration;

use crate::decision::Decision;
use crate::time::Instant;

/// One cached denial: the smallest request it covers, when it ends (local monotonic clock), and the denial itself.
#[derive(Debug, Clone, Copy)]
struct Block {
    permits: u32,
    until: Instant,
    decision: Decision,
}

/// A bounded map from a key (an identifier under a set of limits) to the time until which it is denied.
#[derive(Debug)]
pub struct BlockCache {
    max_entries: usize,
    blocks: HashMap<String, Block>,
}

impl BlockCache {
    /// A cache holding at most `max_entries` denials (at least one).
    pub fn new(max_entries: usize) -> BlockCache {
        BlockCache { max_entries: max_entries.max(1), blocks: HashMap::new() }
    }

    /// Number of denials held, expired or not.
    pub fn len(&self) -> usize {
        self.blocks.len()
    }

    /// True when no denial is held.
    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }

    /// The cached denial covering a request of `permits` for `key` at `now`, `retry_after` counted from `now`;
    /// `None` when the request must go to Redis. An expired denial is dropped.
    pub fn check(&mut self, key: &str, permits: u32, now: Instant) -> Option<Decision> {
        let block = *self.blocks.get(key)?;
        if now >= block.until {
            self.blocks.remove(key);
            return None;
        }
        let retry_after = ceil_ms(block.until - now);
        (permits >= block.permits).then_some(Decision { retry_after, ..block.decision })
    }

    /// Remembers that a request of `permits` for `key`, sent at `sent`, was denied with `decision` (ignored when it
    /// has no wait). When full, expired denials go first, then the one that ends soonest.
    pub fn block(&mut self, key: &str, permits: u32, sent: Instant, decision: Decision) {
        if decision.success || decision.retry_after == 0 {
            return;
        }
        let until = sent + Duration::from_millis(decision.retry_after);
        if self.blocks.len() >= self.max_entries && !self.blocks.contains_key(key) {
            self.blocks.retain(|_, block| block.until > sent);
            let soonest = self.blocks.iter().min_by_key(|(_, block)| block.until).map(|(key, _)| key.clone());
            if let Some(soonest) = soonest.filter(|_| self.blocks.len() >= self.max_entries) {
                self.blocks.remove(&soonest);
            }
        }
        let block = Block { permits, until, decision };
        self.blocks.insert(key.to_owned(), block);
    }

    /// Forgets every denial whose key satisfies `matches` (after a reset).
    pub fn forget(&mut self, mut matches: impl FnMut(&str) -> bool) {
        self.blocks.retain(|key, _| !matches(key));
    }
}

/// Whole milliseconds, rounded up: a caller told to wait this long must not come back early.
pub(crate) fn ceil_ms(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn denied(retry_after: u64) -> Decision {
        Decision { success: false, limit: 10, remaining: 0, reset: 1_700_000_001_000, retry_after, receipt: None }
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_denial_is_served_until_its_deadline_counted_from_the_send() {
        let mut cache = BlockCache::new(10);
        let sent = Instant::now();
        cache.block("ip:1", 1, sent, denied(300));
        let served = cache.check("ip:1", 1, sent + ms(100)).unwrap();
        assert_eq!((served.success, served.retry_after, served.reset), (false, 200, 1_700_000_001_000));
        assert_eq!(cache.check("ip:1", 1, sent + ms(299) + Duration::from_micros(500)).unwrap().retry_after, 1);
        assert!(cache.check("ip:1", 1, sent + ms(300)).is_none(), "the deadline itself goes to Redis");
        assert!(cache.is_empty(), "an expired denial is dropped");
    }

    #[test]
    fn only_requests_at_least_as_large_are_answered() {
        let mut cache = BlockCache::new(10);
        let sent = Instant::now();
        cache.block("k", 5, sent, denied(1000));
        assert!(cache.check("k", 4, sent).is_none());
        assert!(cache.check("k", 5, sent).is_some());
        assert!(cache.check("k", 6, sent).is_some());
        assert!(cache.check("other", 5, sent).is_none());
    }

    #[test]
    fn grants_and_waitless_denials_are_not_cached() {
        let mut cache = BlockCache::new(10);
        let sent = Instant::now();
        cache.block("k", 1, sent, Decision { success: true, ..denied(0) });
        cache.block("k", 1, sent, denied(0));
        assert!(cache.is_empty());
    }

    #[test]
    fn the_size_is_bounded_expired_first_then_soonest_ending() {
        let mut cache = BlockCache::new(2);
        let sent = Instant::now();
        cache.block("short", 1, sent, denied(10));
        cache.block("long", 1, sent, denied(1000));
        // "short" has expired by the third insert: it goes, "long" stays.
        cache.block("third", 1, sent + ms(20), denied(500));
        assert_eq!(cache.len(), 2);
        assert!(cache.check("long", 1, sent + ms(20)).is_some());
        // Nothing expired: the one ending soonest ("third", at 520 ms) makes room.
        cache.block("fourth", 1, sent + ms(30), denied(5000));
        assert_eq!(cache.len(), 2);
        assert!(cache.check("third", 1, sent + ms(30)).is_none());
        assert!(cache.check("long", 1, sent + ms(30)).is_some());
        // Re-blocking a held key never evicts another.
        cache.block("long", 1, sent + ms(30), denied(100));
        assert_eq!(cache.len(), 2);
    }

    #[test]
    fn forget_drops_matching_keys() {
        let mut cache = BlockCache::new(10);
        let sent = Instant::now();
        cache.block("a\u{0}ip", 1, sent, denied(1000));
        cache.block("b\u{0}ip", 1, sent, denied(1000));
        cache.block("a\u{0}other", 1, sent, denied(1000));
        cache.forget(|key| key.ends_with("\u{0}ip"));
        assert_eq!(cache.len(), 1);
    }
}
