//! The Redisson layout: Redisson's `RRateLimiter`, a sliding log under a named config that Java services share.
//!
//! It keeps Redisson's Redis layout and key lifetimes exactly, so a Java service and edgelimit can share one limiter.
//! Unlike Redisson: time is the Redis server's, `retry_after` is the wait for *this* request's permits, missing
//! state is rebuilt, and any state a Redisson client can leave is read without over-admitting (docs/redisson.md).

mod rate;

use std::time::Duration;

pub use self::rate::{Mode, Rate, RateConfig};
use crate::decision::{Decision, ScriptReply, Status};
use crate::error::{Error, Result};
use crate::lua;
use crate::rest::Script;
use crate::rest::{Command, RestClient};
use crate::time::{sleep, Instant};
use crate::value::Value;

/// A handle on one named limiter. Cheap to clone.
#[derive(Debug, Clone)]
pub struct RedissonLimiter {
    client: RestClient,
    name: String,
    client_id: String,
    now_ms: Option<u64>,
}

impl RedissonLimiter {
    /// A handle on the limiter `name` (Redisson's `getRateLimiter(name)`). The name is the hash tag, so it may not
    /// contain `{` or `}`.
    pub fn new(client: RestClient, name: &str) -> Result<RedissonLimiter> {
        crate::limit::slot::check_tag_part("limiter name", name)?;
        Ok(RedissonLimiter { client, name: name.to_owned(), client_id: "edgelimit".to_owned(), now_ms: None })
    }

    /// The id whose budget this handle uses in [`Mode::PerClient`] (Redisson uses its client's id).
    pub fn with_client_id(mut self, client_id: &str) -> RedissonLimiter {
        self.client_id = client_id.to_owned();
        self
    }

    /// Decide at this explicit time (unix ms) instead of the Redis server's.
    pub fn at(mut self, now_ms: u64) -> RedissonLimiter {
        self.now_ms = Some(now_ms);
        self
    }

    /// The limiter's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn keys(&self) -> [String; 5] {
        let (name, client) = (&self.name, &self.client_id);
        [
            name.clone(),
            format!("{{{name}}}:value"),
            format!("{{{name}}}:value:{client}"),
            format!("{{{name}}}:permits"),
            format!("{{{name}}}:permits:{client}"),
        ]
    }

    async fn run(&self, script: &Script, args: &[String]) -> Result<Value> {
        let time = self.now_ms.map(|ms| ms.to_string()).unwrap_or_default();
        let args: Vec<&str> = std::iter::once(time.as_str()).chain(args.iter().map(String::as_str)).collect();
        script.run(&self.client, &self.keys(), &args).await
    }

    /// Runs a script that replies 0 or 1 (`what` names it in the error).
    async fn flag(&self, script: &Script, args: &[String], what: &str) -> Result<bool> {
        match self.run(script, args).await?.into_int()? {
            0 => Ok(false),
            1 => Ok(true),
            other => Err(Error::malformed(format!("0 or 1 from {what}"), other)),
        }
    }

    async fn write_rate(&self, rate: Rate, mode: Mode, how: &str) -> Result<bool> {
        let args = [
            rate.permits().to_string(),
            rate.interval_ms().to_string(),
            mode.redisson_type().to_owned(),
            rate.keep_alive_ms().to_string(),
            how.to_owned(),
        ];
        self.flag(&lua::REDISSON_SET_RATE, &args, "set-rate").await
    }

    /// Sets the rate only if none is set: the first caller wins, later calls return `false` and change nothing.
    pub async fn try_set_rate(&self, rate: Rate, mode: Mode) -> Result<bool> {
        self.write_rate(rate, mode, "try").await
    }

    /// Sets the rate and clears the state: the window starts full (Redisson's `setRate`).
    pub async fn set_rate(&self, rate: Rate, mode: Mode) -> Result<()> {
        self.write_rate(rate, mode, "set").await.map(drop)
    }

    /// Changes the rate and keeps the state (Redisson 4's `updateRate(args.keepState(true))`): raising it frees the
    /// difference at once, lowering it denies until enough grants expire. Returns `false`, writing nothing, when no
    /// rate is set. A change of mode starts a full window (its state lives under other keys).
    pub async fn update_rate(&self, rate: Rate, mode: Mode) -> Result<bool> {
        self.write_rate(rate, mode, "update").await
    }

    /// Sets the lifetime `field` (`keep_alive`, `expire`) to `duration`, or clears it (`what` names it in errors).
    async fn write_lifetime(&self, field: &str, duration: Option<Duration>, what: &str) -> Result<bool> {
        let ms = duration.map_or(Ok(0), |duration| crate::duration::whole_ms(duration, what))?;
        self.flag(&lua::REDISSON_LIFETIME, &[field.to_owned(), ms.to_string()], "lifetime").await
    }

    /// Changes the keep-alive: with `Some`, config and state vanish after that long unused (at least the interval),
    /// renewed by every use from either side; with `None`, they stay. Returns `false`, writing nothing, when no rate is
    /// set.
    pub async fn set_keep_alive(&self, keep_alive: Option<Duration>) -> Result<bool> {
        self.write_lifetime("keep_alive", keep_alive, "keep-alive").await
    }

    /// Redisson's `expire`/`clearExpire`: with `Some`, every key of the limiter vanishes after that long unless a
    /// keep-alive renews it; with `None`, the expiry is cleared. Returns `false`, writing nothing, when no rate is set.
    pub async fn expire(&self, ttl: Option<Duration>) -> Result<bool> {
        self.write_lifetime("expire", ttl, "expiry").await
    }

    /// Takes `permits` now if available. A denial has the exact `retry_after` and consumes nothing.
    pub async fn try_acquire(&self, permits: u32) -> Result<Decision> {
        let args = [permits.to_string(), crate::unique_id::next()];
        let expected = [Status::Granted, Status::Denied];
        let verdict = self.verdict(&lua::REDISSON_ACQUIRE, &args, permits, &expected).await?;
        Ok(verdict.decision(verdict.status == Status::Granted))
    }

    /// Takes `permits`, sleeping each denial's exact `retry_after`, up to `timeout`; returns a denial at once when its
    /// wait is past the timeout. Returns the last decision.
    pub async fn acquire(&self, permits: u32, timeout: Duration) -> Result<Decision> {
        if self.now_ms.is_some() {
            return Err(Error::InvalidArgument(
                "acquire waits in real time, so it cannot run at an explicit time; use try_acquire".into(),
            ));
        }
        let deadline = Instant::now() + timeout;
        loop {
            let decision = self.try_acquire(permits).await?;
            let wait = Duration::from_millis(decision.retry_after);
            let left = deadline.saturating_duration_since(Instant::now());
            if decision.success || wait > left {
                return Ok(decision);
            }
            sleep(wait).await;
        }
    }

    /// Permits available now (0 or more), taking none.
    pub async fn available_permits(&self) -> Result<u64> {
        let available = self.verdict(&lua::REDISSON_AVAILABLE, &[], 0, &[Status::Allowed]);
        Ok(available.await?.remaining)
    }

    /// Gives back up to `permits` (newest grants first) and returns how many were given back. Availability never
    /// exceeds the rate. Releasing 0 is a no-op, as Redisson's.
    pub async fn release(&self, permits: u32) -> Result<u64> {
        if permits == 0 {
            return Ok(0);
        }
        let args = [permits.to_string()];
        let verdict = self.verdict(&lua::REDISSON_RELEASE, &args, permits, &[Status::Refunded]).await?;
        // A release's last field is what was given back.
        verdict.last.into_u64()
    }

    /// The stored configuration, or `None` when no rate is set.
    pub async fn config(&self) -> Result<Option<RateConfig>> {
        let command = Command::new("HMGET").arg(&self.name).args(["rate", "interval", "type", "keepAliveTime"]);
        let reply = self.client.command(&command).await?.into_tuple::<4>()?;
        let [rate, interval, mode, keep_alive] = reply.map(Value::into_option);
        let (Some(rate), Some(interval), Some(mode)) = (rate, interval, mode) else {
            return Ok(None);
        };
        let permits: u32 = rate.into_number("rate")?;
        let mut rate = Rate::new(permits, Duration::from_millis(interval.into_number("interval")?))
            .map_err(|e| Error::malformed("a valid stored rate", e))?;
        let keep_alive_ms: u64 = keep_alive.map_or(Ok(0), |value| value.into_number("keepAliveTime"))?;
        if keep_alive_ms > 0 {
            // Redisson accepts keep-alives shorter than the interval; report what is stored rather than fail.
            rate.keep_alive_ms = keep_alive_ms;
        }
        let mode = match mode.into_string()?.as_str() {
            "0" => Mode::Overall,
            "1" => Mode::PerClient,
            other => return Err(Error::malformed("type 0 or 1", other)),
        };
        Ok(Some(RateConfig { rate, mode }))
    }

    /// Deletes the limiter: its configuration and the state of this handle's modes. Returns whether it existed.
    pub async fn delete(&self) -> Result<bool> {
        let command = Command::new("DEL").args(self.keys());
        Ok(self.client.command(&command).await?.into_int()? > 0)
    }

    /// Runs a decision-shaped script and decodes its reply; a status outside `expected` becomes its typed error.
    async fn verdict(
        &self,
        script: &Script,
        args: &[String],
        permits: u32,
        expected: &[Status],
    ) -> Result<ScriptReply> {
        let verdict = ScriptReply::decode(self.run(script, args).await?)?;
        match verdict.status {
            status if expected.contains(&status) => Ok(verdict),
            Status::NotConfigured => Err(Error::NotInitialized { name: self.name.clone() }),
            Status::ExceedsLimit => Err(Error::PermitsExceedRate { permits, rate: verdict.limit }),
            other => Err(Error::malformed(format!("one of {expected:?} from this script"), format!("{other:?}"))),
        }
    }
}
