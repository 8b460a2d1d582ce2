//! What a caller sees of a run of requests: requests per second and latency, one shape for every driver.

use std::future::Future;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::task::JoinSet;

use crate::support::Context;

/// Requests per second and latency of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunStats {
    pub requests: u64,
    pub per_second: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

/// Whether `run` was faster than `other`: other load only ever slows a run down, so the fastest is the least
/// disturbed.
pub(crate) fn faster(run: &RunStats, other: &RunStats) -> bool {
    run.per_second > other.per_second
}

/// The `q` quantile of sorted samples (the sample at rank ⌊q·n⌋, as `bench/npm.mjs` takes it); 0 for none.
pub(crate) fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((q * sorted.len() as f64) as usize).min(sorted.len() - 1);
    sorted[rank]
}

/// `concurrency` tasks, each calling `send(lane, n)` for its n-th request in a loop until `run_time` has passed;
/// requests per second and latency over all of them. The first failed request fails the run.
pub(crate) async fn run_clients<F, Fut>(concurrency: u32, run_time: Duration, send: F) -> Result<RunStats, String>
where
    F: Fn(u32, u64) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = Result<(), String>> + Send,
{
    let started = Instant::now();
    let deadline = started + run_time;
    let mut clients = JoinSet::new();
    for lane in 0..concurrency {
        let send = send.clone();
        clients.spawn(async move {
            let mut latencies = Vec::new();
            while Instant::now() < deadline {
                let sent = Instant::now();
                send(lane, latencies.len() as u64).await?;
                latencies.push(sent.elapsed().as_secs_f64() * 1000.0);
            }
            Ok::<_, String>(latencies)
        });
    }
    let mut latencies = Vec::new();
    while let Some(client) = clients.join_next().await {
        latencies.extend(client.context("a client task failed")??);
    }
    let elapsed = started.elapsed().as_secs_f64();
    latencies.sort_by(f64::total_cmp);
    Ok(RunStats {
        requests: latencies.len() as u64,
        per_second: latencies.len() as f64 / elapsed,
        p50_ms: quantile(&latencies, 0.5),
        p99_ms: quantile(&latencies, 0.99),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_ranks_of_sorted_samples() {
        let samples: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(quantile(&samples, 0.5), 51.0);
        assert_eq!(quantile(&samples, 0.99), 100.0);
        assert_eq!(quantile(&[], 0.5), 0.0);
    }
}
