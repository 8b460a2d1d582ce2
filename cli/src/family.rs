//! The operator commands for the algorithm family: the same `acquire`, `permits`, `release` and `delete` as the
//! sliding log, chosen with `--algorithm`, plus `configure` to store a quota in Redis that every Worker using a
//! stored limiter picks up at its next decision. Each prints one JSON line.

use std::time::Duration;

use clap::Args;
use edgelimit::limit::{Algorithm, Limiter, Quota, Receipt};
use edgelimit::RestClient;
use serde_json::{json, Value as Json};

use crate::admin::{decision_json, duration, Outcome};

/// Which limiter a command acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// The Redisson-compatible sliding log (`set-rate` configures it).
    SlidingLog,
    /// The quota stored with `edgelimit configure`, read by the script at every decision.
    Stored,
    /// An algorithm with its numbers on the command line.
    Inline(Algorithm),
}

fn choice(text: &str) -> Result<Choice, String> {
    match text {
        "sliding-log" | "sliding_log" => Ok(Choice::SlidingLog),
        "stored" => Ok(Choice::Stored),
        other => other.parse().map(Choice::Inline).map_err(|e: edgelimit::Error| {
            format!("{e}; or sliding-log (the default), or stored (the quota saved by `edgelimit configure`)")
        }),
    }
}

/// The algorithm and its numbers, as flags.
#[derive(Args, Debug, Clone)]
pub struct AlgorithmArgs {
    /// sliding-log (Redisson-compatible, configured with set-rate), token-bucket, fixed-window, sliding-window,
    /// gcra, concurrency, or stored (the quota saved with `edgelimit configure`).
    #[arg(long, default_value = "sliding-log", value_parser = choice)]
    pub algorithm: Choice,
    /// Capacity (token-bucket), burst (gcra), permits per window, or permits in flight (concurrency).
    #[arg(long)]
    pub limit: Option<u32>,
    /// Refill interval (token-bucket, gcra), window length, or lease timeout (concurrency), e.g. 1s, 250ms, 1m.
    #[arg(long, value_parser = duration)]
    pub interval: Option<Duration>,
    /// Permits refilled per interval (token-bucket, gcra) [default: the limit].
    #[arg(long)]
    pub rate: Option<u32>,
    /// The identifier whose budget is used: an IP, an API key, a user.
    #[arg(long, default_value = "default")]
    pub id: String,
}

impl AlgorithmArgs {
    /// True for the sliding log, which the sliding-log commands handle.
    pub fn is_sliding_log(&self) -> bool {
        self.algorithm == Choice::SlidingLog
    }

    /// The quota these flags describe (`--algorithm` must name an algorithm, with `--limit` and `--per`).
    pub fn quota(&self) -> Result<Quota, String> {
        let Choice::Inline(algorithm) = self.algorithm else {
            return Err(
                "name the algorithm: --algorithm token-bucket|fixed-window|sliding-window|gcra|concurrency".into(),
            );
        };
        let (Some(limit), Some(interval)) = (self.limit, self.interval) else {
            return Err(format!(
                "--algorithm {algorithm} needs --limit and --interval (e.g. --limit 10 --interval 1s), or use --algorithm stored"
            ));
        };
        Quota::new(algorithm, limit, interval, self.rate.unwrap_or(limit)).map_err(|e| e.to_string())
    }

    /// The limiter `name` these flags describe.
    pub fn limiter(&self, client: RestClient, name: &str) -> Result<Limiter, String> {
        let limiter = match self.algorithm {
            Choice::Stored => Limiter::stored(client, name),
            _ => Limiter::new(client, name, self.quota()?),
        };
        limiter.map_err(|e| e.to_string())
    }
}

fn decided(decision: &edgelimit::Decision) -> Outcome {
    let mut output = decision_json(decision);
    if let Some(receipt) = decision.receipt {
        output["receipt"] = json!(receipt.to_string());
    }
    Outcome {
        exit_code: if decision.success { 0 } else { 1 },
        output,
    }
}

/// `edgelimit acquire --algorithm …`: exit 0 granted (printing its receipt, for `release --receipt`), 1 denied.
pub async fn acquire(
    limiter: &Limiter,
    id: &str,
    permits: u32,
    timeout: Option<Duration>,
) -> edgelimit::Result<Outcome> {
    let decision = match timeout {
        Some(timeout) => limiter.block_until_ready(id, permits, timeout).await?,
        None => limiter.limit(id, permits).await?,
    };
    Ok(decided(&decision))
}

/// `edgelimit permits --algorithm …`: what is left, taking nothing.
pub async fn permits(limiter: &Limiter, id: &str) -> edgelimit::Result<Outcome> {
    let decision = limiter.peek(id, 1).await?;
    Ok(Outcome {
        exit_code: 0,
        output: json!({ "available": decision.remaining, "reset": decision.reset }),
    })
}

/// `edgelimit release --algorithm … --receipt R`: give back the grant whose receipt acquire printed (a concurrency
/// lease: release it). Exit 1 when nothing was given back (the grant's permits had freed, refilled or left the
/// counted windows, or the lease was released). Sent once, never again after a timeout.
pub async fn release(limiter: &Limiter, id: &str, receipt: Option<&str>) -> edgelimit::Result<Outcome> {
    let receipt: Receipt = receipt
        .ok_or_else(|| {
            edgelimit::Error::InvalidArgument(
                "release --algorithm … needs --receipt, as acquire printed it: a refund names the grant it gives back"
                    .into(),
            )
        })?
        .parse()?;
    let decision = limiter.refund(id, &receipt).await?;
    Ok(Outcome {
        exit_code: if decision.success { 0 } else { 1 },
        output: json!({ "released": decision.success, "available": decision.remaining }),
    })
}

/// `edgelimit delete --algorithm …`: forget the identifier's state.
pub async fn reset(limiter: &Limiter, id: &str) -> edgelimit::Result<Outcome> {
    Ok(Outcome {
        exit_code: 0,
        output: json!({ "deleted": limiter.reset(id).await? }),
    })
}

/// `edgelimit configure`: store a quota, or remove it.
pub async fn configure(limiter: &Limiter, quota: Option<Quota>) -> edgelimit::Result<Outcome> {
    let output = match quota {
        Some(quota) => {
            limiter.store_quota(quota).await?;
            json!({ "name": limiter.name(), "stored": quota_json(&quota) })
        }
        None => json!({ "name": limiter.name(), "removed": limiter.delete_stored_quota().await? }),
    };
    Ok(Outcome { exit_code: 0, output })
}

/// `edgelimit config --algorithm stored`: the stored quota, exit 1 with `null` when none.
pub async fn stored_config(limiter: &Limiter) -> edgelimit::Result<Outcome> {
    Ok(match limiter.stored_quota().await? {
        Some(quota) => Outcome {
            exit_code: 0,
            output: quota_json(&quota),
        },
        None => Outcome {
            exit_code: 1,
            output: Json::Null,
        },
    })
}

fn quota_json(quota: &Quota) -> Json {
    json!({
        "algorithm": quota.algorithm().to_string(),
        "limit": quota.limit(),
        "intervalMs": quota.interval_ms(),
        "rate": quota.rate(),
    })
}
