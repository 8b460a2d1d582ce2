//! A stored quota in the per-identifier layout: the client's copy of it, sent with each request as a quota in code.
//!
//! There the config hash and the state live in different slots, so no script can read both. The client keeps a copy
//! and re-reads the config in the same round trip as every decision ([`Batch`](super::batch) pipelines the `HMGET`);
//! a difference drops the copy, so a change reaches each client one decision late. The config itself is compared,
//! not a version, so a change by any client is seen. A copy also expires after [`STALE_AFTER`], for the calls that
//! do not pipeline the check.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{Limiter, Quota};
use crate::error::{Error, Result};
use crate::rest::{Command, RestClient};
use crate::time::Instant;
use crate::value::Value;

/// How long a copy serves a call that does not check it in the same round trip.
pub const STALE_AFTER: Duration = Duration::from_secs(5);

/// The config hash's fields, in the order `HMGET` asks for them.
const FIELDS: [&str; 4] = ["algorithm", "limit", "interval", "rate"];

/// The copy a limiter (and its clones) share: the quota, and when it was read.
#[derive(Debug, Clone, Default)]
pub(crate) struct StoredCopy(Arc<Mutex<Option<(Quota, Instant)>>>);

impl StoredCopy {
    /// The copy, however old.
    pub fn get(&self) -> Option<Quota> {
        self.lock().map(|(quota, _)| quota)
    }

    fn fresh(&self) -> Option<Quota> {
        self.lock().filter(|(_, read)| read.elapsed() < STALE_AFTER).map(|(quota, _)| quota)
    }

    fn lock(&self) -> Option<(Quota, Instant)> {
        // A poisoned lock only means another thread panicked while holding a Copy value: the value is whole.
        *self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn set(&self, copy: Option<Quota>) {
        *self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = copy.map(|quota| (quota, Instant::now()));
    }

    /// Drops the copy when the config read alongside a decision differs from it (or is gone). A reply that is not a
    /// config is left alone: the script's own reply says what failed.
    pub fn check(&self, used: Quota, read: Result<Value>) {
        if let Ok(Ok(read)) = read.map(|value| parse(value, "")) {
            if read != Some(used) {
                self.set(None);
            }
        }
    }
}

/// Whether `limiter` decides with a copy of its stored quota.
pub(super) fn uses_copy(limiter: &Limiter) -> bool {
    limiter.quota.is_none() && limiter.layout != super::KeyLayout::PerLimiter
}

/// The command that reads `limiter`'s config.
pub(super) fn read_command(limiter: &Limiter) -> Command {
    Command::new("HMGET").arg(limiter.config_key()).args(FIELDS)
}

/// Reads, in one round trip, the copies that are missing or stale. No stored config is [`Error::NotInitialized`].
pub(super) async fn refresh<'a>(limiters: impl IntoIterator<Item = &'a Limiter>) -> Result<()> {
    let stale: Vec<&Limiter> =
        (limiters.into_iter()).filter(|limiter| uses_copy(limiter) && limiter.stored_copy.fresh().is_none()).collect();
    let Some(first) = stale.first() else {
        return Ok(());
    };
    crate::rare_paths::out_of_line(read_copies(&first.client, &stale)).await
}

/// Reads the stored configs of `stale` through `client` in one round trip and keeps them as their copies.
async fn read_copies(client: &RestClient, stale: &[&Limiter]) -> Result<()> {
    let commands: Vec<Command> = stale.iter().map(|limiter| read_command(limiter)).collect();
    for (limiter, reply) in stale.iter().zip(client.pipeline(&commands).await?) {
        let quota =
            parse(reply?, &limiter.name)?.ok_or_else(|| Error::NotInitialized { name: limiter.name.clone() })?;
        limiter.stored_copy.set(Some(quota));
    }
    Ok(())
}

/// The quota an `HMGET` of [`FIELDS`] read; `None` when there is no config. `name` is for the error.
pub(super) fn parse(reply: Value, name: &str) -> Result<Option<Quota>> {
    let [algorithm, limit, interval, rate] = reply.into_tuple::<4>()?;
    let Some(algorithm) = algorithm.into_option() else {
        return Ok(None);
    };
    let algorithm = algorithm
        .into_string()?
        .parse()
        .map_err(|e| Error::malformed(format!("a known stored algorithm for {name:?}"), e))?;
    let interval = Duration::from_millis(interval.into_number("the stored interval")?);
    let (limit, rate) = (limit.into_number("the stored limit")?, rate.into_number("the stored rate")?);
    Quota::new(algorithm, limit, interval, rate).map(Some).map_err(|e| Error::malformed("a valid stored quota", e))
}
