//! Scenario 5: over-admission (the most grants in any interval-long span / limit) next to each algorithm's promise:
//! bursts around a window boundary at explicit times, and concurrent clients with skewed clocks for the peers.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use indicatif::ProgressBar;
use serde::{Deserialize, Serialize};
use tokio::task::JoinSet;

use crate::contender::{pairings, Clock, Contender, ContenderKind, Pairing};
use crate::peers::UpstashScripts;
use crate::stack::BenchStack;
use crate::support::{splitmix64, Context, EXPLICIT_T0};

/// (b)'s concurrent clients, whose clocks are off by up to `MAX_SKEW_MS` either way, drawn from `SKEW_SEED`.
const CLIENTS: u32 = 8;
const MAX_SKEW_MS: u64 = 250;
const SKEW_SEED: u64 = 8;

/// Scenario 5's numbers: the limit per interval, (a) and (b).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Accuracy {
    pub limit: u32,
    pub interval_ms: u64,
    pub boundary_bursts: Vec<BoundaryBurst>,
    pub concurrent: ConcurrentClients,
}

/// (a) for one algorithm and contender: the most grants in any interval-long span / limit, with the second burst at
/// the boundary and half an interval after it, and the most the algorithm allows in such a span / limit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BoundaryBurst {
    pub algorithm: String,
    pub kind: ContenderKind,
    pub at_boundary: f64,
    pub half_interval_after: f64,
    pub promise: f64,
}

/// (b): the clients, the seconds of real time per contender, each client's clock skew (ms, drawn from the seed; the
/// peers decide on it, edgelimit on the server's clock), and what each contender let through.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConcurrentClients {
    pub clients: u32,
    pub seconds: f64,
    pub skew_seed: u64,
    pub skews_ms: Vec<i64>,
    pub rows: Vec<ConcurrentRow>,
}

/// (b) for one algorithm and contender: requests sent and granted, the most grants in any interval-long span /
/// limit, the promise as in (a), and which clock the grant times were read on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConcurrentRow {
    pub algorithm: String,
    pub kind: ContenderKind,
    pub requests: u64,
    pub granted: u64,
    pub most_in_any_interval: f64,
    pub promise: f64,
    pub grant_times: GrantClock,
}

/// Where a grant's time came from: the Redis server's time from the reply (`reset` − interval), or this machine's
/// clock when the reply arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GrantClock {
    ServerReply,
    LocalArrival,
}

impl GrantClock {
    /// How tables name it.
    pub fn label(self) -> &'static str {
        match self {
            GrantClock::ServerReply => "server time, from the reply",
            GrantClock::LocalArrival => "local clock at the reply",
        }
    }
}

impl Pairing {
    /// The most the algorithm allows in an interval-long span, / limit: 1 for a permit log; 2 for the others here
    /// (two aligned windows for the fixed window, at most that for the sliding window counter, a full burst plus a
    /// refill of the limit for the token bucket and GCRA).
    fn promise(&self) -> f64 {
        if self.ours.keeps_permit_log() {
            1.0
        } else {
            2.0
        }
    }
}

/// Runs scenario 5.
pub(crate) async fn run(
    stack: &BenchStack,
    upstash: &UpstashScripts,
    quick: bool,
    progress: &ProgressBar,
) -> Result<Accuracy, String> {
    let limit = if quick { 20 } else { 100 };
    let interval = Duration::from_millis(1000);
    let run_time = Duration::from_millis(if quick { 300 } else { 2000 });
    let cases = pairings(limit, interval, "concurrency (leases never released)")?;
    let contenders_per_case = |case: &Pairing| 1 + u64::from(case.peer.is_some());
    progress.set_length(2 * cases.iter().map(contenders_per_case).sum::<u64>());
    let client = stack.client();
    let skews = skews(CLIENTS, SKEW_SEED);
    let mut boundary_bursts = Vec::new();
    let mut rows = Vec::new();
    for case in &cases {
        let name = case.name.replace([' ', ',', '(', ')'], "-");
        let peer = |part: &str| {
            case.peer
                .map(|peer| peer.contender(client, upstash, limit, interval, &format!("{part}-peer-{name}")))
                .transpose()
        };
        let explicit = case.ours.contender(client, &format!("burst-{name}"), Clock::Caller)?;
        for contender in std::iter::once(explicit).chain(peer("burst")?) {
            progress.set_message(format!("boundary bursts: {}, {}", case.name, contender.kind().label()));
            boundary_bursts.push(boundary_burst(case, &contender).await?);
            progress.inc(1);
        }
        let server = case.ours.contender(client, &format!("clients-{name}"), Clock::Server)?;
        for contender in std::iter::once(server).chain(peer("clients")?) {
            progress.set_message(format!("{CLIENTS} clients: {}, {}", case.name, contender.kind().label()));
            rows.push(concurrent_clients(case, contender, &skews, run_time).await?);
            progress.inc(1);
        }
    }
    Ok(Accuracy {
        limit,
        interval_ms: interval.as_millis() as u64,
        boundary_bursts,
        concurrent: ConcurrentClients {
            clients: CLIENTS,
            seconds: run_time.as_secs_f64(),
            skew_seed: SKEW_SEED,
            skews_ms: skews,
            rows,
        },
    })
}

/// (a): the two bursts, with the second at the boundary and half an interval after it.
async fn boundary_burst(case: &Pairing, contender: &Contender) -> Result<BoundaryBurst, String> {
    let interval = case.interval_ms;
    let boundary = EXPLICIT_T0 + 10 * interval;
    Ok(BoundaryBurst {
        algorithm: case.name.to_owned(),
        kind: contender.kind(),
        at_boundary: burst_ratio(case, contender, "at-boundary", boundary, boundary).await?,
        half_interval_after: burst_ratio(case, contender, "half-after", boundary, boundary + interval / 2).await?,
        promise: case.promise(),
    })
}

/// `limit` requests for `id` 1 ms before `boundary` and `limit` at `second_burst`: the most grants in any
/// interval-long span, / limit.
async fn burst_ratio(
    case: &Pairing,
    contender: &Contender,
    id: &str,
    boundary: u64,
    second_burst: u64,
) -> Result<f64, String> {
    let (limit, interval) = (case.limit, case.interval_ms);
    let burst = |at: u64| std::iter::repeat_n(at, limit as usize);
    contender.prepare(id).await?;
    let mut granted = Vec::new();
    for now in burst(boundary - 1).chain(burst(second_burst)) {
        if contender.decide(id, now).await?.granted {
            granted.push(now);
        }
    }
    Ok(most_in_any_span(&granted, interval) as f64 / f64::from(limit))
}

/// One granted request of (b), on this machine's clock, with edgelimit's `reset`.
struct Grant {
    sent_ms: u64,
    arrived_ms: u64,
    reset: Option<u64>,
}

/// (b): `CLIENTS` clients hammering one identifier for `run_time`.
async fn concurrent_clients(
    case: &Pairing,
    contender: Contender,
    skews: &[i64],
    run_time: Duration,
) -> Result<ConcurrentRow, String> {
    contender.prepare("shared").await?;
    let contender = std::sync::Arc::new(contender);
    let deadline = tokio::time::Instant::now() + run_time;
    let mut clients = JoinSet::new();
    for &skew in skews {
        let contender = contender.clone();
        clients.spawn(async move {
            let (mut requests, mut grants) = (0u64, Vec::new());
            while tokio::time::Instant::now() < deadline {
                let sent_ms = local_ms();
                // The server's clock ignores it; a caller-clock peer decides on this client's (skewed) clock.
                let client_clock = sent_ms.saturating_add_signed(skew);
                let verdict = contender.decide("shared", client_clock).await?;
                requests += 1;
                if verdict.granted {
                    let arrived_ms = local_ms();
                    let reset = verdict.reset;
                    grants.push(Grant { sent_ms, arrived_ms, reset });
                }
            }
            Ok::<_, String>((requests, grants))
        });
    }
    let (mut requests, mut grants) = (0, Vec::new());
    while let Some(client) = clients.join_next().await {
        let (sent, granted) = client.context("a client task failed")??;
        requests += sent;
        grants.extend(granted);
    }
    let interval = case.interval_ms;
    let (grant_times, mut times) = grant_times(case, &grants);
    times.sort_unstable();
    Ok(ConcurrentRow {
        algorithm: case.name.to_owned(),
        kind: contender.kind(),
        requests,
        granted: grants.len() as u64,
        most_in_any_interval: most_in_any_span(&times, interval) as f64 / f64::from(case.limit),
        promise: case.promise(),
        grant_times,
    })
}

/// The grants' times: from edgelimit's replies where they name them exactly and every one falls between its
/// request's sending and its reply (1 ms of rounding either way), else the arrival times.
fn grant_times(case: &Pairing, grants: &[Grant]) -> (GrantClock, Vec<u64>) {
    let interval = case.interval_ms;
    let from_replies: Option<Vec<u64>> = grants
        .iter()
        .map(|grant| {
            let time = grant.reset?.checked_sub(interval)?;
            (grant.sent_ms.saturating_sub(1)..=grant.arrived_ms + 1).contains(&time).then_some(time)
        })
        .collect();
    match from_replies {
        Some(times) if case.ours.keeps_permit_log() => (GrantClock::ServerReply, times),
        _ => (GrantClock::LocalArrival, grants.iter().map(|grant| grant.arrived_ms).collect()),
    }
}

/// This machine's clock, unix ms (the clock Redis's `TIME` reads too).
fn local_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |elapsed| elapsed.as_millis() as u64)
}

/// `count` clock skews within ±`MAX_SKEW_MS`, drawn with splitmix64 from `seed`.
fn skews(count: u32, seed: u64) -> Vec<i64> {
    let mut state = seed;
    (0..count).map(|_| (splitmix64(&mut state) % (2 * MAX_SKEW_MS + 1)) as i64 - MAX_SKEW_MS as i64).collect()
}

/// The most of these times (sorted) that fall in any span `[t, t + span)`.
fn most_in_any_span(sorted: &[u64], span: u64) -> usize {
    let mut start = 0;
    let mut most = 0;
    for (end, &time) in sorted.iter().enumerate() {
        while sorted[start] + span <= time {
            start += 1;
        }
        most = most.max(end + 1 - start);
    }
    most
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_the_fullest_span() {
        assert_eq!(most_in_any_span(&[], 10), 0);
        assert_eq!(most_in_any_span(&[0, 5, 9, 10, 19, 20], 10), 3);
        assert_eq!(most_in_any_span(&[7, 7, 7], 1), 3);
    }

    #[test]
    fn skews_are_seeded_and_bounded() {
        let drawn = skews(8, SKEW_SEED);
        assert_eq!(drawn, skews(8, SKEW_SEED));
        assert!(drawn.iter().all(|skew| skew.unsigned_abs() <= MAX_SKEW_MS));
        assert!(drawn.iter().any(|&skew| skew != drawn[0]));
    }
}
