//! Scenario 7: weighted decisions on the permit log, whose cost must not grow with the weight: grants of 1 to 10^6
//! permits under a limit never reached, and denied requests against full logs; explicit times, cheapest round kept.

use std::time::Duration;

use edgelimit::limit::{Limiter, Quota};
use edgelimit::RestClient;
use indicatif::ProgressBar;
use serde::{Deserialize, Serialize};
use tokio::task::JoinSet;

use crate::redis_stats::{self, DecisionCost};
use crate::stack::BenchStack;
use crate::support::{ratio, splitmix64, take_turns, Context, EXPLICIT_T0};

/// By weight: the most permits a quota takes (the heaviest grant stays far below it), per concurrency's lease time;
/// the permits per grant.
const WIDE_LIMIT: u32 = u32::MAX;
const WIDE_INTERVAL_MS: u64 = 1_000;
const WEIGHTS: [u32; 3] = [1, 1_000, 1_000_000];
/// Full logs: an interval long enough that no grant frees before it is measured; the baseline's grants; the
/// equal-weight log's permits per grant (the mean of the mixed weights, so both hold about as many); mixed weights
/// are drawn from 1 to `MAX_WEIGHT`, seeded.
const FULL_INTERVAL_MS: u64 = 60_000;
const SMALL_LOG: u64 = 10;
const EQUAL_WEIGHT: u32 = 500;
const MAX_WEIGHT: u64 = 1_000;
const WEIGHT_SEED: u64 = 18;
/// Grants in flight while filling a full log.
const FILL_LANES: u64 = 16;
/// Rounds of each measurement; a row keeps its cheapest.
const ROUNDS: usize = 5;
/// The identifier every measured log is kept for.
const ID: &str = "busy";

/// Scenario 7's numbers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Weighted {
    /// The by-weight limit, permits per interval.
    pub limit: u32,
    pub interval_ms: u64,
    /// Grants the by-weight log holds in steady state.
    pub grants_held: u64,
    /// Rounds each row was measured in; its cost is its cheapest round's.
    pub rounds: usize,
    /// One row per algorithm and weight.
    pub by_weight: Vec<WeightRow>,
    /// The seed of the full logs' mixed weights.
    pub weight_seed: u64,
    /// One row per full log, the baseline first.
    pub denied: Vec<DeniedRow>,
}

/// One algorithm at one weight: µs and commands from the cheapest round, requests and granted from all, and µs per
/// decision over the same algorithm's 1-permit row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WeightRow {
    pub algorithm: String,
    pub permits: u32,
    pub cost: DecisionCost,
    pub to_one_permit: Option<f64>,
}

/// Denied decisions against one full log (`grants` grants, `permits` in all: its limit), costed as a [`WeightRow`];
/// µs per decision over the 10-grant log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeniedRow {
    pub log: String,
    pub grants: u64,
    pub permits: u32,
    pub cost: DecisionCost,
    pub to_small_log: Option<f64>,
}

/// The workload's sizes: ms of explicit time between by-weight grants (the log holds `WIDE_INTERVAL_MS / step_ms`),
/// decisions per round of a row, and grants in the large full logs.
struct Sizes {
    step_ms: u64,
    per_round: u64,
    large_log: u64,
}

impl Sizes {
    /// Decisions measured per row, over every round.
    fn requests(&self) -> u64 {
        self.per_round * ROUNDS as u64
    }
}

/// One row's log, filled, and the requests (explicit time, permits) its rounds take in turn.
struct Measurement {
    limiter: Limiter,
    requests: Vec<(u64, u32)>,
}

/// Runs scenario 7.
pub(crate) async fn run(stack: &BenchStack, quick: bool, progress: &ProgressBar) -> Result<Weighted, String> {
    let (step_ms, per_round, large_log) = if quick { (50, 4, 1_000) } else { (1, 400, 100_000) };
    let sizes = Sizes { step_ms, per_round, large_log };
    let logs = full_logs(sizes.large_log);
    let rows = 2 * WEIGHTS.len() + logs.len();
    // Each log's fill, then its rounds.
    progress.set_length((rows * (1 + ROUNDS)) as u64);
    let client = stack.client();
    Ok(Weighted {
        limit: WIDE_LIMIT,
        interval_ms: WIDE_INTERVAL_MS,
        grants_held: WIDE_INTERVAL_MS / sizes.step_ms,
        rounds: ROUNDS,
        by_weight: by_weight(client, &sizes, progress).await?,
        weight_seed: WEIGHT_SEED,
        denied: denied(client, &sizes, logs, progress).await?,
    })
}

/// The by-weight rows: each algorithm at each weight, on a limiter of its own.
async fn by_weight(client: &RestClient, sizes: &Sizes, progress: &ProgressBar) -> Result<Vec<WeightRow>, String> {
    let interval = Duration::from_millis(WIDE_INTERVAL_MS);
    let mut rows = Vec::new();
    for (algorithm, quota) in [
        ("sliding log", Quota::sliding_log(WIDE_LIMIT, interval)),
        ("concurrency (leases of 1 s)", Quota::concurrency(WIDE_LIMIT, interval)),
    ] {
        let quota = quota.context("invalid benchmark quota")?;
        for permits in WEIGHTS {
            rows.push((algorithm, permits, quota));
        }
    }
    let mut measurements = Vec::new();
    for &(algorithm, permits, quota) in &rows {
        progress.set_message(format!("filling: {algorithm}, grants of {permits}"));
        let name = format!("weighted-{:?}-{permits}", quota.algorithm());
        let limiter = Limiter::new(client.clone(), &name, quota).context("invalid benchmark limiter")?;
        // One at a time, in order: a grant that frees before grants already logged moves them up, and the log
        // would not be the steady state's.
        for k in 0..WIDE_INTERVAL_MS / sizes.step_ms {
            if !decide(&limiter, EXPLICIT_T0 + k * sizes.step_ms, permits).await? {
                return Err(format!("{algorithm}: a grant of {permits} was denied while filling the log"));
            }
        }
        // Each request frees the oldest grant (its time + the interval is now) and is granted in its place.
        let requests =
            (0..sizes.requests()).map(|k| (EXPLICIT_T0 + WIDE_INTERVAL_MS + k * sizes.step_ms, permits)).collect();
        measurements.push(Measurement { limiter, requests });
        progress.inc(1);
    }
    let costs = cheapest_rounds(client, &measurements, "by weight", progress).await?;
    let mut one_permit_us = 0.0;
    let mut by_weight = Vec::new();
    for ((algorithm, permits, _), cost) in rows.into_iter().zip(costs) {
        if cost.granted != cost.requests {
            return Err(format!("{algorithm}: grants of {permits} were denied in steady state: {cost:?}"));
        }
        if permits == WEIGHTS[0] {
            one_permit_us = cost.micros_per_decision;
        }
        by_weight.push(WeightRow {
            algorithm: algorithm.to_owned(),
            permits,
            to_one_permit: ratio(cost.micros_per_decision, one_permit_us),
            cost,
        });
    }
    Ok(by_weight)
}

/// The full logs (label, each grant's permits), the baseline first.
fn full_logs(large: u64) -> Vec<(String, Vec<u32>)> {
    let mixed = |count: u64| -> Vec<u32> {
        let mut state = WEIGHT_SEED;
        (0..count).map(|_| (splitmix64(&mut state) % MAX_WEIGHT + 1) as u32).collect()
    };
    vec![
        (format!("{SMALL_LOG} grants, weights 1–{MAX_WEIGHT}"), mixed(SMALL_LOG)),
        (format!("{large} grants, {EQUAL_WEIGHT} permits each"), vec![EQUAL_WEIGHT; large as usize]),
        (format!("{large} grants, weights 1–{MAX_WEIGHT}"), mixed(large)),
    ]
}

/// The denied rows: each log filled to its limit, then asked for more than it has left.
async fn denied(
    client: &RestClient,
    sizes: &Sizes,
    logs: Vec<(String, Vec<u32>)>,
    progress: &ProgressBar,
) -> Result<Vec<DeniedRow>, String> {
    let mut measurements = Vec::new();
    let mut limits = Vec::new();
    for (index, (log, weights)) in logs.iter().enumerate() {
        progress.set_message(format!("filling: {log}"));
        let limit = weights.iter().map(|&permits| u64::from(permits)).sum::<u64>();
        let limit = u32::try_from(limit).context("a full log's permits")?;
        let quota =
            Quota::sliding_log(limit, Duration::from_millis(FULL_INTERVAL_MS)).context("invalid benchmark quota")?;
        let limiter = Limiter::new(client.clone(), &format!("weighted-full-{index}"), quota)
            .context("invalid benchmark limiter")?;
        let now = fill(&limiter, weights).await?;
        // Spread from 1 permit to (almost) the limit: the grant whose freeing admits a request is anywhere in the
        // log. Round after round, the same requests.
        let requests = (0..sizes.requests())
            .map(|k| k % sizes.per_round)
            .map(|k| (now, (1 + k * u64::from(limit) / sizes.per_round) as u32))
            .collect();
        measurements.push(Measurement { limiter, requests });
        limits.push(limit);
        progress.inc(1);
    }
    let costs = cheapest_rounds(client, &measurements, "denied", progress).await?;
    let baseline_us = costs[0].micros_per_decision;
    let mut rows = Vec::new();
    for (((log, weights), permits), cost) in logs.into_iter().zip(limits).zip(costs) {
        if cost.granted != 0 {
            return Err(format!("{log}: a request to the full log was granted: {cost:?}"));
        }
        rows.push(DeniedRow {
            log,
            grants: weights.len() as u64,
            permits,
            to_small_log: ratio(cost.micros_per_decision, baseline_us),
            cost,
        });
    }
    Ok(rows)
}

/// Grants `weights` in order to [`ID`], `FILL_LANES` at a time, each batch one ms after the last; returns the ms
/// after the last batch.
async fn fill(limiter: &Limiter, weights: &[u32]) -> Result<u64, String> {
    let mut now = EXPLICIT_T0;
    for batch in weights.chunks(FILL_LANES as usize) {
        let mut lanes = JoinSet::new();
        for &permits in batch {
            let limiter = limiter.clone();
            lanes.spawn(async move { decide(&limiter, now, permits).await });
        }
        while let Some(granted) = lanes.join_next().await {
            if !granted.context("a fill task failed")?? {
                return Err(format!("{}: a grant was denied while filling the log", limiter.name()));
            }
        }
        now += 1;
    }
    Ok(now)
}

/// Measures the rows in `ROUNDS` rounds, taking turns. A row's µs and commands per decision are its cheapest
/// round's; its requests and granted count every round.
async fn cheapest_rounds(
    client: &RestClient,
    measurements: &[Measurement],
    what: &str,
    progress: &ProgressBar,
) -> Result<Vec<DecisionCost>, String> {
    let rounds = take_turns(ROUNDS, measurements.len(), false, async |which, round| {
        progress.set_message(format!("{what}: round {} of {ROUNDS}", round + 1));
        let Measurement { limiter, requests } = &measurements[which];
        let per_round = requests.len() / ROUNDS;
        let requests = &requests[round * per_round..(round + 1) * per_round];
        let cost = redis_stats::measure(client, "evalsha", requests, async |(now, permits)| {
            decide(limiter, now, permits).await
        })
        .await;
        progress.inc(1);
        cost
    })
    .await?;
    let cheapest = |costs: Vec<DecisionCost>| {
        let cheapest = costs.iter().copied().reduce(|a, b| if b.cheaper(&a) { b } else { a })?;
        let requests = costs.iter().map(|cost| cost.requests).sum();
        let granted = costs.iter().map(|cost| cost.granted).sum();
        Some(DecisionCost { requests, granted, ..cheapest })
    };
    rounds.into_iter().map(cheapest).collect::<Option<_>>().ok_or_else(|| "no round was measured".to_owned())
}

/// Whether `permits` for [`ID`] at `now` were granted.
async fn decide(limiter: &Limiter, now: u64, permits: u32) -> Result<bool, String> {
    let decision = limiter.clone().at(now).limit(ID, permits).await.context("edgelimit's decision failed")?;
    Ok(decision.success)
}
