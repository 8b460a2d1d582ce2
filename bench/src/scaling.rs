//! Scenario 2: the sliding log's Redis cost as the log grows, edgelimit's two sliding logs (the family's and the
//! Redisson layout's) next to Redisson's script.
//!
//! At rate R the interval is R ms and one grant is made per ms, so the log holds R grants. The log is filled first,
//! then each ms of explicit time gets one granted and one denied request. Each contender keeps its cheapest of
//! `ROUNDS` rounds, each on a fresh identifier.

use std::sync::Arc;
use std::time::Duration;

use edgelimit::limit::Quota;
use edgelimit::Rate;
use indicatif::ProgressBar;
use serde::{Deserialize, Serialize};
use tokio::task::JoinSet;

use crate::contender::{Clock, Contender, Plan};
use crate::redis_stats::DecisionCost;
use crate::stack::BenchStack;
use crate::support::{ratio, Context, EXPLICIT_T0, ROUNDS};

/// Requests in flight while filling a log.
const WARM_UP_LANES: u64 = 16;

/// Scenario 2's numbers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Scaling {
    /// Steady-state ms measured per rate (two requests each).
    pub measured_ms: u64,
    /// One row per rate.
    pub rows: Vec<ScalingRow>,
}

/// The three sliding logs at one rate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScalingRow {
    /// Permits per interval; the interval is this many ms, so the log holds this many grants.
    pub rate: u64,
    /// edgelimit's family sliding log (`Quota::sliding_log`).
    pub family: DecisionCost,
    /// edgelimit's Redisson-layout sliding log (`RedissonLimiter`).
    pub redisson_layout: DecisionCost,
    /// Redisson's `RRateLimiter` script.
    pub redisson: DecisionCost,
    /// µs per decision: family / Redisson.
    pub family_to_redisson: Option<f64>,
    /// µs per decision: Redisson layout / Redisson.
    pub redisson_layout_to_redisson: Option<f64>,
}

/// Runs scenario 2.
pub(crate) async fn run(stack: &BenchStack, quick: bool, progress: &ProgressBar) -> Result<Scaling, String> {
    let rates: &[u64] = if quick {
        &[10, 1_000]
    } else {
        &[10, 100, 1_000, 10_000, 100_000]
    };
    let measured_ms = if quick { 50 } else { 2_000 };
    progress.set_length((ROUNDS * 3 * rates.len()) as u64);
    let client = stack.client();
    let mut rows = Vec::new();
    for &rate in rates {
        let interval = Duration::from_millis(rate);
        let permits = u32::try_from(rate).context("rate")?;
        let quota = Quota::sliding_log(permits, interval).context("invalid benchmark quota")?;
        let setting = Rate::new(permits, interval).context("invalid benchmark rate")?;
        let contenders = [
            Contender::family(client, &format!("scale-{rate}-family"), quota, Clock::Caller)?,
            Contender::redisson_layout(client, &format!("scale-{rate}-layout"), setting, Clock::Caller),
            Contender::redisson(client, &format!("scale-{rate}-redisson"), setting),
        ]
        .map(Arc::new);
        // Each contender's cheapest round (see ROUNDS), the contenders taking turns.
        let mut cheapest: [Option<DecisionCost>; 3] = [None; 3];
        for round in 0..ROUNDS {
            // A fresh identifier each round: the explicit times start over.
            let busy = format!("busy-{round}");
            for (contender, kept) in contenders.iter().zip(&mut cheapest) {
                progress.set_message(format!("{rate} per interval: {}", contender.kind().label()));
                fill_log(contender.clone(), rate, &busy).await?;
                let steady = Plan {
                    contender,
                    id: &busy,
                    times: (0..measured_ms).flat_map(|ms| [EXPLICIT_T0 + rate + ms; 2]).collect(),
                    memory_at: None,
                };
                let cost = steady.measure().await?.decision;
                *kept = Some(kept.map_or(cost, |kept| kept.cheaper(cost)));
                progress.inc(1);
            }
        }
        let [family, redisson_layout, redisson] = cheapest.map(|cost| cost.ok_or("no round measured"));
        let (family, redisson_layout, redisson) = (family?, redisson_layout?, redisson?);
        rows.push(ScalingRow {
            rate,
            family_to_redisson: ratio(family.micros_per_decision, redisson.micros_per_decision),
            redisson_layout_to_redisson: ratio(redisson_layout.micros_per_decision, redisson.micros_per_decision),
            family,
            redisson_layout,
            redisson,
        });
    }
    Ok(Scaling { measured_ms, rows })
}

/// Fills the log of identifier `id` with `rate` grants, one per ms of explicit time, `WARM_UP_LANES` at a time.
async fn fill_log(contender: Arc<Contender>, rate: u64, id: &str) -> Result<(), String> {
    contender.prepare(id).await?;
    let mut lanes = JoinSet::new();
    for lane in 0..WARM_UP_LANES {
        let (contender, id) = (contender.clone(), id.to_owned());
        // Order does not matter while filling: nothing expires before the window is full.
        lanes.spawn(async move {
            for ms in (lane..rate).step_by(WARM_UP_LANES as usize) {
                contender.decide(&id, EXPLICIT_T0 + ms).await?;
            }
            Ok::<(), String>(())
        });
    }
    while let Some(lane) = lanes.join_next().await {
        lane.context("a warm-up task failed")??;
    }
    Ok(())
}
