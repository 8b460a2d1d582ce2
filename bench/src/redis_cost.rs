//! Scenario 1 (and 4): Redis CPU per decision (`INFO commandstats`), commands per decision, and `MEMORY USAGE` of an
//! identifier's keys after one request (idle) and after the workload (busy), per algorithm and contender.
//!
//! Workload: 1000 per second on one identifier. At explicit times, two requests per ms for 2000 ms (about half
//! denied); on the server's clock the same number as fast as one client can. Floor: `INCR` as a command and in a
//! one-line script. Requests run back to back ([`crate::contender::Plan::measure`]), in `ROUNDS` rounds.

use std::time::Duration;

use indicatif::ProgressBar;
use serde::{Deserialize, Serialize};

use crate::contender::{pairings, Clock, Contender, ContenderKind, Pairing, Peer, Plan};
use crate::peers::UpstashScripts;
use crate::redis_stats::DecisionCost;
use crate::stack::BenchStack;
use crate::support::{ratio, EXPLICIT_T0, ROUNDS};

/// Scenario 1's numbers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RedisCost {
    /// Permits per window.
    pub limit: u32,
    /// The window, in ms.
    pub window_ms: u64,
    /// How much explicit time the workload spans (two requests per ms).
    pub explicit_ms: u64,
    /// Requests per contender (on either clock).
    pub requests: u64,
    /// What the cheapest write costs: `INCR`, as a command and inside a script.
    pub floor: Floor,
    /// Per algorithm.
    pub algorithms: Vec<AlgorithmCost>,
}

/// The floor: costs no limiter can go below.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Floor {
    /// `INCR` sent as a command (µs per `INCR`).
    pub command: Cost,
    /// `INCR` inside a one-line script (µs per `EVALSHA`): the ratios' denominator.
    pub script: Cost,
}

/// One algorithm: edgelimit on both clocks, and the peer that has the same algorithm.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AlgorithmCost {
    /// The algorithm, as tables name it.
    pub algorithm: String,
    /// edgelimit on the Redis server's clock (the default).
    pub server_clock: Cost,
    /// edgelimit at explicit times.
    pub explicit_time: Cost,
    /// The peer's script for the same algorithm, if a peer has it.
    pub peer: Option<PeerCost>,
    /// Ratios of the µs per decision.
    pub ratios: Ratios,
}

/// A peer's measurement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PeerCost {
    /// Which peer.
    pub kind: ContenderKind,
    /// What it cost.
    pub cost: Cost,
}

/// What a contender cost Redis.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cost {
    /// CPU and commands per decision.
    pub decision: DecisionCost,
    /// Bytes of an identifier's keys after one request.
    pub bytes_idle: u64,
    /// Bytes of the measured identifier's keys after the workload.
    pub bytes_busy: u64,
}

/// Ratios of µs per decision; `None` where there is nothing to compare with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Ratios {
    /// edgelimit (server clock) / the peer.
    pub server_clock_to_peer: Option<f64>,
    /// edgelimit (server clock) / the `INCR` script.
    pub server_clock_to_floor: Option<f64>,
    /// edgelimit (explicit time) / the `INCR` script.
    pub explicit_time_to_floor: Option<f64>,
    /// The peer / the `INCR` script.
    pub peer_to_floor: Option<f64>,
}

/// The workload's sizes.
struct Workload {
    limit: u32,
    window: Duration,
    explicit_ms: u64,
}

impl Workload {
    fn new(quick: bool) -> Workload {
        Workload {
            limit: 1000,
            window: Duration::from_millis(1000),
            explicit_ms: if quick { 100 } else { 2000 },
        }
    }

    fn window_ms(&self) -> u64 {
        self.window.as_millis() as u64
    }

    /// Two requests at every ms of the measured span.
    fn times(&self) -> impl Iterator<Item = u64> {
        (0..self.explicit_ms).flat_map(|ms| [EXPLICIT_T0 + ms; 2])
    }

    /// When the idle identifier makes its one request, and the keys are read.
    fn end(&self) -> u64 {
        EXPLICIT_T0 + self.explicit_ms - 1
    }

    fn rows(&self) -> Result<Vec<Pairing>, String> {
        pairings(self.limit, self.window, "concurrency (leases of 1 s)")
    }
}

/// Runs scenario 1.
pub(crate) async fn run(
    stack: &BenchStack,
    upstash: &UpstashScripts,
    quick: bool,
    progress: &ProgressBar,
) -> Result<RedisCost, String> {
    let workload = Workload::new(quick);
    let client = stack.client();
    let rows = workload.rows()?;
    // Every contender in one list, measured one after the other; the rows and the floor keep their places in it.
    let mut contenders = vec![
        Contender::incr_command(client, "floor-command"),
        Contender::incr_script(client, "floor-script"),
    ];
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
                    contenders.push(peer.contender(client, upstash, workload.limit, workload.window, &prefix)?);
                    peers.push((peer, contenders.len() - 1));
                    contenders.len() - 1
                }
            }),
            None => None,
        };
        places.push((ours, peer));
    }
    progress.set_length((ROUNDS * contenders.len()) as u64);
    let costs = measure(&workload, &contenders, progress).await?;
    let floor_us = costs[1].decision.micros_per_decision;
    let algorithms = rows
        .iter()
        .zip(places)
        .map(|(row, (ours, peer))| {
            let (server_clock, explicit_time) = (costs[ours].clone(), costs[ours + 1].clone());
            let peer = peer.map(|place| PeerCost {
                kind: contenders[place].kind(),
                cost: costs[place].clone(),
            });
            let micros = |cost: &Cost| cost.decision.micros_per_decision;
            let peer_us = peer.as_ref().map(|peer| micros(&peer.cost));
            let ratios = Ratios {
                server_clock_to_peer: peer_us.and_then(|peer_us| ratio(micros(&server_clock), peer_us)),
                server_clock_to_floor: ratio(micros(&server_clock), floor_us),
                explicit_time_to_floor: ratio(micros(&explicit_time), floor_us),
                peer_to_floor: peer_us.and_then(|peer_us| ratio(peer_us, floor_us)),
            };
            AlgorithmCost {
                algorithm: row.name.to_owned(),
                server_clock,
                explicit_time,
                peer,
                ratios,
            }
        })
        .collect();
    Ok(RedisCost {
        limit: workload.limit,
        window_ms: workload.window_ms(),
        explicit_ms: workload.explicit_ms,
        requests: workload.times().count() as u64,
        floor: Floor {
            command: costs[0].clone(),
            script: costs[1].clone(),
        },
        algorithms,
    })
}

/// The workload for each contender in turn, [`ROUNDS`] times, on a fresh identifier each round; each contender's
/// cheapest round, with the first round's memory.
async fn measure(workload: &Workload, contenders: &[Contender], progress: &ProgressBar) -> Result<Vec<Cost>, String> {
    let mut cheapest: Vec<Option<Cost>> = vec![None; contenders.len()];
    for round in 0..ROUNDS {
        // A fresh identifier each round: the explicit times start over, and a log or window left by the round
        // before would be read as the future's.
        let busy = format!("busy-{round}");
        for (contender, kept) in contenders.iter().zip(&mut cheapest) {
            progress.set_message(contender.kind().label());
            for id in ["warm-up", &busy, "idle"] {
                contender.prepare(id).await?;
            }
            // Long before the measured span, so it leaves nothing the workload would see.
            contender
                .decide("warm-up", EXPLICIT_T0 - 10 * workload.window_ms())
                .await?;
            let plan = Plan {
                contender,
                id: &busy,
                times: workload.times().collect(),
                memory_at: Some(workload.end()),
            };
            let measured = plan.measure().await?;
            let memory = measured.memory.ok_or("the memory was not read")?;
            let cost = Cost {
                decision: measured.decision,
                bytes_idle: memory.idle,
                bytes_busy: memory.busy,
            };
            // The memory is the first round's: the idle identifier holds one request only then.
            match kept {
                Some(kept) => kept.decision = kept.decision.cheaper(cost.decision),
                None => *kept = Some(cost),
            }
            progress.inc(1);
        }
    }
    Ok(cheapest.into_iter().flatten().collect())
}
