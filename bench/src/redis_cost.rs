//! Scenarios 1 and 4: Redis µs and commands per decision (`INFO commandstats`) and `MEMORY USAGE` idle and busy, per
//! algorithm and contender, next to the `INCR` floor; 1000 per second on one identifier, in `ROUNDS` rounds.

use std::time::Duration;

use indicatif::ProgressBar;
use serde::{Deserialize, Serialize};

use crate::contender::{pairings, Clock, Contender, ContenderKind, Peer};
use crate::peers::UpstashScripts;
use crate::redis_stats::DecisionCost;
use crate::stack::BenchStack;
use crate::support::{ratio, take_turns, EXPLICIT_T0, ROUNDS};

/// Permits per window.
const LIMIT: u32 = 1000;
const WINDOW_MS: u64 = 1000;

/// Scenario 1's numbers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RedisCost {
    pub limit: u32,
    pub window_ms: u64,
    /// How much explicit time the workload spans (two requests per ms).
    pub explicit_ms: u64,
    /// Requests per contender (on either clock).
    pub requests: u64,
    pub floor: Floor,
    pub algorithms: Vec<AlgorithmCost>,
}

/// What the cheapest write costs: `INCR` sent as a command, and inside a one-line script (the ratios' denominator).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Floor {
    pub command: Cost,
    pub script: Cost,
}

/// One algorithm: edgelimit on both clocks, and the peer that has the same algorithm, if one has.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AlgorithmCost {
    pub algorithm: String,
    pub server_clock: Cost,
    pub explicit_time: Cost,
    pub peer: Option<PeerCost>,
    pub ratios: Ratios,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PeerCost {
    pub kind: ContenderKind,
    pub cost: Cost,
}

/// What a contender cost Redis: per decision, and the bytes of an identifier's keys after one request (idle) and of
/// the measured identifier's after the workload (busy).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cost {
    pub decision: DecisionCost,
    pub bytes_idle: u64,
    pub bytes_busy: u64,
}

/// Ratios of µs per decision (the floor is the `INCR` script); `None` where there is nothing to compare with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Ratios {
    pub server_clock_to_peer: Option<f64>,
    pub server_clock_to_floor: Option<f64>,
    pub explicit_time_to_floor: Option<f64>,
    pub peer_to_floor: Option<f64>,
}

/// Runs scenario 1.
pub(crate) async fn run(
    stack: &BenchStack,
    upstash: &UpstashScripts,
    quick: bool,
    progress: &ProgressBar,
) -> Result<RedisCost, String> {
    let explicit_ms = if quick { 100 } else { 2000 };
    let window = Duration::from_millis(WINDOW_MS);
    let client = stack.client();
    let rows = pairings(LIMIT, window, "concurrency (leases of 1 s)")?;
    // Every contender in one list, measured one after the other; the rows and the floor keep their places in it.
    let mut contenders =
        vec![Contender::incr(client, "floor-command", false), Contender::incr(client, "floor-script", true)];
    let mut peers: Vec<(Peer, usize)> = Vec::new();
    let mut places = Vec::new();
    for row in &rows {
        let name = |clock: Clock| format!("cost-{}-{clock:?}", row.name.replace([' ', ','], "_"));
        // The server-clock contender here, the explicit-time one next.
        let ours = contenders.len();
        for clock in [Clock::Server, Clock::Caller] {
            contenders.push(row.ours.contender(client, &name(clock), clock)?);
        }
        // Redisson is the peer of both sliding logs: measured once, shown in both rows.
        let peer = match row.peer {
            Some(peer) => Some(match peers.iter().find(|(known, _)| *known == peer) {
                Some(&(_, place)) => place,
                None => {
                    let prefix = format!("cost-peer-{}", peers.len());
                    contenders.push(peer.contender(client, upstash, LIMIT, window, &prefix)?);
                    peers.push((peer, contenders.len() - 1));
                    contenders.len() - 1
                }
            }),
            None => None,
        };
        places.push((ours, peer));
    }
    progress.set_length((ROUNDS * contenders.len()) as u64);
    // Two requests at every ms of the measured span; the idle identifier's one request and the memory at its end.
    let times: Vec<u64> = (0..explicit_ms).flat_map(|ms| [EXPLICIT_T0 + ms; 2]).collect();
    let end = EXPLICIT_T0 + explicit_ms - 1;
    let runs = take_turns(ROUNDS, contenders.len(), false, async |which, round| {
        let contender = &contenders[which];
        progress.set_message(contender.kind().label());
        // A fresh identifier each round: the explicit times start over, and a log or window left by the round
        // before would be read as the future's.
        let busy = format!("busy-{round}");
        for id in ["warm-up", &busy, "idle"] {
            contender.prepare(id).await?;
        }
        // Long before the measured span, so it leaves nothing the workload would see.
        contender.decide("warm-up", EXPLICIT_T0 - 10 * WINDOW_MS).await?;
        let decision = contender.measure(&busy, &times).await?;
        // Right after the last request, before short-lived state expires.
        contender.decide("idle", end).await?;
        let bytes_idle = contender.memory("idle", end).await?;
        let bytes_busy = contender.memory(&busy, end).await?;
        progress.inc(1);
        Ok(Cost { decision, bytes_idle, bytes_busy })
    })
    .await?;
    // Each contender's cheapest round, with the first round's memory: the idle identifier holds one request only then.
    let costs: Vec<Cost> = (runs.into_iter())
        .map(|runs| {
            runs.into_iter().reduce(|mut kept, cost| {
                if cost.decision.cheaper(&kept.decision) {
                    kept.decision = cost.decision;
                }
                kept
            })
        })
        .collect::<Option<_>>()
        .ok_or("a contender was never measured")?;
    let micros = |cost: &Cost| cost.decision.micros_per_decision;
    let floor_us = micros(&costs[1]);
    let algorithms = (rows.iter().zip(places))
        .map(|(row, (ours, peer))| {
            let (server_clock, explicit_time) = (costs[ours].clone(), costs[ours + 1].clone());
            let peer = peer.map(|place| PeerCost { kind: contenders[place].kind(), cost: costs[place].clone() });
            let peer_us = peer.as_ref().map(|peer| micros(&peer.cost));
            let ratios = Ratios {
                server_clock_to_peer: peer_us.and_then(|peer_us| ratio(micros(&server_clock), peer_us)),
                server_clock_to_floor: ratio(micros(&server_clock), floor_us),
                explicit_time_to_floor: ratio(micros(&explicit_time), floor_us),
                peer_to_floor: peer_us.and_then(|peer_us| ratio(peer_us, floor_us)),
            };
            let algorithm = row.name.to_owned();
            AlgorithmCost { algorithm, server_clock, explicit_time, peer, ratios }
        })
        .collect();
    Ok(RedisCost {
        limit: LIMIT,
        window_ms: WINDOW_MS,
        explicit_ms,
        requests: times.len() as u64,
        floor: Floor { command: costs[0].clone(), script: costs[1].clone() },
        algorithms,
    })
}
