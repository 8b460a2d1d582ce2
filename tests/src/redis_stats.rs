//! What Redis itself reports about the work a script does: `INFO commandstats` and `MEMORY USAGE`. Shared by the
//! benchmarks in `bench/`.

use edgelimit::{Command, RestClient};

/// Zeroes Redis's command statistics.
pub async fn reset(client: &RestClient) {
    client.command(&Command::new("CONFIG").arg("RESETSTAT")).await.unwrap();
}

/// Since the last [`reset`]: µs of Redis CPU per `EVALSHA`, and the other commands run per `EVALSHA` (what the
/// scripts ran inside, plus any `EVAL` fallback).
pub async fn script_cost(client: &RestClient) -> (f64, f64) {
    let info = client
        .command(&Command::new("INFO").arg("commandstats"))
        .await
        .unwrap()
        .into_string()
        .unwrap();
    let (mut evalsha_calls, mut evalsha_usec, mut other_calls) = (0.0, 0.0, 0.0);
    for line in info.lines().filter(|line| line.starts_with("cmdstat_")) {
        let (name, stats) = line.split_once(':').unwrap();
        let field = |key: &str| -> f64 {
            stats
                .split(',')
                .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('=')?.parse().ok())
                .unwrap_or(0.0)
        };
        match name {
            "cmdstat_evalsha" => (evalsha_calls, evalsha_usec) = (field("calls"), field("usec")),
            "cmdstat_config" | "cmdstat_info" => {}
            _ => other_calls += field("calls"),
        }
    }
    (evalsha_usec / evalsha_calls, other_calls / evalsha_calls)
}

/// Bytes Redis holds for these keys (`MEMORY USAGE … SAMPLES 0`: every element counted); missing keys count 0.
pub async fn memory_usage(client: &RestClient, keys: &[String]) -> u64 {
    let mut total = 0;
    for key in keys {
        let command = Command::new("MEMORY").args(["USAGE", key, "SAMPLES", "0"]);
        let reply = client.command(&command).await.unwrap();
        total += reply.into_option().map_or(0, |bytes| bytes.into_int().unwrap() as u64);
    }
    total
}
