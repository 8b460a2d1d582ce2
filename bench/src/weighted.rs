//! Scenario 7: weighted decisions on the permit log (sliding log, concurrency). The log keeps one member per grant,
//! whatever its permits, so a decision's cost must not grow with the weight.
//!
//! - By weight: a limit never reached; one grant of k permits (1, 10^3, 10^6) per ms of explicit time, so the log
//!   holds a full interval of grants and each decision frees the oldest. Ratios are to the 1-permit row.
//! - Denied: a log full to its limit, asked for permit counts spread over it, so the grant whose freeing would admit
//!   the request lies anywhere: 10 grants (the baseline), 10^5 of equal weight (the rank search's first guess hits),
//!   10^5 of seeded mixed weights (a binary search). Ratios are to the 10-grant log.
//!
//! Explicit times throughout, so the logs stay put. Logs are filled first; the rows then take turns in rounds and
//! each keeps its cheapest.

use std::time::Duration;

use edgelimit::limit::{Limiter, Quota};
use edgelimit::RestClient;
use indicatif::ProgressBar;
use serde::{Deserialize, Serialize};
use tokio::task::JoinSet;

use crate::redis_stats::{self, DecisionCost};
use crate::stack::BenchStack;
use crate::support::{ratio, splitmix64, Context, EXPLICIT_T0};

/// The by-weight limit: the most permits a quota takes, so that the heaviest grant measured stays far below it.
const WIDE_LIMIT: u32 = u32::MAX;

/// The by-weight interval (concurrency's lease time), ms.
const WIDE_INTERVAL_MS: u64 = 1_000;

/// Permits per grant, by weight.
const WEIGHTS: [u32; 3] = [1, 1_000, 1_000_000];

/// Full logs' interval, ms: long enough that none of their grants frees before it is measured.
const FULL_INTERVAL_MS: u64 = 60_000;

/// Grants in the baseline full log.
const SMALL_LOG: u64 = 10;

/// Permits per grant in the equal-weight full log: the mean of the mixed weights, so both hold about as many.
const EQUAL_WEIGHT: u32 = 500;

/// Mixed weights are drawn from 1 to this.
const MAX_WEIGHT: u64 = 1_000;

/// The seed the mixed weights are drawn with.
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
    /// The by-weight interval, ms.
    pub interval_ms: u64,
    /// Grants the by-weight log holds in steady state.
    pub grants_held: u64,
    /// Rounds each row was measured in; its cost is its cheapest round's.
    pub rounds: usize,
    /// By weight: one row per algorithm and weight.
    pub by_weight: Vec<WeightRow>,
    /// The seed of the full logs' mixed weights.
    pub weight_seed: u64,
    /// Denied: one row per full log, the baseline first.
    pub denied: Vec<DeniedRow>,
}

/// One algorithm at one weight.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WeightRow {
    /// The algorithm, as tables name it.
    pub algorithm: String,
    /// Permits per grant.
    pub permits: u32,
    /// What its decisions cost Redis: µs and commands from the cheapest round, requests and granted from all.
    pub cost: DecisionCost,
    /// µs per decision: this row / the same algorithm's 1-permit row.
    pub to_one_permit: Option<f64>,
}

/// Denied decisions against one full log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeniedRow {
    /// What the log holds, as tables name it.
    pub log: String,
    /// Grants in the log.
    pub grants: u64,
    /// Permits the log holds: its limit.
    pub permits: u32,
    /// What the denied decisions cost Redis: µs and commands from the cheapest round, requests and granted from
    /// all.
    pub cost: DecisionCost,
    /// µs per decision: this log / the 10-grant log.
    pub to_small_log: Option<f64>,
}

/// The workload's sizes.
struct Sizes {
    /// By weight: ms of explicit time between grants (the log holds `WIDE_INTERVAL_MS / step_ms` grants).
    step_ms: u64,
    /// Decisions per round of a row.
    per_round: u64,
    /// Grants in the large full logs.
    large_log: u64,
}

impl Sizes {
    fn new(quick: bool) -> Sizes {
        if quick {
            Sizes {
                step_ms: 50,
                per_round: 4,
                large_log: 1_000,
            }
        } else {
            Sizes {
                step_ms: 1,
                per_round: 400,
                large_log: 100_000,
            }
        }
    }

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
    let sizes = Sizes::new(quick);
    let logs = full_logs(sizes.large_log);
    let rows = 2 * WEIGHTS.len() + logs.len();
    // Each log's fill, then each round.
    progress.set_length((rows + 2 * ROUNDS) as u64);
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
                return Err(format!(
                    "{algorithm}: a grant of {permits} was denied while filling the log"
                ));
            }
        }
        // Each request frees the oldest grant (its time + the interval is now) and is granted in its place.
        let requests = (0..sizes.requests())
            .map(|k| (EXPLICIT_T0 + WIDE_INTERVAL_MS + k * sizes.step_ms, permits))
            .collect();
        measurements.push(Measurement { limiter, requests });
        progress.inc(1);
    }
    let costs = cheapest_rounds(client, &measurements, "by weight", progress).await?;
    let mut one_permit_us = 0.0;
    let mut by_weight = Vec::new();
    for ((algorithm, permits, _), cost) in rows.into_iter().zip(costs) {
        if cost.granted != cost.requests {
            return Err(format!(
                "{algorithm}: grants of {permits} were denied in steady state: {cost:?}"
            ));
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
        (0..count)
            .map(|_| (splitmix64(&mut state) % MAX_WEIGHT + 1) as u32)
            .collect()
    };
    vec![
        (format!("{SMALL_LOG} grants, weights 1–{MAX_WEIGHT}"), mixed(SMALL_LOG)),
        (
            format!("{large} grants, {EQUAL_WEIGHT} permits each"),
            vec![EQUAL_WEIGHT; large as usize],
        ),
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

/// Measures the rows in `ROUNDS` rounds. A row's µs and commands per decision are its cheapest round's; its
/// requests and granted count every round.
async fn cheapest_rounds(
    client: &RestClient,
    measurements: &[Measurement],
    what: &str,
    progress: &ProgressBar,
) -> Result<Vec<DecisionCost>, String> {
    let mut rounds: Vec<Vec<DecisionCost>> = vec![Vec::new(); measurements.len()];
    for round in 0..ROUNDS {
        progress.set_message(format!("{what}: round {} of {ROUNDS}", round + 1));
        for (measurement, costs) in measurements.iter().zip(&mut rounds) {
            let per_round = measurement.requests.len() / ROUNDS;
            let requests = &measurement.requests[round * per_round..(round + 1) * per_round];
            costs.push(measure(client, &measurement.limiter, requests).await?);
        }
        progress.inc(1);
    }
    rounds
        .into_iter()
        .map(|costs| {
            let cheapest = costs
                .iter()
                .min_by(|a, b| a.micros_per_decision.total_cmp(&b.micros_per_decision))
                .ok_or("no round was measured")?;
            Ok(DecisionCost {
                requests: costs.iter().map(|cost| cost.requests).sum(),
                granted: costs.iter().map(|cost| cost.granted).sum(),
                ..*cheapest
            })
        })
        .collect()
}

/// Decides `requests` (explicit time, permits) for [`ID`] back to back, between a reset and a read of Redis's
/// counters, as [`crate::contender::Plan::measure`] does with one permit each. The script cache must be warm.
async fn measure(client: &RestClient, limiter: &Limiter, requests: &[(u64, u32)]) -> Result<DecisionCost, String> {
    redis_stats::reset(client).await?;
    let mut granted = 0;
    for &(now, permits) in requests {
        granted += u64::from(decide(limiter, now, permits).await?);
    }
    redis_stats::read(client)
        .await?
        .cost_of("evalsha", requests.len() as u64, granted)
}

/// Whether `permits` for [`ID`] at `now` were granted.
async fn decide(limiter: &Limiter, now: u64, permits: u32) -> Result<bool, String> {
    let decision = limiter
        .clone()
        .at(now)
        .limit(ID, permits)
        .await
        .context("edgelimit's decision failed")?;
    Ok(decision.success)
}
