//! What a limit allows: an algorithm and its numbers, validated so that an unusable quota cannot be built.

use std::fmt;
use std::num::NonZeroU32;
use std::str::FromStr;
use std::time::Duration;

use crate::duration::whole_ms;
use crate::error::{Error, Result};
use crate::lua;
use crate::rest::Script;

/// The scripts do exact whole-number arithmetic in Lua's doubles; `limit × interval` must stay below this.
const MAX_LIMIT_TIMES_INTERVAL: u64 = 1 << 52;

/// The rate-limiting algorithms of the family. The Redisson-compatible sliding log is [`crate::redisson`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Algorithm {
    /// Capacity `limit`, refilled continuously at `rate` per interval; starts full. Allows bursts up to the
    /// capacity, then the refill rate.
    TokenBucket,
    /// At most `limit` per aligned window of `interval`; up to 2 × limit can pass across a window boundary.
    FixedWindow,
    /// The weighted two-window approximation: O(1) memory, exact under steady traffic; a burst at a window's end lets
    /// up to nearly 2 × limit through in one interval.
    SlidingWindow,
    /// Generic cell rate algorithm: a burst of `limit`, then `rate` per interval; one timestamp per key. Decides as a
    /// token bucket with the same numbers.
    Gcra,
    /// At most `limit` permits held at once; leases expire after `interval` if not released.
    Concurrency,
    /// At most `limit` permits in any interval-long span: every grant is logged and frees `interval` after it was made.
    /// Exact, with an exact `retry_after`, at the cost of one zset member per grant in the window.
    ///
    /// Decides as [`crate::redisson`] does, but per identifier with the quota per request, so it combines with other
    /// limits; [`crate::redisson`] keeps Redisson's layout for sharing with Java services.
    SlidingLog,
}

impl Algorithm {
    /// Every algorithm, in the order the docs list them.
    pub const ALL: [Algorithm; 6] = [
        Algorithm::TokenBucket,
        Algorithm::FixedWindow,
        Algorithm::SlidingWindow,
        Algorithm::Gcra,
        Algorithm::Concurrency,
        Algorithm::SlidingLog,
    ];

    /// The name scripts and stored configs use: `token_bucket`, `fixed_window`, `sliding_window`, `gcra`,
    /// `concurrency`, `sliding_log`.
    pub fn script_name(self) -> &'static str {
        match self {
            Algorithm::TokenBucket => "token_bucket",
            Algorithm::FixedWindow => "fixed_window",
            Algorithm::SlidingWindow => "sliding_window",
            Algorithm::Gcra => "gcra",
            Algorithm::Concurrency => "concurrency",
            Algorithm::SlidingLog => "sliding_log",
        }
    }

    /// The script deciding one limit of this algorithm (`edgelimit scripts <name>`).
    pub fn script(self) -> &'static Script {
        match self {
            Algorithm::TokenBucket => &lua::TOKEN_BUCKET,
            Algorithm::FixedWindow => &lua::FIXED_WINDOW,
            Algorithm::SlidingWindow => &lua::SLIDING_WINDOW,
            Algorithm::Gcra => &lua::GCRA,
            Algorithm::Concurrency => &lua::CONCURRENCY,
            Algorithm::SlidingLog => &lua::SLIDING_LOG,
        }
    }

    /// The script deciding several calls of this algorithm in one call (`edgelimit scripts batch/<name>`).
    pub fn batch_script(self) -> &'static Script {
        match self {
            Algorithm::TokenBucket => &lua::BATCH_TOKEN_BUCKET,
            Algorithm::FixedWindow => &lua::BATCH_FIXED_WINDOW,
            Algorithm::SlidingWindow => &lua::BATCH_SLIDING_WINDOW,
            Algorithm::Gcra => &lua::BATCH_GCRA,
            Algorithm::Concurrency => &lua::BATCH_CONCURRENCY,
            Algorithm::SlidingLog => &lua::BATCH_SLIDING_LOG,
        }
    }

    /// Whether a grant is logged as zset members named by a fresh id (concurrency, sliding log): a refund must name a
    /// member still logged, so its receipt cannot be made up or used twice. Other receipts name a time or window,
    /// which anyone can write, so the bridge lets a `limiter` token refund only these.
    pub fn names_grants(self) -> bool {
        matches!(self, Algorithm::Concurrency | Algorithm::SlidingLog)
    }
}

impl fmt::Display for Algorithm {
    /// The CLI's spelling: `token-bucket`, `fixed-window`, `sliding-window`, `gcra`, `concurrency`, `sliding-log`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.script_name().replace('_', "-"))
    }
}

impl FromStr for Algorithm {
    type Err = Error;

    /// Accepts the CLI's spelling and the scripts' (`token-bucket` or `token_bucket`).
    fn from_str(text: &str) -> Result<Algorithm> {
        // `sliding-log`, `sliding_log` and `slidingLog` (as the JS factories are named) are one algorithm.
        let wanted: String = text
            .trim()
            .chars()
            .flat_map(|c| match c {
                '-' => vec!['_'],
                c if c.is_ascii_uppercase() => vec!['_', c.to_ascii_lowercase()],
                c => vec![c],
            })
            .collect();
        Algorithm::ALL.into_iter().find(|algorithm| algorithm.script_name() == wanted).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "unknown algorithm {text:?}: use one of token-bucket, fixed-window, sliding-window, gcra, \
                     concurrency, sliding-log"
            ))
        })
    }
}

/// A validated quota: an algorithm, a limit, an interval and (for token bucket and GCRA) a rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Quota {
    algorithm: Algorithm,
    limit: NonZeroU32,
    interval_ms: u64,
    rate: NonZeroU32,
}

impl Quota {
    /// A token bucket holding up to `capacity` tokens, refilled continuously by `refill` tokens per `interval`.
    pub fn token_bucket(capacity: u32, refill: u32, interval: Duration) -> Result<Quota> {
        Quota::new(Algorithm::TokenBucket, capacity, interval, refill)
    }

    /// At most `limit` permits per aligned window of `interval`.
    pub fn fixed_window(limit: u32, interval: Duration) -> Result<Quota> {
        Quota::new(Algorithm::FixedWindow, limit, interval, limit)
    }

    /// About `limit` permits per sliding `interval`, by the weighted two-window approximation.
    pub fn sliding_window(limit: u32, interval: Duration) -> Result<Quota> {
        Quota::new(Algorithm::SlidingWindow, limit, interval, limit)
    }

    /// GCRA: bursts of up to `burst` permits, `rate` permits per `interval` sustained.
    pub fn gcra(burst: u32, rate: u32, interval: Duration) -> Result<Quota> {
        Quota::new(Algorithm::Gcra, burst, interval, rate)
    }

    /// At most `limit` permits in flight; a lease not released expires after `lease_timeout`.
    pub fn concurrency(limit: u32, lease_timeout: Duration) -> Result<Quota> {
        Quota::new(Algorithm::Concurrency, limit, lease_timeout, 1)
    }

    /// At most `limit` permits in any interval-long span, exactly: see [`Algorithm::SlidingLog`].
    pub fn sliding_log(limit: u32, interval: Duration) -> Result<Quota> {
        Quota::new(Algorithm::SlidingLog, limit, interval, limit)
    }

    /// Any algorithm from its three numbers (as the CLI and stored configs carry them); `rate` matters only for token
    /// bucket and GCRA.
    pub fn new(algorithm: Algorithm, limit: u32, interval: Duration, rate: u32) -> Result<Quota> {
        let limit = NonZeroU32::new(limit)
            .ok_or_else(|| Error::InvalidArgument(format!("the {algorithm} limit must be at least 1")))?;
        let rate = NonZeroU32::new(rate)
            .ok_or_else(|| Error::InvalidArgument(format!("the {algorithm} rate must be at least 1 per interval")))?;
        let interval_ms = whole_ms(interval, "interval")?;
        if u64::from(limit.get()).saturating_mul(interval_ms) > MAX_LIMIT_TIMES_INTERVAL {
            return Err(Error::InvalidArgument(format!(
                "{limit} per {interval_ms} ms is too large: limit × interval (ms) must stay below 2^52 for exact \
                 arithmetic; use a shorter interval with a proportional limit"
            )));
        }
        Ok(Quota { algorithm, limit, interval_ms, rate })
    }

    /// The algorithm.
    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// The limit: capacity (token bucket), burst (GCRA), permits per window or per sliding interval, or permits in
    /// flight.
    pub fn limit(&self) -> u32 {
        self.limit.get()
    }

    /// The interval: window length, refill period, or lease timeout (concurrency).
    pub fn interval(&self) -> Duration {
        Duration::from_millis(self.interval_ms)
    }

    /// The interval in ms.
    pub fn interval_ms(&self) -> u64 {
        self.interval_ms
    }

    /// Permits refilled per interval (token bucket, GCRA); the limit for the window algorithms and the sliding log, 1
    /// for concurrency.
    pub fn rate(&self) -> u32 {
        self.rate.get()
    }

    /// The request as the scripts read it (`ARGV[1]`): `<permits>:<limit>:<interval ms>`, then `:<rate>` for the token
    /// bucket and GCRA.
    pub(crate) fn request_argument(&self, permits: u32) -> String {
        let (limit, interval) = (self.limit(), self.interval_ms);
        match self.algorithm {
            Algorithm::TokenBucket | Algorithm::Gcra => format!("{permits}:{limit}:{interval}:{}", self.rate()),
            _ => format!("{permits}:{limit}:{interval}"),
        }
    }
}

impl fmt::Display for Quota {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (algorithm, limit, interval, rate) = (self.algorithm, self.limit, self.interval_ms, self.rate);
        match algorithm {
            Algorithm::TokenBucket | Algorithm::Gcra => {
                write!(f, "{algorithm}: {limit} at once, {rate} per {interval} ms")
            }
            Algorithm::Concurrency => write!(f, "{algorithm}: {limit} in flight, leases of {interval} ms"),
            _ => write!(f, "{algorithm}: {limit} per {interval} ms"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_quotas_are_unrepresentable() {
        let second = Duration::from_secs(1);
        assert!(Quota::fixed_window(0, second).is_err());
        assert!(Quota::token_bucket(10, 0, second).is_err());
        assert!(Quota::gcra(10, 1, Duration::ZERO).is_err());
        assert!(Quota::sliding_window(10, Duration::from_micros(1500)).is_err());
        let too_large = Quota::fixed_window(u32::MAX, Duration::from_secs(86_400 * 365)).unwrap_err();
        assert!(too_large.to_string().contains("2^52"), "{too_large}");
        let quota = Quota::gcra(20, 10, second).unwrap();
        assert_eq!((quota.limit(), quota.rate(), quota.interval_ms()), (20, 10, 1000));
    }

    #[test]
    fn algorithm_names_round_trip() {
        for algorithm in Algorithm::ALL {
            assert_eq!(algorithm.to_string().parse::<Algorithm>().unwrap(), algorithm);
            assert_eq!(algorithm.script_name().parse::<Algorithm>().unwrap(), algorithm);
        }
        assert_eq!("slidingLog".parse::<Algorithm>().unwrap(), Algorithm::SlidingLog);
        assert_eq!("tokenBucket".parse::<Algorithm>().unwrap(), Algorithm::TokenBucket);
        let unknown = "leaky-bucket".parse::<Algorithm>().unwrap_err();
        assert!(unknown.to_string().contains("token-bucket"));
    }
}
