//! Who is measured: one interface over edgelimit's limiters, the peers' scripts and the `INCR` floor, so that every
//! scenario runs them through the same loop. The family keeps one key per identifier under one limiter; the Redisson
//! layout (edgelimit's [`RedissonLimiter`] and Redisson's script) one named limiter per identifier.

use std::time::Duration;

use edgelimit::limit::{Algorithm, Limiter, Quota};
use edgelimit::{Command, Mode, Rate, RedissonLimiter, RestClient, Script};
use serde::{Deserialize, Serialize};

use crate::peers::{RedissonClient, UpstashAlgorithm, UpstashLimiter, UpstashScripts};
use crate::redis_stats::{self, memory_usage, DecisionCost};
use crate::support::Context;

/// Who decided: edgelimit on either clock, a peer, or the floor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ContenderKind {
    /// edgelimit on the Redis server's clock: the default, and what production runs.
    EdgelimitServerClock,
    /// edgelimit at an explicit time passed by the caller (`Limiter::at`): the same script, without `TIME`.
    EdgelimitExplicitTime,
    /// `@upstash/ratelimit`'s script, at the caller's time (the library passes `Date.now()`).
    Upstash,
    /// Redisson's `RRateLimiter` acquire script, at the caller's time (as a Java client passes it).
    Redisson,
    /// A plain `INCR` sent as a command: the cheapest write Redis has.
    IncrCommand,
    /// The same `INCR` inside a one-line script: what any script costs at least.
    IncrScript,
}

impl ContenderKind {
    /// How tables name it.
    pub fn label(self) -> &'static str {
        match self {
            ContenderKind::EdgelimitServerClock => "edgelimit, server clock",
            ContenderKind::EdgelimitExplicitTime => "edgelimit, explicit time",
            ContenderKind::Upstash => "@upstash/ratelimit",
            ContenderKind::Redisson => "Redisson RRateLimiter",
            ContenderKind::IncrCommand => "INCR command",
            ContenderKind::IncrScript => "INCR in a script",
        }
    }
}

/// Whose clock a contender's decisions use: the Redis server's (`TIME` inside the script, edgelimit's default) or
/// the time the caller passes with each decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clock {
    Server,
    Caller,
}

impl From<Clock> for ContenderKind {
    fn from(clock: Clock) -> ContenderKind {
        match clock {
            Clock::Server => ContenderKind::EdgelimitServerClock,
            Clock::Caller => ContenderKind::EdgelimitExplicitTime,
        }
    }
}

/// edgelimit's side of a comparison: a `Limiter` of the family, or the Redisson-layout sliding log
/// (`RedissonLimiter`).
#[derive(Debug, Clone, Copy)]
pub enum Ours {
    Family(Quota),
    RedissonLayout(Rate),
}

impl Ours {
    pub fn contender(&self, client: &RestClient, name: &str, clock: Clock) -> Result<Contender, String> {
        Ok(match self {
            Ours::Family(quota) => Contender::family(client, name, *quota, clock)?,
            Ours::RedissonLayout(rate) => Contender::redisson_layout(client, name, *rate, clock),
        })
    }

    /// Whether it keeps a permit log whose entries free exactly one interval after their grant (the sliding logs,
    /// and concurrency while leases are not released): it then admits at most the limit in any interval-long span,
    /// and a grant's `reset` is its own time plus the interval.
    pub fn keeps_permit_log(&self) -> bool {
        match self {
            Ours::Family(quota) => matches!(quota.algorithm(), Algorithm::SlidingLog | Algorithm::Concurrency),
            Ours::RedissonLayout(_) => true,
        }
    }
}

/// One comparison the scenarios run: the algorithm as tables name it, edgelimit's side, the peer that has the same
/// algorithm if one has, and the limit per interval.
pub struct Pairing {
    pub name: &'static str,
    pub ours: Ours,
    pub peer: Option<Peer>,
    pub limit: u32,
    pub interval_ms: u64,
}

/// Every comparison of the bench, at `limit` per `interval`; `concurrency` names the concurrency row, whose leases
/// each scenario uses its own way.
pub fn pairings(limit: u32, interval: Duration, concurrency: &'static str) -> Result<Vec<Pairing>, String> {
    use UpstashAlgorithm::{FixedWindow, SlidingWindow, TokenBucket};
    let upstash = |algorithm| Some(Peer::Upstash(algorithm));
    let family = [
        ("token bucket", Quota::token_bucket(limit, limit, interval), upstash(TokenBucket)),
        ("fixed window", Quota::fixed_window(limit, interval), upstash(FixedWindow)),
        ("sliding window", Quota::sliding_window(limit, interval), upstash(SlidingWindow)),
        ("GCRA", Quota::gcra(limit, limit, interval), None),
        (concurrency, Quota::concurrency(limit, interval), None),
        ("sliding log", Quota::sliding_log(limit, interval), Some(Peer::Redisson)),
    ];
    let mut ours = Vec::new();
    for (name, quota, peer) in family {
        ours.push((name, Ours::Family(quota.context("invalid benchmark quota")?), peer));
    }
    let rate = Rate::new(limit, interval).context("invalid benchmark rate")?;
    ours.push(("sliding log, Redisson layout", Ours::RedissonLayout(rate), Some(Peer::Redisson)));
    let interval_ms = interval.as_millis() as u64;
    let pairings = ours.into_iter().map(|(name, ours, peer)| Pairing { name, ours, peer, limit, interval_ms });
    Ok(pairings.collect())
}

/// The peer's side of a comparison: `@upstash/ratelimit` with an algorithm, or Redisson's `RRateLimiter` (a sliding
/// log).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    Upstash(UpstashAlgorithm),
    Redisson,
}

impl Peer {
    /// A contender of `limit` per `window`, its keys or limiter names under `prefix`.
    pub fn contender(
        self,
        client: &RestClient,
        upstash: &UpstashScripts,
        limit: u32,
        window: Duration,
        prefix: &str,
    ) -> Result<Contender, String> {
        Ok(match self {
            Peer::Upstash(algorithm) => {
                let limiter = upstash.limiter(algorithm, limit, window.as_millis() as u64, prefix);
                Contender::new(client, ContenderKind::Upstash, Decider::Upstash(limiter))
            }
            Peer::Redisson => {
                let rate = Rate::new(limit, window).context("invalid benchmark rate")?;
                Contender::redisson(client, prefix, rate)
            }
        })
    }
}

/// What one decision answered: granted, and for edgelimit's decisions their `reset` (unix ms; the peers' replies
/// are not read that far).
#[derive(Debug, Clone, Copy)]
pub struct Verdict {
    pub granted: bool,
    pub reset: Option<u64>,
}

/// The decision procedure of one contender. The Redisson layouts keep a limiter `<name prefix>-<id>` per identifier,
/// the `INCR`s a key `<prefix>:<id>`.
enum Decider {
    Family(Limiter),
    RedissonLayout(String, Rate),
    Upstash(UpstashLimiter),
    Redisson(String, Rate, RedissonClient),
    IncrCommand(String),
    IncrScript(String, Script),
}

/// One contender, deciding through the benchmark's bridge.
pub struct Contender {
    client: RestClient,
    kind: ContenderKind,
    decider: Decider,
}

impl Contender {
    /// edgelimit's algorithm family: a limiter `name` with `quota`.
    pub fn family(client: &RestClient, name: &str, quota: Quota, clock: Clock) -> Result<Contender, String> {
        let limiter = Limiter::new(client.clone(), name, quota).context(format_args!("invalid limiter {name}"))?;
        Ok(Contender::new(client, clock.into(), Decider::Family(limiter)))
    }

    /// edgelimit's Redisson-layout sliding log ([`RedissonLimiter`]).
    pub fn redisson_layout(client: &RestClient, name_prefix: &str, rate: Rate, clock: Clock) -> Contender {
        Contender::new(client, clock.into(), Decider::RedissonLayout(name_prefix.to_owned(), rate))
    }

    /// Redisson's acquire script (at the caller's time).
    pub fn redisson(client: &RestClient, name_prefix: &str, rate: Rate) -> Contender {
        let decider = Decider::Redisson(name_prefix.to_owned(), rate, RedissonClient::default());
        Contender::new(client, ContenderKind::Redisson, decider)
    }

    /// `INCR` as a command, or (`in_script`) inside a one-line script.
    pub fn incr(client: &RestClient, prefix: &str, in_script: bool) -> Contender {
        let prefix = prefix.to_owned();
        match in_script {
            false => Contender::new(client, ContenderKind::IncrCommand, Decider::IncrCommand(prefix)),
            true => {
                let script = Script::new("return redis.call('INCR', KEYS[1])");
                Contender::new(client, ContenderKind::IncrScript, Decider::IncrScript(prefix, script))
            }
        }
    }

    fn new(client: &RestClient, kind: ContenderKind, decider: Decider) -> Contender {
        let client = client.clone();
        Contender { client, kind, decider }
    }

    pub fn kind(&self) -> ContenderKind {
        self.kind
    }

    /// The command Redis counts once per decision (`INFO commandstats` name).
    fn counted_command(&self) -> &'static str {
        match self.decider {
            Decider::IncrCommand(_) => "incr",
            _ => "evalsha",
        }
    }

    /// Sets up identifier `id` where a contender needs it: the Redisson layout's rate.
    pub async fn prepare(&self, id: &str) -> Result<(), String> {
        let (Decider::RedissonLayout(name_prefix, rate) | Decider::Redisson(name_prefix, rate, _)) = &self.decider
        else {
            return Ok(());
        };
        let name = format!("{name_prefix}-{id}");
        RedissonLimiter::new(self.client.clone(), &name)
            .context(format_args!("invalid limiter name {name}"))?
            .set_rate(*rate, Mode::Overall)
            .await
            .context(format_args!("could not set the rate of {name}"))
    }

    /// Decides one request of one permit for `id` at `now` (unix ms; ignored on the server's clock).
    pub async fn decide(&self, id: &str, now: u64) -> Result<Verdict, String> {
        let at_clock = |granted| Verdict { granted, reset: None };
        let explicit_time = self.kind == ContenderKind::EdgelimitExplicitTime;
        match &self.decider {
            Decider::Family(limiter) => {
                let limiter = if explicit_time { limiter.clone().at(now) } else { limiter.clone() };
                let decision = limiter.limit(id, 1).await.context("edgelimit's decision failed")?;
                Ok(Verdict { granted: decision.success, reset: Some(decision.reset) })
            }
            Decider::RedissonLayout(name_prefix, _) => {
                let limiter = RedissonLimiter::new(self.client.clone(), &format!("{name_prefix}-{id}"))
                    .context("invalid limiter name")?;
                let limiter = if explicit_time { limiter.at(now) } else { limiter };
                let decision = limiter.try_acquire(1).await.context("edgelimit's acquire failed")?;
                Ok(Verdict { granted: decision.success, reset: Some(decision.reset) })
            }
            Decider::Upstash(limiter) => limiter.limit(&self.client, id, now).await.map(at_clock),
            Decider::Redisson(name_prefix, _, java) => {
                java.try_acquire(&self.client, &format!("{name_prefix}-{id}"), now).await.map(at_clock)
            }
            Decider::IncrCommand(prefix) => {
                let command = Command::new("INCR").arg(format!("{prefix}:{id}"));
                self.client.command(&command).await.context("INCR failed")?;
                Ok(at_clock(true))
            }
            Decider::IncrScript(prefix, script) => {
                let keys = [format!("{prefix}:{id}")];
                script.run::<_, &str>(&self.client, &keys, &[]).await.context("the INCR script failed")?;
                Ok(at_clock(true))
            }
        }
    }

    /// What deciding `id` at `times` costs Redis, requests back to back between a reset and a read of its counters
    /// (a paused explicit-time workload would lose the peers' state, which expires in real time). The script cache
    /// must be warm.
    pub async fn measure(&self, id: &str, times: &[u64]) -> Result<DecisionCost, String> {
        redis_stats::measure(&self.client, self.counted_command(), times, async |now| {
            Ok(self.decide(id, now).await?.granted)
        })
        .await
    }

    /// Bytes of the keys identifier `id` occupies at `now` (`MEMORY USAGE`).
    pub async fn memory(&self, id: &str, now: u64) -> Result<u64, String> {
        memory_usage(&self.client, &self.keys(id, now)).await
    }

    fn keys(&self, id: &str, now: u64) -> Vec<String> {
        match &self.decider {
            Decider::Family(limiter) => vec![limiter.state_key(id)],
            Decider::RedissonLayout(name_prefix, _) | Decider::Redisson(name_prefix, ..) => {
                RedissonClient::keys(&format!("{name_prefix}-{id}"))
            }
            Decider::Upstash(limiter) => limiter.keys(id, now),
            Decider::IncrCommand(prefix) | Decider::IncrScript(prefix, _) => vec![format!("{prefix}:{id}")],
        }
    }
}
