//! Which limiter a command acts on, and the commands for the algorithm family.
//!
//! `--algorithm` takes the npm package's names (`--algorithm sliding-log --limit 10 --interval 10s` decides as npm's
//! `Ratelimit.slidingLog(10, "10 s")` on the same keys), plus `concurrency`, `stored` and `redisson`.
//! [`AlgorithmArgs::target`] turns the flags into a [`Target`], on which each limiter command is written once.

use std::time::Duration;

use clap::{Args, ValueEnum};
use edgelimit::limit::{Algorithm, KeyLayout, Limiter, Quota, Receipt};
use edgelimit::{RedissonLimiter, RestClient};
use serde_json::{json, Value as Json};

use crate::admin::{self, decision_json, duration, Outcome};

/// The values of `--algorithm`. The family's algorithms carry npm's names (kebab-case; npm's camelCase and the
/// scripts' snake_case spellings are accepted as aliases).
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlgorithmName {
    /// npm's Ratelimit.slidingLog: at most --limit permits in any --interval-long span; each grant frees exactly
    /// one interval later (exact)
    #[value(alias = "slidingLog", alias = "sliding_log")]
    SlidingLog,
    /// npm's Ratelimit.tokenBucket: a bucket of --limit tokens (starts full), refilled by --rate per --interval
    #[value(alias = "tokenBucket", alias = "token_bucket")]
    TokenBucket,
    /// npm's Ratelimit.fixedWindow: at most --limit per aligned --interval (up to 2 × limit across a boundary)
    #[value(alias = "fixedWindow", alias = "fixed_window")]
    FixedWindow,
    /// npm's Ratelimit.slidingWindow: about --limit per sliding --interval, weighting the previous window (O(1))
    #[value(alias = "slidingWindow", alias = "sliding_window")]
    SlidingWindow,
    /// npm's Ratelimit.gcra: --rate per --interval sustained, bursts of up to --limit
    Gcra,
    /// at most --limit permits in flight; a lease expires after --interval unless released (Rust's
    /// Quota::concurrency; npm has no factory for it)
    Concurrency,
    /// the quota `edgelimit configure NAME` stored in Redis, read at every decision (Rust's Limiter::stored)
    Stored,
    /// the limiter in Redisson's RRateLimiter layout that `set-rate` configures, shared with Java services using
    /// Redisson (npm's ratelimit.rateLimiter(name), Rust's RedissonLimiter)
    Redisson,
}

impl AlgorithmName {
    /// The family's algorithm this names; `None` for `stored` and `redisson`.
    pub fn algorithm(self) -> Option<Algorithm> {
        Some(match self {
            AlgorithmName::SlidingLog => Algorithm::SlidingLog,
            AlgorithmName::TokenBucket => Algorithm::TokenBucket,
            AlgorithmName::FixedWindow => Algorithm::FixedWindow,
            AlgorithmName::SlidingWindow => Algorithm::SlidingWindow,
            AlgorithmName::Gcra => Algorithm::Gcra,
            AlgorithmName::Concurrency => Algorithm::Concurrency,
            AlgorithmName::Stored | AlgorithmName::Redisson => return None,
        })
    }
}

/// The error for a limiter command without `--algorithm`.
fn no_algorithm() -> String {
    "name the limiter with --algorithm: sliding-log, token-bucket, fixed-window, sliding-window, gcra (npm's \
     Ratelimit factories), concurrency, stored (the quota saved with `edgelimit configure`), or redisson (the \
     Redisson-layout limiter configured with `edgelimit set-rate`, which a command without --algorithm used to mean)"
        .into()
}

/// The algorithm and its numbers, as flags: what `configure` stores, and what the limiter commands limit with.
#[derive(Args, Debug, Clone, Default)]
pub struct QuotaArgs {
    /// Which limiter, by the npm package's names (sliding-log is Ratelimit.slidingLog); required.
    ///
    /// `--algorithm sliding-log --limit 10 --interval 10s` decides as npm's `Ratelimit.slidingLog(10, "10 s")` with
    /// `name` NAME, on the same keys; npm's camelCase (`slidingLog`) and the scripts' snake_case (`sliding_log`)
    /// spellings are accepted too. Besides npm's algorithms: `concurrency`, `stored` and `redisson`. There is no
    /// default: npm's `Ratelimit` has none either, and a command without `--algorithm` used to mean the Redisson
    /// layout, now `redisson`, so an old command line is refused rather than acting on other keys.
    #[arg(long, value_enum)]
    pub algorithm: Option<AlgorithmName>,
    /// Capacity (token-bucket), burst (gcra), permits per interval (sliding-log, fixed-window, sliding-window), or
    /// permits in flight (concurrency).
    #[arg(long)]
    pub limit: Option<u32>,
    /// Refill interval (token-bucket, gcra), window (sliding-log, fixed-window, sliding-window), or lease timeout
    /// (concurrency), e.g. 1s, 250ms, 1m.
    #[arg(long, value_parser = duration)]
    pub interval: Option<Duration>,
    /// Permits refilled per interval, token-bucket and gcra only [default: the limit].
    #[arg(long)]
    pub rate: Option<u32>,
}

impl QuotaArgs {
    fn has_numbers(&self) -> bool {
        self.limit.is_some() || self.interval.is_some() || self.rate.is_some()
    }

    /// The quota these flags describe: `--algorithm` names one of the family's algorithms, with `--limit` and
    /// `--interval` (and `--rate` only where the algorithm has one).
    pub fn quota(&self) -> Result<Quota, String> {
        let name = self.algorithm.ok_or_else(no_algorithm)?;
        let algorithm = name.algorithm().ok_or_else(|| {
            format!(
                "--algorithm {} has no quota to give: name one of sliding-log, token-bucket, fixed-window, \
                 sliding-window, gcra, concurrency",
                name.to_possible_value().expect("no value is skipped").get_name()
            )
        })?;
        let (Some(limit), Some(interval)) = (self.limit, self.interval) else {
            let mut message = format!(
                "--algorithm {algorithm} needs --limit and --interval (e.g. --limit 10 --interval 1s), or use \
                 --algorithm stored"
            );
            if algorithm == Algorithm::SlidingLog {
                message += "; the Redisson-layout limiter that `edgelimit set-rate` configures (which sliding-log \
                            used to name) is --algorithm redisson";
            }
            return Err(message);
        };
        let rate = match self.rate {
            Some(rate) if !matches!(algorithm, Algorithm::TokenBucket | Algorithm::Gcra) => {
                return Err(format!(
                    "--rate applies to token-bucket and gcra only (permits refilled per interval); --algorithm \
                     {algorithm} allows --limit per --interval, so drop --rate {rate}"
                ));
            }
            rate => rate.unwrap_or(limit),
        };
        Quota::new(algorithm, limit, interval, rate).map_err(|e| e.to_string())
    }
}

/// `--algorithm` with its numbers and whose budget: the flags of `acquire`, `permits`, `config`, `release`, `delete`.
#[derive(Args, Debug, Clone, Default)]
pub struct AlgorithmArgs {
    /// The algorithm and its numbers.
    #[command(flatten)]
    pub quota: QuotaArgs,
    /// The identifier whose budget is used (an IP, an API key, a user), as npm's `limit(identifier)`; not with
    /// redisson [default: default].
    #[arg(long)]
    pub id: Option<String>,
    /// With redisson: the client id whose budget a per-client limiter (`set-rate --per-client`) uses, as
    /// Redisson's [default: edgelimit].
    #[arg(long)]
    pub client_id: Option<String>,
    /// Where the identifier's state lives, as npm's `layout` and the Worker's EDGELIMIT_LAYOUT: per-identifier for
    /// limiters on a Redis Cluster (docs/cluster.md); not with redisson [default: per-limiter].
    #[arg(long, value_parser = key_layout)]
    pub layout: Option<KeyLayout>,
}

fn key_layout(text: &str) -> Result<KeyLayout, String> {
    text.parse().map_err(|e: edgelimit::Error| e.to_string())
}

impl AlgorithmArgs {
    /// The limiter `name` these flags choose, on the endpoint `client` gives. Flags it has no use for are refused
    /// before any request.
    pub fn target(self, name: &str, client: impl FnOnce() -> Result<RestClient, String>) -> Result<Target, String> {
        let algorithm = self.quota.algorithm.ok_or_else(no_algorithm)?;
        match algorithm {
            AlgorithmName::Redisson => {
                if self.quota.has_numbers() {
                    return Err("--limit, --interval and --rate do not apply to --algorithm redisson: its rate is \
                                stored in Redis by `edgelimit set-rate NAME --rate N --interval 1s`"
                        .into());
                }
                if self.layout.is_some() {
                    return Err("--layout does not apply to --algorithm redisson: it keeps Redisson's keys".into());
                }
                if self.id.is_some() {
                    return Err("--id does not apply to --algorithm redisson: its limiter has one budget, or one \
                                per --client-id when `set-rate --per-client` set it"
                        .into());
                }
                let client_id = self.client_id.as_deref().unwrap_or("edgelimit");
                let limiter = RedissonLimiter::new(client()?, name).map_err(|e| e.to_string())?;
                Ok(Target::Redisson(limiter.with_client_id(client_id)))
            }
            family => {
                if self.client_id.is_some() {
                    return Err(format!(
                        "--client-id applies to --algorithm redisson only; {} limits the identifier given with --id",
                        family.to_possible_value().expect("no value is skipped").get_name()
                    ));
                }
                let quota = match family {
                    AlgorithmName::Stored if self.quota.has_numbers() => {
                        return Err("--algorithm stored reads its numbers from the quota `edgelimit configure NAME` \
                                    stored: drop --limit, --interval and --rate"
                            .into())
                    }
                    AlgorithmName::Stored => None,
                    _ => Some(self.quota.quota()?),
                };
                let limiter = match quota {
                    Some(quota) => Limiter::new(client()?, name, quota),
                    None => Limiter::stored(client()?, name),
                };
                let limiter = match self.layout {
                    Some(layout) => limiter.and_then(|limiter| limiter.with_layout(layout)),
                    None => limiter,
                };
                Ok(Target::Family {
                    limiter: limiter.map_err(|e| e.to_string())?,
                    id: self.id.unwrap_or_else(|| "default".into()),
                })
            }
        }
    }
}

/// The limiter a command acts on: each limiter command is one method here.
pub enum Target {
    /// The Redisson-layout limiter (`--algorithm redisson`), with the client id it uses.
    Redisson(RedissonLimiter),
    /// A limiter of the family (npm's algorithms, concurrency, or a stored quota) and the identifier it limits.
    Family {
        /// The limiter.
        limiter: Limiter,
        /// Whose budget.
        id: String,
    },
}

impl Target {
    /// `edgelimit acquire`: exit 0 granted (a family grant prints its receipt, for `release --receipt`), 1 denied.
    pub async fn acquire(&self, permits: u32, timeout: Option<Duration>) -> Result<Outcome, String> {
        match self {
            Target::Redisson(limiter) => admin::acquire(limiter, permits, timeout).await,
            Target::Family { limiter, id } => acquire(limiter, id, permits, timeout).await,
        }
        .map_err(|e| e.to_string())
    }

    /// `edgelimit permits`: what is available now, taking nothing.
    pub async fn permits(&self) -> Result<Outcome, String> {
        match self {
            Target::Redisson(limiter) => admin::permits(limiter).await,
            Target::Family { limiter, id } => permits(limiter, id).await,
        }
        .map_err(|e| e.to_string())
    }

    /// `edgelimit config`: the configuration stored in Redis (redisson's rate, or the stored quota); exit 1 with
    /// `null` when none.
    pub async fn config(&self) -> Result<Outcome, String> {
        match self {
            Target::Redisson(limiter) => admin::config(limiter).await,
            Target::Family { limiter, .. } => match limiter.quota() {
                Some(quota) => {
                    return Err(format!(
                        "config prints a configuration stored in Redis: --algorithm redisson (set with `edgelimit \
                         set-rate`) or --algorithm stored (saved with `edgelimit configure`); --algorithm {} has its \
                         numbers on the command line",
                        quota.algorithm()
                    ))
                }
                None => stored_config(limiter).await,
            },
        }
        .map_err(|e| e.to_string())
    }

    /// `edgelimit release`: a family grant is given back by its receipt; redisson gives back `permits` (default 1),
    /// newest grants first.
    pub async fn release(&self, permits: Option<u32>, receipt: Option<&str>) -> Result<Outcome, String> {
        match self {
            Target::Redisson(limiter) => {
                if receipt.is_some() {
                    return Err("--receipt applies to the family's algorithms: --algorithm redisson gives back a \
                                number of permits, newest grants first (`edgelimit release NAME --algorithm \
                                redisson 2`)"
                        .into());
                }
                admin::release(limiter, permits.unwrap_or(1)).await
            }
            Target::Family { limiter, id } => {
                if let Some(permits) = permits {
                    return Err(format!(
                        "a count of permits to give back ({permits}) applies to --algorithm redisson only: the \
                         family gives back a grant by its --receipt, which says how many permits it took"
                    ));
                }
                release(limiter, id, receipt).await
            }
        }
        .map_err(|e| e.to_string())
    }

    /// `edgelimit delete`: redisson deletes the limiter (its rate and state); the family forgets the identifier's
    /// state.
    pub async fn delete(&self) -> Result<Outcome, String> {
        match self {
            Target::Redisson(limiter) => admin::delete(limiter).await,
            Target::Family { limiter, id } => reset(limiter, id).await,
        }
        .map_err(|e| e.to_string())
    }
}

fn decided(decision: &edgelimit::Decision) -> Outcome {
    let mut output = decision_json(decision);
    if let Some(receipt) = decision.receipt {
        output["receipt"] = json!(receipt.to_string());
    }
    Outcome { exit_code: if decision.success { 0 } else { 1 }, output }
}

/// `edgelimit acquire` on the family: exit 0 granted (printing its receipt, for `release --receipt`), 1 denied.
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

/// `edgelimit permits` on the family: what is left, taking nothing.
pub async fn permits(limiter: &Limiter, id: &str) -> edgelimit::Result<Outcome> {
    let decision = limiter.peek(id, 1).await?;
    Ok(Outcome { exit_code: 0, output: json!({ "available": decision.remaining, "reset": decision.reset }) })
}

/// `edgelimit release --receipt R` on the family: give back the grant (a concurrency lease: release it). Exit 1 when
/// nothing was given back. Sent once, never again after a timeout.
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

/// `edgelimit delete` on the family: forget the identifier's state.
pub async fn reset(limiter: &Limiter, id: &str) -> edgelimit::Result<Outcome> {
    Ok(Outcome { exit_code: 0, output: json!({ "deleted": limiter.reset(id).await? }) })
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
        Some(quota) => Outcome { exit_code: 0, output: quota_json(&quota) },
        None => Outcome { exit_code: 1, output: Json::Null },
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

#[cfg(test)]
mod tests {
    use super::*;

    fn name(text: &str) -> AlgorithmName {
        AlgorithmName::from_str(text, false).unwrap()
    }

    #[test]
    fn every_algorithm_of_the_core_has_its_value_by_its_own_name_and_npms() {
        for algorithm in Algorithm::ALL {
            let kebab = algorithm.to_string();
            assert_eq!(name(&kebab).algorithm(), Some(algorithm), "{kebab}");
            assert_eq!(name(algorithm.script_name()).algorithm(), Some(algorithm), "{kebab}");
            // npm's factory: slidingLog, tokenBucket, …
            let mut words = kebab.split('-');
            let camel: String =
                words.next().unwrap().to_owned() + &words.map(|w| w[..1].to_uppercase() + &w[1..]).collect::<String>();
            assert_eq!(name(&camel).algorithm(), Some(algorithm), "{camel}");
            assert_eq!(camel.parse::<Algorithm>().unwrap(), algorithm, "the core reads it alike");
        }
        let values: Vec<_> = AlgorithmName::value_variants().iter().filter_map(|v| v.algorithm()).collect();
        assert_eq!(values.len(), Algorithm::ALL.len(), "no value the core does not know");
        assert_eq!((name("stored").algorithm(), name("redisson").algorithm()), (None, None));
    }

    fn args(algorithm: &str) -> AlgorithmArgs {
        AlgorithmArgs {
            quota: QuotaArgs {
                algorithm: Some(name(algorithm)),
                limit: Some(10),
                interval: Some(Duration::from_secs(10)),
                rate: None,
            },
            ..AlgorithmArgs::default()
        }
    }

    fn target(args: AlgorithmArgs) -> Result<Target, String> {
        args.target("api", || RestClient::new("http://127.0.0.1:1", "t").map_err(|e| e.to_string()))
    }

    #[test]
    fn sliding_log_is_the_familys_as_npms_slidinglog_and_redisson_is_its_own_value() {
        let Ok(Target::Family { limiter, id }) = target(args("sliding-log")) else {
            panic!("sliding-log is the family's");
        };
        let npm = Quota::sliding_log(10, Duration::from_secs(10)).unwrap();
        assert_eq!((limiter.quota(), id.as_str()), (Some(npm), "default"));
        let redisson = AlgorithmArgs {
            quota: QuotaArgs { algorithm: Some(name("redisson")), ..QuotaArgs::default() },
            ..AlgorithmArgs::default()
        };
        assert!(matches!(target(redisson), Ok(Target::Redisson(_))));
    }

    #[test]
    fn no_algorithm_or_flags_the_limiter_would_ignore_are_refused_before_the_endpoint_is_read() {
        let refused = |args: AlgorithmArgs| match args.target("api", || panic!("the endpoint is not read")) {
            Err(message) => message,
            Ok(_) => panic!("refused"),
        };
        let message = refused(AlgorithmArgs::default());
        assert!(message.contains("--algorithm") && message.contains("redisson"), "{message}");

        let mut redisson = args("redisson");
        assert!(refused(redisson.clone()).contains("set-rate"));
        redisson.quota = QuotaArgs { algorithm: Some(AlgorithmName::Redisson), ..QuotaArgs::default() };
        let with_id = AlgorithmArgs { id: Some("ip".into()), ..redisson.clone() };
        assert!(refused(with_id).contains("--id does not apply"));

        let with_client = AlgorithmArgs { client_id: Some("c".into()), ..args("gcra") };
        assert!(refused(with_client).contains("--client-id applies to --algorithm redisson only"));
        let numbered_stored = AlgorithmArgs {
            quota: QuotaArgs { algorithm: Some(AlgorithmName::Stored), limit: Some(3), ..QuotaArgs::default() },
            ..AlgorithmArgs::default()
        };
        assert!(refused(numbered_stored).contains("drop --limit"));
        let mut rated = args("fixed-window");
        rated.quota.rate = Some(5);
        assert!(refused(rated).contains("--rate applies to token-bucket and gcra only"));
        let mut unnumbered = args("sliding-log");
        unnumbered.quota.limit = None;
        let message = refused(unnumbered);
        assert!(message.contains("--limit and --interval") && message.contains("--algorithm redisson"), "{message}");
    }
}
