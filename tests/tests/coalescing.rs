//! Coalescing (`src/rest/coalesce.rs`): decisions made at once through one client go to the bridge as one HTTP
//! request, each still exact. Between the client and the real bridge sits a TCP relay that counts the HTTP requests
//! passing through it.
//!
//! Every test runs on Tokio's current-thread runtime (`#[tokio::test]`), where the tasks spawned together all run
//! before the flush that their first one started: so which commands share a request is fixed, not a race.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use edgelimit::limit::{Limiter, Quota};
use edgelimit::{Error, RestClient};
use edgelimit_tests::{Stack, TOKEN};
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
    let line = format!("POST {path} HTTP/1.1\r\n");
    sent.lock()
        .unwrap()
        .windows(line.len())
        .filter(|window| *window == line.as_bytes())
        .count()
}

fn client(url: &str) -> RestClient {
    RestClient::new(url, TOKEN)
        .unwrap()
        .with_timeout(Duration::from_secs(5))
        .unwrap()
}

/// `count` decisions of `limiter` for one identifier, each its own task, all spawned before any runs.
async fn decide_at_once(limiter: &Limiter, count: usize) -> Vec<Result<bool, Error>> {
    let tasks: Vec<_> = (0..count)
        .map(|_| {
            let limiter = limiter.clone();
            tokio::spawn(async move { limiter.limit("id", 1).await.map(|decision| decision.success) })
        })
        .collect();
    let mut outcomes = Vec::new();
    for task in tasks {
        outcomes.push(task.await.unwrap());
    }
    outcomes
}

#[tokio::test]
async fn decisions_made_at_once_share_one_request_and_each_stays_exact() {
    let stack = Stack::start().await;
    let (url, sent) = counting_relay(stack.url()).await;
    let limiter = Limiter::new(
        client(&url),
        "burst",
        Quota::sliding_log(10, Duration::from_secs(60)).unwrap(),
    )
    .unwrap();
    // One decision alone loads the script (NOSCRIPT, then EVAL) and is a request of its own, as without coalescing.
    assert!(limiter.limit("warm-up", 1).await.unwrap().success);
    let alone = requests(&sent, "/");
    assert_eq!(requests(&sent, "/pipeline"), 0);

    let outcomes = decide_at_once(&limiter, 25).await;
    let granted = outcomes.iter().filter(|outcome| matches!(outcome, Ok(true))).count();
    let denied = outcomes.iter().filter(|outcome| matches!(outcome, Ok(false))).count();
    assert_eq!((granted, denied), (10, 15), "{outcomes:?}");
    // The first ten in the pipeline's order are the grants: the script ran once per decision, in turn.
    assert!(
        outcomes[..10].iter().all(|outcome| matches!(outcome, Ok(true))),
        "{outcomes:?}"
    );
    assert_eq!(requests(&sent, "/pipeline"), 1, "25 decisions at once, one request");
    assert_eq!(requests(&sent, "/"), alone, "and no request of their own");
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
    assert_eq!(
        outcomes.iter().filter(|outcome| matches!(outcome, Ok(true))).count(),
        10
    );
    assert_eq!(requests(&sent, "/") - before, 25);
    assert_eq!(requests(&sent, "/pipeline"), 0);
}

#[tokio::test]
async fn a_request_that_fails_as_a_whole_fails_every_decision_in_it_and_admits_none() {
    let mut stack = Stack::start().await;
    let limiter = Limiter::new(
        stack.client(),
        "down",
        Quota::fixed_window(10, Duration::from_secs(60)).unwrap(),
    )
    .unwrap();
    assert!(limiter.limit("warm-up", 1).await.unwrap().success);
    stack.stop_bridge().await;

    let outcomes = decide_at_once(&limiter, 8).await;
    for outcome in outcomes {
        let error = outcome.expect_err("no bridge: no decision");
        assert_eq!(error.code(), "EDGELIMIT_TRANSPORT", "{error}");
        assert!(
            error.is_store_unavailable(),
            "the store is unavailable: a failure policy may absorb it: {error}"
        );
    }
}
