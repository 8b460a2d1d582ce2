//! What one token's load does to another's decisions, on real Redis behind the real bridge.

use std::time::{Duration, Instant};

use edgelimit::limit::{Limiter, Quota};
use edgelimit::ratelimit::{Limit, Options, Ratelimit, Reason};
use edgelimit::{Command, Error, RestClient};
use edgelimit_tests::{Stack, LIMITER_TOKEN};

/// Sends `pipeline` `times` times at once from a thread and runtime of its own (so that the attacker's own JSON work
/// does not hold the threads the victim and the bridge run on); each result is its reply count or an error.
fn attack(url: &str, pipeline: Vec<Command>, times: usize) -> std::thread::JoinHandle<Vec<Result<usize, Error>>> {
    let url = url.to_owned();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let attacker = RestClient::new(&url, LIMITER_TOKEN)
                .unwrap()
                .without_coalescing()
                .with_timeout(Duration::from_secs(30))
                .unwrap();
            let sent: Vec<_> = (0..times)
                .map(|_| {
                    let (attacker, pipeline) = (attacker.clone(), pipeline.clone());
                    tokio::spawn(async move { attacker.pipeline(&pipeline).await.map(|replies| replies.len()) })
                })
                .collect();
            let mut results = Vec::new();
            for task in sent {
                results.push(task.await.unwrap());
            }
            results
        })
    })
}

/// Checks what the attacker got: whole answers, or 429 (its turn did not come in time), never another error.
fn served(results: Vec<Result<usize, Error>>, commands: usize) -> (usize, usize) {
    let (mut served, mut refused) = (0, 0);
    for result in results {
        match result {
            Ok(replies) => {
                assert_eq!(replies, commands);
                served += 1;
            }
            Err(Error::Endpoint { status: 429, .. }) => refused += 1,
            Err(other) => panic!("the attacker got {other}, not a turn or a 429"),
        }
    }
    (served, refused)
}

/// About 1 MiB: `count` decisions of the fixed window on keys of their own, as one `/pipeline`.
fn large_pipeline(sha1: &str, count: usize) -> Vec<Command> {
    (0..count)
        .map(|i| {
            let key = format!("edgelimit:{{attacker}}:{i}");
            Command::new("EVALSHA").args([sha1, "1", &key, "1:1000000:60000"])
        })
        .collect()
}

/// A limiter token sends 8 large pipelines of ordinary decisions at once, again and again, while a victim holding
/// the same profile decides with the client's defaults (1 s timeout, fail open). Bulk requests take turns and run
/// on their own Redis connection, so the victim never waits behind them: no decision of its is left to the failure
/// policy, which would admit it. The attacker's excess waits its turn or gets 429, never 503.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulk_pipelines_of_one_token_never_push_another_clients_decisions_into_the_failure_policy() {
    let stack = Stack::start().await;
    let script = edgelimit::lua::script_named("fixed_window").unwrap();
    let load = Command::new("SCRIPT").args(["LOAD", script.source()]);
    stack.client().command(&load).await.unwrap();
    let attack = attack(stack.url(), large_pipeline(script.sha1(), 9_000), 8);
    let client = RestClient::new(stack.url(), LIMITER_TOKEN).unwrap();
    let quota = Quota::fixed_window(1, Duration::from_secs(3600)).unwrap();
    let victim = Ratelimit::new(client, &[Limit::new(quota)], Options::default()).unwrap();
    let (mut decisions, mut slowest) = (0, Duration::ZERO);
    while !attack.is_finished() {
        let started = Instant::now();
        let outcome = victim.limit(&format!("ip-{decisions}"), 1).await.unwrap();
        slowest = slowest.max(started.elapsed());
        assert_eq!((outcome.reason, outcome.decision.success), (Reason::Decided, true));
        decisions += 1;
    }
    let (served, refused) = served(attack.join().unwrap(), 9_000);
    assert!(served >= 1, "no bulk request was served");
    println!("victim: {decisions} decisions, slowest {slowest:?}; attacker: {served} served, {refused} refused (429)");
}

/// The same attack against a victim's plain limiter: each of its decisions is Redis's, and succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bulk_turn_is_per_token_and_the_main_lane_stays_open() {
    let stack = Stack::start().await;
    let script = edgelimit::lua::script_named("fixed_window").unwrap();
    let load = Command::new("SCRIPT").args(["LOAD", script.source()]);
    stack.client().command(&load).await.unwrap();
    // Many small pipelines of more than BULK_COMMANDS commands: bulk by count, not size.
    let attack = attack(stack.url(), large_pipeline(script.sha1(), 100), 32);
    let quota = Quota::fixed_window(1_000, Duration::from_secs(60)).unwrap();
    let victim = Limiter::new(stack.client_with(LIMITER_TOKEN), "victim", quota).unwrap();
    while !attack.is_finished() {
        assert!(victim.limit("ip", 1).await.unwrap().success);
    }
    served(attack.join().unwrap(), 100);
}
