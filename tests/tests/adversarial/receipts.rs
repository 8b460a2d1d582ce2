//! Refunds and give-backs (issue point 3 and the rules "Refunds are receipts, not deltas" and "A known denial never
//! becomes an allow"): a refund gives back exactly the grant its receipt names, within its algorithm's rule; a
//! forged receipt is refused before anything is written; across Cluster slots every grant of a request that is not
//! admitted is given back by its receipt, and a denial stays a denial whatever becomes of the give-back.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use edgelimit::limit::{self, AcrossSlots, Algorithm, GiveBack, Limiter, Quota, Receipt};
use edgelimit::{Command, RestClient, Value};
use edgelimit_cli::bridge::{BridgeConfig, InProcessBridge};
use edgelimit_cli::redis_server::RedisServer;
use edgelimit_tests::{Stack, TOKEN};

const T0: u64 = 1_700_000_000_000;
const SECOND: Duration = Duration::from_secs(1);

fn limiter(client: RestClient, name: &str, quota: Quota) -> Limiter {
    Limiter::new(client, name, quota).unwrap()
}

async fn exists(client: &RestClient, key: &str) -> bool {
    client.command(&Command::new("EXISTS").arg(key)).await.unwrap() == Value::Int(1)
}

/// Two limiters in different Cluster slots (their names' hash tags), so that across-slots calls split them.
fn in_other_slots(a: &Limiter, b: &Limiter) {
    assert_ne!(limit::hash_slot(a.config_key()), limit::hash_slot(b.config_key()));
}

#[tokio::test]
async fn a_give_back_takes_from_the_grants_window_never_the_current_one() {
    // The fixed window 2 per 1000 ms: a give-back that lands in the next window used to take from *that*
    // window's count, making room for a third grant there. By receipt it takes from the grant's window only.
    let stack = Stack::start().await;
    let window = limiter(stack.client(), "fw", Quota::fixed_window(2, SECOND).unwrap());
    let denier = limiter(stack.client(), "deny", Quota::sliding_log(1, Duration::from_secs(3600)).unwrap());
    in_other_slots(&window, &denier);
    assert!(denier.clone().at(T0).limit("id", 1).await.unwrap().success);
    let mut tally: BTreeMap<u64, u64> = BTreeMap::new();
    let mut count =
        |receipt: Receipt| *tally.entry(receipt.mark().parse().unwrap()).or_default() += u64::from(receipt.permits());

    // In window T0/1000: one plain grant, then an across-slots request the other limit denies.
    let late = window.clone().at(T0 + 999);
    count(late.limit("id", 1).await.unwrap().receipt.unwrap());
    let denied_at = denier.clone().at(T0 + 999);
    let across = limit::limit_all_across_slots(&[late.request("id", 1), denied_at.request("id", 1)]).await.unwrap();
    assert!(!across.success && across.denied() && across.failed.is_empty());
    assert!(matches!(across.give_back, GiveBack::Done), "{:?}", across.give_back);
    let given_back = across.decisions[0].unwrap();
    assert_eq!((given_back.success, given_back.receipt, given_back.remaining), (true, None, 1));
    // The same grant's receipt refunded again, as a give-back arriving in the next window would: nothing there.
    let grant = late.limit("id", 1).await.unwrap().receipt.unwrap();
    count(grant);
    let next = window.clone().at(T0 + 1000);
    for _ in 0..2 {
        count(next.limit("id", 1).await.unwrap().receipt.unwrap());
    }
    let refunded = next.refund("id", &grant).await.unwrap();
    assert!(!refunded.success, "the grant's window has passed: nothing to give back");
    assert_eq!(refunded.remaining, 0, "the new window's count is untouched");
    assert!(next.limit("id", 1).await.unwrap().receipt.is_none(), "no third grant");
    assert_eq!(tally.into_values().collect::<Vec<_>>(), [2, 2], "at most 2 in each window");
}

#[tokio::test]
async fn when_every_group_denies_the_answer_is_a_plain_denial() {
    let stack = Stack::start().await;
    let a = limiter(stack.client(), "a", Quota::fixed_window(1, SECOND).unwrap()).at(T0);
    let b = limiter(stack.client(), "b", Quota::gcra(1, 1, SECOND).unwrap()).at(T0);
    in_other_slots(&a, &b);
    let request = [a.request("id", 1), b.request("id", 1)];
    assert!(limit::limit_all_across_slots(&request).await.unwrap().success);
    // Nothing granted, nothing to give back (this used to fail: "a pipeline must hold at least one command").
    let denied = limit::limit_all_across_slots(&request).await.unwrap();
    assert!(!denied.success && denied.denied() && denied.failed.is_empty());
    assert!(matches!(denied.give_back, GiveBack::NotNeeded), "{:?}", denied.give_back);
    assert_eq!(denied.retry_after(), 1000);
}

#[tokio::test]
async fn a_group_whose_reply_is_an_error_gets_the_other_groups_grants_given_back() {
    let stack = Stack::start().await;
    let client = stack.client();
    let window = limiter(stack.client(), "window", Quota::fixed_window(5, SECOND).unwrap()).at(T0);
    let leases = limiter(stack.client(), "leases", Quota::concurrency(3, SECOND).unwrap()).at(T0);
    let broken = limiter(stack.client(), "broken", Quota::token_bucket(5, 5, SECOND).unwrap()).at(T0);
    in_other_slots(&window, &leases);
    in_other_slots(&window, &broken);
    in_other_slots(&leases, &broken);
    // Foreign state on the bucket's key: its script's reply is Redis's WRONGTYPE.
    let foreign = Command::new("HSET").arg(broken.state_key("id")).args(["not", "a bucket"]);
    client.command(&foreign).await.unwrap();
    let request = [window.request("id", 2), leases.request("id", 2), broken.request("id", 1)];
    let outcome: AcrossSlots = limit::limit_all_across_slots(&request).await.unwrap();
    assert!(!outcome.success, "not admitted");
    assert!(!outcome.denied(), "no limit that decided denied");
    assert_eq!(outcome.failed.len(), 1);
    assert_eq!(outcome.failed[0].requests, [2]);
    assert_eq!(outcome.failed[0].error.code(), "EDGELIMIT_FOREIGN_STATE");
    assert!(outcome.decisions[2].is_none(), "the failed group's decision is unknown");
    assert!(matches!(outcome.give_back, GiveBack::Done), "{:?}", outcome.give_back);
    // Both grants were given back: Redis holds nothing of them, and the lease the caller never received is released.
    for decision in &outcome.decisions[..2] {
        let decision = decision.unwrap();
        assert!(decision.success && decision.receipt.is_none(), "{decision:?}");
    }
    assert!(!exists(&client, &window.state_key("id")).await);
    assert!(!exists(&client, &leases.state_key("id")).await);
    assert_eq!(leases.peek("id", 3).await.unwrap().remaining, 3);
}

#[tokio::test]
async fn a_denial_stays_a_denial_when_the_give_back_fails() {
    // Deterministic failure of the second round trip only: two bridges over one Redis. The first warms the scripts
    // the decisions use; the second refuses bodies above 1500 bytes, so the decisions (EVALSHA of cached scripts)
    // pass, while the give-back runs the single-limit fixed-window script, which is not cached: its EVAL fallback
    // (the whole script) is refused with HTTP 413.
    let redis = RedisServer::start().await.unwrap();
    let warm_bridge = InProcessBridge::start(BridgeConfig::new(redis.url(), TOKEN)).await.unwrap();
    let mut small = BridgeConfig::new(redis.url(), TOKEN);
    small.max_request_bytes = 1500;
    let small_bridge = InProcessBridge::start(small).await.unwrap();
    let warm = RestClient::new(warm_bridge.url(), TOKEN).unwrap();
    let tight = RestClient::new(small_bridge.url(), TOKEN).unwrap();
    assert!(Algorithm::FixedWindow.script().source().len() > 3000);

    let window = Quota::fixed_window(5, SECOND).unwrap();
    let bucket = Quota::token_bucket(1, 1, Duration::from_secs(3600)).unwrap();
    // Warm: the driver (two requests in one slot) and the bucket's single-limit script, on other identifiers.
    let warm_window = limiter(warm.clone(), "fw", window).at(T0);
    let warm_bucket = limiter(warm.clone(), "tb", bucket).at(T0);
    limit::limit_all(&[warm_window.request("w1", 1), warm_window.request("w2", 1)]).await.unwrap();
    assert!(warm_bucket.limit("spent", 1).await.unwrap().success);

    let tight_window = limiter(tight.clone(), "fw", window).at(T0);
    let tight_bucket = limiter(tight.clone(), "tb", bucket).at(T0);
    in_other_slots(&tight_window, &tight_bucket);
    let request = [tight_window.request("x", 1), tight_window.request("y", 1), tight_bucket.request("spent", 1)];
    let outcome = limit::limit_all_across_slots(&request).await.unwrap();
    assert!(!outcome.success && outcome.denied(), "the bucket's denial is the answer");
    assert!(outcome.failed.is_empty());
    let GiveBack::Failed(error) = &outcome.give_back else {
        panic!("the give-back was refused: {:?}", outcome.give_back);
    };
    assert_eq!(error.code(), "EDGELIMIT_TOO_LARGE", "{error}");
    // Not given back, not retried: the two grants hold their permits until their window ends (under-admission).
    for id in ["x", "y"] {
        assert_eq!(warm_window.peek(id, 1).await.unwrap().remaining, 4, "{id}");
    }
    assert!(outcome.decisions[0].unwrap().receipt.is_some(), "a grant not given back keeps its receipt");
    small_bridge.stop().await.unwrap();
    warm_bridge.stop().await.unwrap();
    redis.stop().await.unwrap();
}

#[tokio::test]
async fn a_bucket_refund_credits_only_what_has_not_refilled() {
    let stack = Stack::start().await;
    for quota in [
        Quota::token_bucket(10, 1, Duration::from_millis(100)).unwrap(),
        Quota::gcra(10, 1, Duration::from_millis(100)).unwrap(),
    ] {
        let bucket = limiter(stack.client(), &quota.algorithm().to_string(), quota);
        let five = bucket.clone().at(T0).limit("id", 5).await.unwrap().receipt.unwrap();
        assert_eq!(five.to_string(), format!("5:{T0}"));
        assert_eq!(bucket.clone().at(T0).limit("id", 4).await.unwrap().remaining, 1);
        // 200 ms later 2 tokens have come back (3 in the bucket); of the grant's 5, 3 are still missing.
        let refunded = bucket.clone().at(T0 + 200).refund("id", &five).await.unwrap();
        assert_eq!((refunded.success, refunded.remaining), (true, 6), "{quota}: credit exactly 3");
        // Once the grant's whole cost has refilled (500 ms), its receipt gives nothing back.
        let later = bucket.clone().at(T0 + 300).limit("id", 5).await.unwrap().receipt.unwrap();
        let spent = bucket.clone().at(T0 + 800).refund("id", &later).await.unwrap();
        assert!(!spent.success, "{quota}: nothing left to give back");
    }
}

#[tokio::test]
async fn a_forged_receipt_is_an_argument_error_and_writes_nothing() {
    let stack = Stack::start().await;
    let bucket = limiter(stack.client(), "tb", Quota::token_bucket(10, 1, SECOND).unwrap()).at(T0);
    let window = limiter(stack.client(), "fw", Quota::fixed_window(10, SECOND).unwrap()).at(T0);
    assert!(bucket.limit("id", 8).await.unwrap().success);
    assert!(window.limit("id", 8).await.unwrap().success);
    let forged = |text: &str| text.parse::<Receipt>().unwrap();
    for (limiter, receipt) in [
        // A grant from the server clock's future would credit the whole cost.
        (&bucket, forged(&format!("8:{}", T0 + 60_000))),
        // More permits than the limit.
        (&bucket, forged(&format!("11:{T0}"))),
        // A window after the current one.
        (&window, forged(&format!("8:{}", T0 / 1000 + 1))),
        // Not a number where the algorithm reads one.
        (&window, forged("8:0000000000000abc")),
    ] {
        let error = limiter.refund("id", &receipt).await.unwrap_err();
        assert_eq!(error.code(), "EDGELIMIT_INVALID_ARGUMENT", "{receipt}: {error}");
        assert!(!error.is_store_unavailable(), "never absorbed by a fail-open policy");
        let message = error.to_string();
        assert!(message.contains("receipt") && !message.contains("user_script"), "{receipt}: {message}");
    }
    assert_eq!(bucket.peek("id", 1).await.unwrap().remaining, 2, "nothing credited");
    assert_eq!(window.peek("id", 1).await.unwrap().remaining, 2, "nothing credited");
    // Malformed text never reaches Redis.
    for text in ["", "8", "8:", "0:1", "8:a/b", "8:\u{0}", &format!("8:{}", "9".repeat(1 << 20))] {
        let error = text.parse::<Receipt>().unwrap_err();
        assert_eq!(error.code(), "EDGELIMIT_INVALID_ARGUMENT", "{text:.20}");
    }
    // A log's receipt names its grant: another id gives nothing back, and the real one only once.
    let log = limiter(stack.client(), "log", Quota::sliding_log(3, SECOND).unwrap()).at(T0);
    let real = log.limit("id", 2).await.unwrap().receipt.unwrap();
    let other = forged(&format!("2:{}-00000000000000ff", T0 + 1000));
    assert!(!log.refund("id", &other).await.unwrap().success);
    // A mark that is not a log's ('<expiry>-<grant id>') is refused before anything is written.
    let error = log.refund("id", &forged("2:00000000000000ff")).await.unwrap_err();
    assert_eq!(error.code(), "EDGELIMIT_INVALID_ARGUMENT", "{error}");
    assert!(log.refund("id", &real).await.unwrap().success);
    assert!(!log.refund("id", &real).await.unwrap().success);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn across_slots_give_backs_racing_plain_decisions_never_exceed_a_window() {
    // Fixed window 5 per 20 ms on the server's clock: two tasks decide across slots against a limit that always
    // denies (so every grant they make is given back, often in a later window than it was made), two take plainly.
    // Every grant is tallied in the window its receipt names (the server's clock), unless its give-back gave it back.
    let stack = Stack::start().await;
    let window = limiter(stack.client(), "race", Quota::fixed_window(5, Duration::from_millis(20)).unwrap());
    let denier = limiter(stack.client(), "never", Quota::concurrency(1, Duration::from_secs(60)).unwrap());
    in_other_slots(&window, &denier);
    assert!(denier.limit("id", 1).await.unwrap().success);
    let tally: Arc<Mutex<BTreeMap<u64, u64>>> = Arc::default();
    // Grants given back, and grants whose give-back found their window over (kept, tallied in their window).
    let (given_back, spent) = (Arc::new(Mutex::new(0u64)), Arc::new(Mutex::new(0u64)));
    let tasks: Vec<_> = (0..4)
        .map(|task| {
            let (window, denier, tally) = (window.clone(), denier.clone(), tally.clone());
            let (given_back, spent) = (given_back.clone(), spent.clone());
            tokio::spawn(async move {
                let count = |receipt: Receipt| {
                    *tally.lock().unwrap().entry(receipt.mark().parse().unwrap()).or_default() +=
                        u64::from(receipt.permits());
                };
                let deadline = tokio::time::Instant::now() + Duration::from_millis(800);
                while tokio::time::Instant::now() < deadline {
                    if task < 2 {
                        let request = [window.request("id", 1), denier.request("id", 1)];
                        let outcome = limit::limit_all_across_slots(&request).await.unwrap();
                        assert!(!outcome.success && outcome.denied());
                        let decision = outcome.decisions[0].unwrap();
                        match decision.receipt {
                            Some(kept) if decision.success => {
                                *spent.lock().unwrap() += 1;
                                count(kept)
                            }
                            _ if decision.success => *given_back.lock().unwrap() += 1,
                            _ => {}
                        }
                    } else if let Some(receipt) = window.limit("id", 1).await.unwrap().receipt {
                        count(receipt);
                    }
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let tally = tally.lock().unwrap();
    let most = tally.values().copied().max().unwrap_or(0);
    let (given_back, spent) = (*given_back.lock().unwrap(), *spent.lock().unwrap());
    eprintln!(
        "{} windows, at most {most} grants in one; {given_back} grants given back, {spent} whose window had ended",
        tally.len()
    );
    assert!(most <= 5, "a window held {most} grants: {tally:?}");
    assert!(most == 5 && given_back > 0, "contention was real: {most} at most, {given_back} given back");
}
