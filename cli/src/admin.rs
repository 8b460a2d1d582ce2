//! The operator commands on the Redisson-layout limiter (`--algorithm redisson`: the named sliding log Java's Redisson
//! `RRateLimiter` shares): `set-rate`, and the Redisson side of `acquire`, `permits`, `config`, `release` and
//! `delete` (dispatched by [`crate::family::Target`]). Also what every command shares: the endpoint, durations, the
//! JSON shape of a decision. Each command prints one JSON line, so scripts can read it; errors go to stderr.

use std::time::Duration;

use edgelimit::{Decision, Mode, Rate, RedissonLimiter, RestClient};
use serde_json::{json, Value as Json};

/// How a command ended: the process exit code and the line to print.
pub struct Outcome {
    /// 0 done (or granted), 1 denied (or not found), 2 error.
    pub exit_code: u8,
    /// One JSON line for stdout.
    pub output: Json,
}

impl Outcome {
    fn ok(output: Json) -> Self {
        Outcome { exit_code: 0, output }
    }
}

/// The REST client's timeout for each request when neither `--timeout-ms` nor `EDGELIMIT_TIMEOUT_MS` says.
pub const DEFAULT_TIMEOUT_MS: u64 = 1_000;

/// Where the REST endpoint is. Flags win over `EDGELIMIT_URL`/`EDGELIMIT_TOKEN`, which win over Upstash's
/// `UPSTASH_REDIS_REST_URL`/`UPSTASH_REDIS_REST_TOKEN`. Each request gives up after `timeout_ms`.
pub fn endpoint(url: Option<String>, token: Option<String>, timeout_ms: u64) -> Result<RestClient, String> {
    let from_env = |names: [&str; 2]| names.iter().find_map(|name| std::env::var(name).ok().filter(|v| !v.is_empty()));
    let url = url.or_else(|| from_env(["EDGELIMIT_URL", "UPSTASH_REDIS_REST_URL"])).ok_or(
        "no REST endpoint: pass --url or set EDGELIMIT_URL (or UPSTASH_REDIS_REST_URL); `edgelimit dev` prints one",
    )?;
    let token = token
        .or_else(|| from_env(["EDGELIMIT_TOKEN", "UPSTASH_REDIS_REST_TOKEN"]))
        .ok_or("no REST token: pass --token or set EDGELIMIT_TOKEN (or UPSTASH_REDIS_REST_TOKEN)")?;
    RestClient::new(&url, &token)
        .and_then(|client| client.with_timeout(Duration::from_millis(timeout_ms)))
        .map_err(|e| e.to_string())
}

/// Parses a duration flag (`1s`, `250ms`, `1m`) for clap, with the core's explanation on failure.
pub fn duration(text: &str) -> Result<Duration, String> {
    edgelimit::parse_duration(text).map_err(|e| e.to_string())
}

/// The JSON shape of a decision, with the field names the npm package and the Worker use.
pub fn decision_json(decision: &Decision) -> Json {
    json!({
        "success": decision.success,
        "limit": decision.limit,
        "remaining": decision.remaining,
        "reset": decision.reset,
        "retryAfter": decision.retry_after,
    })
}

/// What `set-rate` should do with an existing rate.
#[derive(Debug, Clone, Copy)]
pub enum SetHow {
    /// Only when none is set (`--if-absent`).
    IfAbsent,
    /// Replace, clearing the state.
    Replace,
    /// Replace, keeping the state (`--keep-state`).
    KeepState,
}

/// `edgelimit set-rate`: configure the Redisson-layout limiter.
pub async fn set_rate(limiter: &RedissonLimiter, rate: Rate, mode: Mode, how: SetHow) -> edgelimit::Result<Outcome> {
    let applied = match how {
        SetHow::IfAbsent => limiter.try_set_rate(rate, mode).await?,
        SetHow::Replace => limiter.set_rate(rate, mode).await.map(|()| true)?,
        // Only when a rate is set, as Redisson's updateRate: exit 1 when none is.
        SetHow::KeepState => {
            let applied = limiter.update_rate(rate, mode).await?;
            if !applied {
                return Ok(Outcome { exit_code: 1, output: json!({ "name": limiter.name(), "applied": false }) });
            }
            applied
        }
    };
    Ok(Outcome::ok(json!({ "name": limiter.name(), "applied": applied })))
}

/// Which lifetime `keep-alive` and `expire` change.
#[derive(Debug, Clone, Copy)]
pub enum Lifetime {
    /// The keep-alive every use renews (`keep-alive`).
    KeepAlive,
    /// An expiry of every key of the limiter (`expire`).
    Expire,
}

/// `edgelimit keep-alive` and `edgelimit expire`: change an existing limiter's lifetime (`None`: no keep-alive, no
/// expiry). Exit 1 when no rate is set.
pub async fn lifetime(limiter: &RedissonLimiter, what: Lifetime, to: Option<Duration>) -> edgelimit::Result<Outcome> {
    let applied = match what {
        Lifetime::KeepAlive => limiter.set_keep_alive(to).await?,
        Lifetime::Expire => limiter.expire(to).await?,
    };
    Ok(Outcome {
        exit_code: if applied { 0 } else { 1 },
        output: json!({ "name": limiter.name(), "applied": applied }),
    })
}

/// `edgelimit acquire --algorithm redisson`: exit 0 when granted, 1 when denied.
pub async fn acquire(limiter: &RedissonLimiter, permits: u32, timeout: Option<Duration>) -> edgelimit::Result<Outcome> {
    let decision = match timeout {
        Some(timeout) => limiter.acquire(permits, timeout).await?,
        None => limiter.try_acquire(permits).await?,
    };
    Ok(Outcome { exit_code: if decision.success { 0 } else { 1 }, output: decision_json(&decision) })
}

/// `edgelimit permits --algorithm redisson`.
pub async fn permits(limiter: &RedissonLimiter) -> edgelimit::Result<Outcome> {
    Ok(Outcome::ok(json!({ "available": limiter.available_permits().await? })))
}

/// `edgelimit config --algorithm redisson`: exit 1 with `null` when no rate is set.
pub async fn config(limiter: &RedissonLimiter) -> edgelimit::Result<Outcome> {
    Ok(match limiter.config().await? {
        Some(config) => Outcome::ok(json!({
            "rate": config.rate.permits(),
            "intervalMs": config.rate.interval().as_millis() as u64,
            "keepAliveMs": config.rate.keep_alive().map(|d| d.as_millis() as u64),
            "mode": match config.mode { Mode::Overall => "overall", Mode::PerClient => "per-client" },
        })),
        None => Outcome { exit_code: 1, output: Json::Null },
    })
}

/// `edgelimit release --algorithm redisson [PERMITS]`: newest grants first.
pub async fn release(limiter: &RedissonLimiter, permits: u32) -> edgelimit::Result<Outcome> {
    Ok(Outcome::ok(json!({ "released": limiter.release(permits).await? })))
}

/// `edgelimit delete --algorithm redisson`: the limiter's rate and state.
pub async fn delete(limiter: &RedissonLimiter) -> edgelimit::Result<Outcome> {
    Ok(Outcome::ok(json!({ "deleted": limiter.delete().await? })))
}
