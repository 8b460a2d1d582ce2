//! Scenario 9: a victim's decision latency through the bridge alone and while a neighbour floods it, in one run: 8
//! bulk pipelines from the victim's own token, 1,200 small ones from another `limiter` token.

use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use edgelimit::limit::Quota;
use edgelimit::ratelimit::{Limit, Options, Ratelimit};
use edgelimit::{Command, RestClient};
use indicatif::ProgressBar;
use serde::{Deserialize, Serialize};

use crate::latency::quantile;
use crate::stack::{BenchStack, LIMITER_TOKEN, OTHER_LIMITER_TOKEN};
use crate::support::{ratio, take_turns, Context};

/// Each condition's name and attack (pipelines at once, decisions in each, token); the first is the baseline.
type Attack = Option<(usize, usize, &'static str)>;
const CONDITIONS: [(&str, Attack); 3] = [
    ("no attacker", None),
    ("8 × 9,000 (1 MiB), its token", Some((8, 9_000, LIMITER_TOKEN))),
    ("1,200 × 64, another token", Some((1_200, 64, OTHER_LIMITER_TOKEN))),
];

/// Scenario 9's numbers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Neighbours {
    pub rounds: usize,
    pub seconds: f64,
    pub rows: Vec<NeighbourRow>,
}

/// The victim's decisions under one condition, every round's together; what the attacker's requests got.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NeighbourRow {
    pub condition: String,
    pub decisions: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// Not answered within the client's timeout (1 s) or otherwise failed: the failure policy admitted them.
    pub timeouts: u64,
    /// The attacker's requests answered 200, 429, and anything else (another status, a transport error).
    pub attacker: [u64; 3],
    pub p50_to_alone: Option<f64>,
    pub p99_to_alone: Option<f64>,
}

/// Runs scenario 9.
pub(crate) async fn run(stack: &BenchStack, quick: bool, progress: &ProgressBar) -> Result<Neighbours, String> {
    let (rounds, seconds) = if quick { (1, 1.0) } else { (3, 5.0) };
    progress.set_length((rounds * CONDITIONS.len()) as u64);
    let script = edgelimit::lua::script_named("fixed_window").ok_or("no fixed_window script")?;
    let load = Command::new("SCRIPT").args(["LOAD", script.source()]);
    stack.client().command(&load).await.context("could not load a script")?;
    // The client's defaults, as the npm package's: a 1 s timeout, failures admitted.
    let client = RestClient::new(stack.url(), LIMITER_TOKEN).context("could not make the victim's client")?;
    let quota = Quota::fixed_window(1, Duration::from_secs(3600)).context("invalid benchmark quota")?;
    let victim = Ratelimit::new(client, &[Limit::new(quota)], Options::default()).context("no victim")?;
    let runs = take_turns(rounds, CONDITIONS.len(), true, async |which, round| {
        let (name, attack) = CONDITIONS[which];
        progress.set_message(name);
        // The attack starts 0.5 s before the victim's decisions are counted, and ends with them.
        let (started, warm_up) = (Instant::now(), Duration::from_millis(500));
        let until = started + warm_up + Duration::from_secs_f64(seconds);
        let attacker = attack.map(|(at_once, count, token)| {
            let sha1 = script.sha1();
            let decision = |i| format!(r#"["EVALSHA","{sha1}","1","edgelimit:{{a}}:{i}","1:1000000:60000"]"#);
            let body = format!("[{}]", (0..count).map(decision).collect::<Vec<_>>().join(","));
            attack_until(until, format!("{}/pipeline", stack.url()), token, at_once, body)
        });
        tokio::time::sleep(warm_up).await;
        let (mut latencies, mut timeouts) = (Vec::new(), 0);
        while Instant::now() < until {
            let sent = Instant::now();
            let outcome = victim.limit(&format!("{which}-{round}-{}", latencies.len()), 1).await;
            latencies.push(sent.elapsed().as_secs_f64() * 1000.0);
            timeouts += u64::from(outcome.context("the victim's decision failed")?.error.is_some());
        }
        let attacker = tokio::task::spawn_blocking(move || attacker.map(|thread| thread.join()));
        let attacker = attacker.await.ok().and_then(|joined| joined.transpose().ok());
        progress.inc(1);
        Ok((latencies, timeouts, attacker.ok_or("the attacker failed")?.unwrap_or_default()))
    })
    .await?;
    let rows = runs.into_iter().zip(CONDITIONS).map(|(runs, (name, _))| {
        let mut latencies: Vec<f64> = runs.iter().flat_map(|run| run.0.iter().copied()).collect();
        latencies.sort_by(f64::total_cmp);
        NeighbourRow {
            condition: name.to_owned(),
            decisions: latencies.len() as u64,
            p50_ms: quantile(&latencies, 0.5),
            p99_ms: quantile(&latencies, 0.99),
            max_ms: latencies.last().copied().unwrap_or_default(),
            timeouts: runs.iter().map(|run| run.1).sum(),
            attacker: [0, 1, 2].map(|i| runs.iter().map(|run| run.2[i]).sum()),
            p50_to_alone: None,
            p99_to_alone: None,
        }
    });
    let mut rows: Vec<NeighbourRow> = rows.collect();
    let (p50, p99) = (rows[0].p50_ms, rows[0].p99_ms);
    for row in &mut rows {
        (row.p50_to_alone, row.p99_to_alone) = (ratio(row.p50_ms, p50), ratio(row.p99_ms, p99));
    }
    Ok(Neighbours { rounds, seconds, rows })
}

/// `at_once` lanes each posting `body` (serialised once) to `url` again and again until `until`, on a thread and
/// runtime of their own, so that the attacker's own work holds none of the threads the victim and the bridge run on.
/// How many of its requests were answered 200, 429, or otherwise.
fn attack_until(until: Instant, url: String, token: &str, at_once: usize, body: String) -> JoinHandle<[u64; 3]> {
    let token = token.to_owned();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
        runtime.expect("a runtime for the attacker").block_on(async move {
            let http = reqwest::Client::builder().timeout(Duration::from_secs(30)).build();
            let http = http.expect("an HTTP client for the attacker");
            let mut lanes = tokio::task::JoinSet::new();
            for _ in 0..at_once {
                let (http, url, token, body) = (http.clone(), url.clone(), token.clone(), body.clone());
                lanes.spawn(async move {
                    let mut answered = [0; 3];
                    while Instant::now() < until {
                        let reply = async {
                            let reply = http.post(&url).bearer_auth(&token).body(body.clone()).send().await?;
                            let status = reply.status().as_u16();
                            reply.bytes().await.map(|_| status)
                        };
                        answered[match reply.await {
                            Ok(200) => 0,
                            Ok(429) => 1,
                            _ => 2,
                        }] += 1;
                    }
                    answered
                });
            }
            let lanes = lanes.join_all().await;
            [0, 1, 2].map(|i| lanes.iter().map(|lane| lane[i]).sum())
        })
    })
}
