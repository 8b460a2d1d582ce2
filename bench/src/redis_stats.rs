//! Redis's own account of a script's work: `INFO commandstats` (µs and calls per command, including those a script
//! runs) and `MEMORY USAGE`. Free of HTTP and scheduling noise, and what a shared Redis runs out of first.

use std::collections::BTreeMap;

use edgelimit::{Command, RestClient};
use redis::{InfoDict, Value};
use serde::{Deserialize, Serialize};

use crate::support::Context;

/// What a run of decisions cost Redis, read from its counters.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DecisionCost {
    /// µs of Redis CPU per decision (per `EVALSHA`, or per `INCR` for the plain command).
    pub micros_per_decision: f64,
    /// Commands Redis ran per decision besides the decision's own `EVALSHA` (or `INCR`): what its script called,
    /// and an `EVAL` fallback if the script cache had missed (warm-up makes that 0).
    pub commands_per_decision: f64,
    /// Decisions measured.
    pub requests: u64,
    /// Of which granted.
    pub granted: u64,
}

impl DecisionCost {
    /// Whether this round of a workload cost less than `other` (see [`crate::support::ROUNDS`]): the one less
    /// disturbed.
    pub(crate) fn cheaper(&self, other: &DecisionCost) -> bool {
        self.micros_per_decision < other.micros_per_decision
    }
}

/// One `cmdstat_<name>` line.
#[derive(Debug, Clone, Copy, Default)]
struct CallStats {
    calls: f64,
    usec: f64,
    failed_calls: f64,
}

/// Redis's per-command counters since the last [`reset`].
#[derive(Debug, Default)]
pub(crate) struct CommandStats {
    /// By command name as Redis reports it (`evalsha`, `incr`, `config|get`, …).
    by_command: BTreeMap<String, CallStats>,
}

/// Zeroes Redis's command statistics.
pub(crate) async fn reset(client: &RestClient) -> Result<(), String> {
    client.command(&Command::new("CONFIG").arg("RESETSTAT")).await.map(drop).context("CONFIG RESETSTAT failed")
}

/// Reads `INFO commandstats`.
pub(crate) async fn read(client: &RestClient) -> Result<CommandStats, String> {
    let info = client
        .command(&Command::new("INFO").arg("commandstats"))
        .await
        .and_then(|reply| reply.into_string())
        .context("INFO commandstats failed")?;
    Ok(CommandStats::new(&InfoDict::new(&info)))
}

impl CommandStats {
    /// From `INFO commandstats` lines like `cmdstat_evalsha:calls=4000,usec=181234,…,failed_calls=0`.
    pub(crate) fn new(info: &InfoDict) -> CommandStats {
        let stats = |fields: &str| {
            let field = |key: &str| {
                let value = |pair: &str| pair.strip_prefix(key)?.strip_prefix('=')?.parse().ok();
                fields.split(',').find_map(value).unwrap_or(0.0)
            };
            CallStats { calls: field("calls"), usec: field("usec"), failed_calls: field("failed_calls") }
        };
        let by_command = info.iter().filter_map(|(key, value)| match value {
            Value::SimpleString(fields) => Some((key.strip_prefix("cmdstat_")?.to_owned(), stats(fields))),
            _ => None,
        });
        CommandStats { by_command: by_command.collect() }
    }

    /// Calls of `command` counted.
    pub fn calls(&self, command: &str) -> u64 {
        self.by_command.get(command).map_or(0, |stats| stats.calls as u64)
    }

    /// µs Redis spent in `command`, all calls together.
    pub fn usec(&self, command: &str) -> f64 {
        self.by_command.get(command).map_or(0.0, |stats| stats.usec)
    }

    /// The cost of `requests` decisions since the last [`reset`] that each sent one `command`: its µs per call,
    /// and the other commands per call (what ran inside it). The harness's own `CONFIG` and `INFO` are left out. A
    /// failed call means the measurement measured errors: that is an error.
    pub fn cost_of(&self, command: &str, requests: u64, granted: u64) -> Result<DecisionCost, String> {
        let own = self.by_command.get(command).copied().unwrap_or_default();
        if own.calls == 0.0 {
            return Err(format!("Redis counted no {command} calls: the decisions did not reach it"));
        }
        let failed: f64 = self.by_command.values().map(|stats| stats.failed_calls).sum();
        if failed > 0.0 {
            return Err(format!(
                "Redis counted {failed} failed calls while measuring {command}: {:?}",
                self.by_command
            ));
        }
        let harness = |name: &str| {
            let base = name.split('|').next().unwrap_or(name);
            base == "config" || base == "info"
        };
        let other_calls = self
            .by_command
            .iter()
            .filter(|(name, _)| name.as_str() != command && !harness(name))
            // A fold from +0.0: an empty f64 sum is -0.0, which would print as "-0.00".
            .fold(0.0, |sum, (_, stats)| sum + stats.calls);
        Ok(DecisionCost {
            micros_per_decision: own.usec / own.calls,
            commands_per_decision: other_calls / own.calls,
            requests,
            granted,
        })
    }
}

/// What `decide(request)` for each of `requests` costs Redis, counters reset before and read after; `decide`
/// answers whether it granted, `command` is what Redis counts once per decision.
pub(crate) async fn measure<R: Copy>(
    client: &RestClient,
    command: &str,
    requests: &[R],
    mut decide: impl AsyncFnMut(R) -> Result<bool, String>,
) -> Result<DecisionCost, String> {
    reset(client).await?;
    let mut granted = 0;
    for &request in requests {
        granted += u64::from(decide(request).await?);
    }
    read(client).await?.cost_of(command, requests.len() as u64, granted)
}

/// Bytes Redis holds for these keys (`MEMORY USAGE … SAMPLES 0`: every element counted); missing keys count 0.
pub(crate) async fn memory_usage(client: &RestClient, keys: &[String]) -> Result<u64, String> {
    let mut total = 0;
    for key in keys {
        let command = Command::new("MEMORY").args(["USAGE", key, "SAMPLES", "0"]);
        let reply = client.command(&command).await.context(format_args!("MEMORY USAGE {key} failed"))?;
        if let Some(bytes) = reply.into_option() {
            total += bytes.into_u64().context(format_args!("MEMORY USAGE {key} answered no byte count"))?;
        }
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn costs_come_from_the_measured_command_and_leave_the_harness_out() {
        let info = "# Commandstats\r\n\
            cmdstat_evalsha:calls=4,usec=100,usec_per_call=25.00,rejected_calls=0,failed_calls=0\r\n\
            cmdstat_zadd:calls=2,usec=4,usec_per_call=2.00,rejected_calls=0,failed_calls=0\r\n\
            cmdstat_time:calls=4,usec=1,usec_per_call=0.25,rejected_calls=0,failed_calls=0\r\n\
            cmdstat_config|resetstat:calls=1,usec=9,usec_per_call=9.00,rejected_calls=0,failed_calls=0\r\n";
        let stats = CommandStats::new(&InfoDict::new(info));
        let cost = stats.cost_of("evalsha", 4, 2).unwrap();
        assert_eq!(cost.micros_per_decision, 25.0);
        assert_eq!(cost.commands_per_decision, 1.5);
        assert_eq!((cost.requests, cost.granted), (4, 2));
        assert_eq!(stats.calls("zadd"), 2);
        assert!(stats.cost_of("incr", 4, 4).unwrap_err().contains("no incr calls"));
    }

    #[test]
    fn failed_calls_are_an_error() {
        let info = "cmdstat_evalsha:calls=4,usec=100,usec_per_call=25.00,rejected_calls=0,failed_calls=1\r\n";
        let error = CommandStats::new(&InfoDict::new(info)).cost_of("evalsha", 4, 4).unwrap_err();
        assert!(error.contains("failed calls"), "{error}");
    }
}
