//! Scenario 2: the sliding logs' Redis cost as the log grows (at rate R, R grants in an R-ms interval, filled first),
//! the family's and the Redisson layout's next to Redisson's script; cheapest of `ROUNDS` rounds on fresh identifiers.

use std::sync::Arc;
use std::time::Duration;

use edgelimit::limit::Quota;
use edgelimit::Rate;
use indicatif::ProgressBar;
use serde::{Deserialize, Serialize};
use tokio::task::JoinSet;

use crate::contender::{Clock, Contender};
use crate::redis_stats::DecisionCost;
use crate::stack::BenchStack;
use crate::support::{best_each, ratio, take_turns, Context, EXPLICIT_T0, ROUNDS};

/// Requests in flight while filling a log.
const WARM_UP_LANES: u64 = 16;

/// Scenario 2's numbers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Scaling {
    /// Steady-state ms measured per rate (two requests each).
    pub measured_ms: u64,
    pub rows: Vec<ScalingRow>,
}

/// The three sliding logs at one rate (permits per interval; the interval is this many ms, so the log holds this many
/// grants), and their µs per decision over Redisson's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScalingRow {
    pub rate: u64,
    pub family: DecisionCost,
    pub redisson_layout: DecisionCost,
    pub redisson: DecisionCost,
    pub family_to_redisson: Option<f64>,
    pub redisson_layout_to_redisson: Option<f64>,
}

/// Runs scenario 2.
pub(crate) async fn run(stack: &BenchStack, quick: bool, progress: &ProgressBar) -> Result<Scaling, String> {
    let rates: &[u64] = if quick { &[10, 1_000] } else { &[10, 100, 1_000, 10_000, 100_000] };
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
        let times: Vec<u64> = (0..measured_ms).flat_map(|ms| [EXPLICIT_T0 + rate + ms; 2]).collect();
        let runs = take_turns(ROUNDS, contenders.len(), false, async |which, round| {
            let contender = &contenders[which];
            progress.set_message(format!("{rate} per interval: {}", contender.kind().label()));
            // A fresh identifier each round: the explicit times start over.
            let busy = format!("busy-{round}");
            fill_log(contender.clone(), rate, &busy).await?;
            let cost = contender.measure(&busy, &times).await;
            progress.inc(1);
            cost
        })
        .await?;
        let [family, redisson_layout, redisson] = best_each(runs, DecisionCost::cheaper)?;
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
