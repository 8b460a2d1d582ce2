//! Coalescing (`src/rest/coalesce.rs`) and merging (`src/limit/merged.rs`): decisions made at once through one
//! client go to the bridge as one HTTP request, and one limiter's as one script call, each still exact. Between the
//! client and the real bridge sits a TCP relay that counts the HTTP requests (and the script calls in them) passing
//! through it.
//!
//! Every test runs on Tokio's current-thread runtime (`#[tokio::test]`), where the tasks spawned together all run
//! before the flush that their first one started: so which commands share a request is fixed, not a race.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use edgelimit::limit::{self, KeyLayout, Limiter, Quota};
use edgelimit::{Error, RestClient};
use edgelimit_tests::{spawned_at_once, Stack, TOKEN};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A TCP relay to `upstream` that keeps every byte sent to it; returns its URL and those bytes.
async fn counting_relay(upstream: &str) -> (String, Arc<Mutex<Vec<u8>>>) {
    let upstream = upstream.trim_start_matches("http://").to_owned();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let sent = Arc::new(Mutex::new(Vec::new()));
    let record = sent.clone();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let server = TcpStream::connect(&upstream).await.unwrap();
            let (mut from_client, mut to_client) = client.into_split();
            let (mut from_server, mut to_server) = server.into_split();
            let record = record.clone();
            tokio::spawn(async move {
                let mut buffer = vec![0; 64 * 1024];
                while let Ok(read @ 1..) = from_client.read(&mut buffer).await {
                    record.lock().unwrap().extend_from_slice(&buffer[..read]);
                    if to_server.write_all(&buffer[..read]).await.is_err() {
                        break;
                    }
                }
            });
            tokio::spawn(async move {
                let _ = tokio::io::copy(&mut from_server, &mut to_client).await;
            });
        }
    });
    (url, sent)
}

/// How many HTTP requests to `path` the relay has carried (the request lines; the bodies are JSON arrays).
fn requests(sent: &Mutex<Vec<u8>>, path: &str) -> usize {
    occurrences(sent, &format!("POST {path} HTTP/1.1\r\n"))
}

/// How many times `text` passed the relay (e.g. `"EVALSHA"`: the script calls, each a JSON string in a body).
fn occurrences(sent: &Mutex<Vec<u8>>, text: &str) -> usize {
    sent.lock().unwrap().windows(text.len()).filter(|window| *window == text.as_bytes()).count()
}

fn client(url: &str) -> RestClient {
    RestClient::new(url, TOKEN).unwrap().with_timeout(Duration::from_secs(5)).unwrap()
}

/// `count` decisions of `limiter` for one identifier, each its own task, all spawned before any runs.
async fn decide_at_once(limiter: &Limiter, count: usize) -> Vec<Result<bool, Error>> {
    let decisions: Vec<_> = (0..count).map(|_| (limiter.clone(), "id".to_owned())).collect();
    decide_all_at_once(decisions).await
}

/// One decision of each limiter for its identifier, each its own task, all spawned before any runs.
async fn decide_all_at_once(decisions: Vec<(Limiter, String)>) -> Vec<Result<bool, Error>> {
    spawned_at_once(
        decisions
            .into_iter()
            .map(|(limiter, id)| async move { limiter.limit(id.as_str(), 1).await.map(|decision| decision.success) }),
    )
    .await
}

#[tokio::test]
async fn one_limiters_decisions_made_at_once_are_one_script_call_and_each_stays_exact() {
    let stack = Stack::start().await;
    let (url, sent) = counting_relay(stack.url()).await;
    let limiter =
        Limiter::new(client(&url), "burst", Quota::sliding_log(10, Duration::from_secs(60)).unwrap()).unwrap();
    // One decision alone loads the script (NOSCRIPT, then EVAL) and is a request of its own, as without coalescing.
    assert!(limiter.limit("warm-up", 1).await.unwrap().success);
    let alone = requests(&sent, "/");
    assert_eq!(requests(&sent, "/pipeline"), 0);

    let outcomes = decide_at_once(&limiter, 25).await;
    let granted = outcomes.iter().filter(|outcome| matches!(outcome, Ok(true))).count();
    let denied = outcomes.iter().filter(|outcome| matches!(outcome, Ok(false))).count();
    assert_eq!((granted, denied), (10, 15), "{outcomes:?}");
    // The first ten in the call's order are the grants: the script decided them one after the other.
    assert!(outcomes[..10].iter().all(|outcome| matches!(outcome, Ok(true))), "{outcomes:?}");
    // One script call: EVALSHA of the batch/sliding_log script, NOSCRIPT, then EVAL (its first use loads it).
    assert_eq!(requests(&sent, "/") - alone, 2, "25 decisions at once, one call");
    assert_eq!(requests(&sent, "/pipeline"), 0);

    // Loaded now: 25 more at once are one request, one EVALSHA.
    let (before, scripts) = (requests(&sent, "/"), occurrences(&sent, "\"EVALSHA\""));
    let outcomes = decide_at_once(&limiter.clone().with_prefix("again").unwrap(), 25).await;
    assert_eq!(outcomes.iter().filter(|outcome| matches!(outcome, Ok(true))).count(), 10);
    assert_eq!(requests(&sent, "/") - before, 1);
    assert_eq!(occurrences(&sent, "\"EVALSHA\"") - scripts, 1);
}

#[tokio::test]
async fn a_burst_larger_than_one_call_goes_as_several_and_every_decision_is_decided() {
    let stack = Stack::start().await;
    let (url, sent) = counting_relay(stack.url()).await;
    let limiter = Limiter::new(client(&url), "flood", Quota::sliding_log(5, Duration::from_secs(60)).unwrap()).unwrap();
    // Review: 14,000 decisions at once were one script call, larger than the bridge takes a request: all failed.
    let padding = "x".repeat(40);
    let decisions: Vec<_> = (0..15_000).map(|i| (limiter.clone(), format!("client-{i:05}-{padding}"))).collect();
    let outcomes = decide_all_at_once(decisions).await;
    let failed = outcomes.iter().find(|outcome| !matches!(outcome, Ok(true)));
    assert!(failed.is_none(), "{failed:?}");
    // In calls of at most 256 decisions: at least 59 script calls.
    assert!(occurrences(&sent, "\"EVAL") >= 59);
}

#[tokio::test]
async fn two_limiters_decisions_at_once_are_one_request_with_one_script_call_each() {
    let stack = Stack::start().await;
    let (url, sent) = counting_relay(stack.url()).await;
    let client = client(&url);
    let window = Quota::fixed_window(3, Duration::from_secs(60)).unwrap();
    let log = Quota::sliding_log(2, Duration::from_secs(60)).unwrap();
    let (window, log) = (Limiter::new(client.clone(), "w", window).unwrap(), Limiter::new(client, "l", log).unwrap());
    // Load both batch scripts.
    decide_all_at_once(vec![(window.clone(), "warm".into()), (window.clone(), "warm".into())]).await;
    decide_all_at_once(vec![(log.clone(), "warm".into()), (log.clone(), "warm".into())]).await;
    let (pipelines, scripts) = (requests(&sent, "/pipeline"), occurrences(&sent, "\"EVALSHA\""));
    let mut decisions = Vec::new();
    for _ in 0..5 {
        decisions.extend([(window.clone(), "id".to_owned()), (log.clone(), "id".to_owned())]);
    }
    let outcomes = decide_all_at_once(decisions).await;
    let granted = |of: usize| (outcomes.iter().skip(of).step_by(2)).filter(|o| matches!(o, Ok(true))).count();
    assert_eq!((granted(0), granted(1)), (3, 2), "{outcomes:?}");
    assert_eq!(requests(&sent, "/pipeline") - pipelines, 1);
    assert_eq!(occurrences(&sent, "\"EVALSHA\"") - scripts, 2);
}

#[tokio::test]
async fn a_decision_the_script_refuses_is_that_decisions_error_alone() {
    let stack = Stack::start().await;
    let limiter =
        Limiter::new(stack.client(), "mixed", Quota::fixed_window(10, Duration::from_secs(60)).unwrap()).unwrap();
    // Another program's state under one identifier's key: a list where the window's string should be.
    let foreign = edgelimit::Command::new("RPUSH").arg(limiter.state_key("foreign")).arg("x");
    stack.client().command(&foreign).await.unwrap();
    let mut decisions: Vec<_> = (0..4).map(|_| (limiter.clone(), "id".to_owned())).collect();
    decisions.insert(2, (limiter.clone(), "foreign".to_owned()));
    let outcomes = decide_all_at_once(decisions).await;
    assert!(matches!(&outcomes[2], Err(Error::ForeignState(_))), "{outcomes:?}");
    for outcome in [&outcomes[0], &outcomes[1], &outcomes[3], &outcomes[4]] {
        assert!(matches!(outcome, Ok(true)), "{outcomes:?}");
    }
}

#[tokio::test]
async fn on_a_cluster_each_slots_decisions_are_a_call_of_their_own() {
    let stack = Stack::start_cluster().await;
    // Per identifier: identifiers spread over the masters, and one script may touch one slot only.
    let limiter = Limiter::new(stack.client(), "spread", Quota::gcra(2, 1, Duration::from_secs(60)).unwrap())
        .unwrap()
        .with_layout(KeyLayout::PerIdentifier)
        .unwrap();
    let mut decisions = Vec::new();
    for id in ["a", "b", "c", "d"] {
        decisions.extend((0..3).map(|_| (limiter.clone(), id.to_owned())));
    }
    let outcomes = decide_all_at_once(decisions).await;
    // Each identifier: its burst of 2 granted, the third denied; no CROSSSLOT.
    for (i, outcome) in outcomes.iter().enumerate() {
        assert!(matches!(outcome, Ok(granted) if *granted == (i % 3 < 2)), "{i}: {outcomes:?}");
    }
}

#[tokio::test]
async fn without_coalescing_each_decision_is_a_request_of_its_own() {
    let stack = Stack::start().await;
    let (url, sent) = counting_relay(stack.url()).await;
    let quota = Quota::sliding_log(10, Duration::from_secs(60)).unwrap();
    let limiter = Limiter::new(client(&url).without_coalescing(), "burst", quota).unwrap();
    assert!(limiter.limit("warm-up", 1).await.unwrap().success);
    let before = requests(&sent, "/");

    let outcomes = decide_at_once(&limiter, 25).await;
    assert_eq!(outcomes.iter().filter(|outcome| matches!(outcome, Ok(true))).count(), 10);
    assert_eq!(requests(&sent, "/") - before, 25);
    assert_eq!(requests(&sent, "/pipeline"), 0);
}

#[tokio::test]
async fn a_request_that_fails_as_a_whole_fails_every_decision_in_it_and_admits_none() {
    let mut stack = Stack::start().await;
    let limiter =
        Limiter::new(stack.client(), "down", Quota::fixed_window(10, Duration::from_secs(60)).unwrap()).unwrap();
    assert!(limiter.limit("warm-up", 1).await.unwrap().success);
    stack.stop_bridge().await;

    let outcomes = decide_at_once(&limiter, 8).await;
    for outcome in outcomes {
        let error = outcome.expect_err("no bridge: no decision");
        assert_eq!(error.code(), "EDGELIMIT_TRANSPORT", "{error}");
        assert!(error.is_store_unavailable(), "the store is unavailable: a failure policy may absorb it: {error}");
    }
}

/// After Redis lost its scripts (a restart, a failover), every caller deciding at once falls back to `EVAL` with
/// the script's text: together more than the bridge takes in one request (1 MiB). Sent in requests of a bounded
/// size, they load the script and every decision is made. (In one request, each such turn was refused whole, the
/// script never loaded, and every decision failed from then on.)
#[tokio::test]
async fn callers_falling_back_to_a_scripts_text_at_once_still_decide() {
    let stack = Stack::start().await;
    let client = stack.client();
    let minute = Duration::from_secs(60);
    let window = Limiter::new(client.clone(), "a", Quota::fixed_window(1000, minute).unwrap()).unwrap();
    let log = Limiter::new(client.clone(), "b", Quota::sliding_log(1000, minute).unwrap()).unwrap();
    for round in 0..2 {
        client.command(&edgelimit::Command::new("SCRIPT").arg("FLUSH")).await.unwrap();
        let decisions = (0..80).map(|i| {
            let (window, log) = (window.clone(), log.clone());
            async move {
                let id = format!("{round}-{i}");
                limit::limit_all(&[window.request(id.as_str(), 1), log.request(id.as_str(), 1)])
                    .await
                    .map(|decisions| decisions.success)
            }
        });
        for outcome in spawned_at_once(decisions).await {
            assert!(matches!(outcome, Ok(true)), "round {round}: {outcome:?}");
        }
    }
}
