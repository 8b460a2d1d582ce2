//! What a caller sees of a run of requests: how many per second, and how long each took. One shape for every
//! driver that times requests (the Rust client through the bridge, `redis-benchmark`, and the npm package from
//! Node), so that the reports put them side by side.

use serde::{Deserialize, Serialize};

/// Requests per second and latency of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunStats {
    /// Requests completed.
    pub requests: u64,
    /// Requests per second.
    pub per_second: f64,
    /// Median latency, ms.
    pub p50_ms: f64,
    /// 99th percentile latency, ms.
    pub p99_ms: f64,
}

/// The `q` quantile of sorted samples (the sample at rank ⌊q·n⌋, as `bench/npm.mjs` takes it); 0 for none.
pub(crate) fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((q * sorted.len() as f64) as usize).min(sorted.len() - 1);
    sorted[rank]
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
