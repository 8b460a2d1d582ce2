//! Validated Redisson limiter settings: a non-zero rate, whole-millisecond intervals, a keep-alive no shorter than
//! the interval.

use std::num::NonZeroU32;
use std::time::Duration;

use crate::duration::whole_ms;
use crate::error::{Error, Result};

/// How many permits a limiter grants per interval (a u32, as Redisson packs permit counts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    permits: NonZeroU32,
    interval_ms: u64,
    pub(super) keep_alive_ms: u64,
}

impl Rate {
    /// `permits` per `interval`. The interval must be a whole number of milliseconds, at least 1 ms.
    pub fn new(permits: u32, interval: Duration) -> Result<Rate> {
        let permits = NonZeroU32::new(permits)
            .ok_or_else(|| Error::InvalidArgument("the rate must be at least 1 permit per interval".into()))?;
        let interval_ms = whole_ms(interval, "interval")?;
        Ok(Rate { permits, interval_ms, keep_alive_ms: 0 })
    }

    /// Lets the limiter vanish after `keep_alive` unused (Redisson's keepAliveTime, renewed by every use from either
    /// side). Without it the limiter stays until deleted or given an expiry, as Redisson's.
    pub fn with_keep_alive(mut self, keep_alive: Duration) -> Result<Rate> {
        let keep_alive_ms = whole_ms(keep_alive, "keep-alive")?;
        if keep_alive_ms < self.interval_ms {
            return Err(Error::InvalidArgument(format!(
                "the keep-alive ({keep_alive_ms} ms) must be at least the interval ({} ms): a limiter that forgets \
                 grants still in its window would over-admit",
                self.interval_ms
            )));
        }
        self.keep_alive_ms = keep_alive_ms;
        Ok(self)
    }

    /// Permits per interval.
    pub fn permits(&self) -> u32 {
        self.permits.get()
    }

    /// The interval.
    pub fn interval(&self) -> Duration {
        Duration::from_millis(self.interval_ms)
    }

    /// The keep-alive, if one is set.
    pub fn keep_alive(&self) -> Option<Duration> {
        (self.keep_alive_ms > 0).then(|| Duration::from_millis(self.keep_alive_ms))
    }

    pub(crate) fn interval_ms(&self) -> u64 {
        self.interval_ms
    }

    pub(crate) fn keep_alive_ms(&self) -> u64 {
        self.keep_alive_ms
    }
}

/// Who shares the permits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Every client of the limiter shares one budget (Redisson's `RateType.OVERALL`).
    #[default]
    Overall,
    /// Each client id has its own budget under the same configuration (Redisson's `RateType.PER_CLIENT`).
    PerClient,
}

impl Mode {
    /// Redisson's encoding in the config hash's `type` field.
    pub(crate) fn redisson_type(self) -> &'static str {
        match self {
            Mode::Overall => "0",
            Mode::PerClient => "1",
        }
    }
}

/// A limiter's configuration as stored in Redis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateConfig {
    /// The rate and interval (and keep-alive, if any).
    pub rate: Rate,
    /// Who shares the permits.
    pub mode: Mode,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_rates_are_unrepresentable() {
        assert!(Rate::new(0, Duration::from_secs(1)).is_err());
        assert!(Rate::new(5, Duration::ZERO).is_err());
        assert!(Rate::new(5, Duration::from_micros(1500)).is_err());
        let rate = Rate::new(5, Duration::from_secs(1)).unwrap();
        assert!(rate.with_keep_alive(Duration::from_millis(999)).is_err());
        let rate = rate.with_keep_alive(Duration::from_secs(60)).unwrap();
        assert_eq!((rate.permits(), rate.interval_ms(), rate.keep_alive_ms()), (5, 1000, 60_000));
    }
}
