//! Weighted requests (point 5): a grant of any weight is one member of its log, so a decision costs the same for
//! 1 permit or 3 million (before, one member per permit held Redis for 11 s on `permits: 3e6`), and a denied
//! request's wait stays exact whatever the weights, including after grants were given back or logged out of order.
//! See `tests/tests/adversarial/main.rs`.

use std::time::Duration;

use edgelimit::limit::{Algorithm, Limiter, Quota, Receipt, StateDetail};
use edgelimit::{Command, Decision};
use edgelimit_tests::Stack;

const T0: u64 = 1_700_000_000_000;
const SECOND: Duration = Duration::from_secs(1);

fn sliding_log(stack: &Stack, name: &str, limit: u32) -> Limiter {
    Limiter::new(stack.client(), name, Quota::sliding_log(limit, SECOND).unwrap()).unwrap()
}

fn concurrency(stack: &Stack, name: &str, limit: u32, interval: Duration) -> Limiter {
    let quota = Quota::new(Algorithm::Concurrency, limit, interval, 1).unwrap();
    Limiter::new(stack.client(), name, quota).unwrap()
}

/// The log's members as Redis holds them: (position, permits, expiry), in the zset's order (a member's name is
/// `<position>:<permits>:<run>:<grant id>`).
async fn members(stack: &Stack, limiter: &Limiter) -> Vec<(u64, u32, u64)> {
    let command = Command::new("ZRANGE").arg(limiter.state_key("id")).args(["0", "-1", "WITHSCORES"]);
    let flat = stack.client().command(&command).await.unwrap().into_array().unwrap();
    flat.chunks(2)
        .map(|pair| {
            let member = pair[0].clone().into_string().unwrap();
            let fields: Vec<&str> = member.splitn(4, ':').collect();
            let expiry = pair[1].clone().into_number("expiry").unwrap();
            (fields[0].parse().unwrap(), fields[1].parse().unwrap(), expiry)
        })
        .collect()
}

async fn granted(limiter: &Limiter, at: u64, permits: u32) -> Decision {
    let decision = limiter.clone().at(at).limit("id", permits).await.unwrap();
    assert!(decision.success, "{permits} at +{}: {decision:?}", at - T0);
    decision
}

async fn retry_after(limiter: &Limiter, at: u64, permits: u32) -> u64 {
    let decision = limiter.clone().at(at).peek("id", permits).await.unwrap();
    assert!(!decision.success, "{permits} at +{} should be denied: {decision:?}", at - T0);
    decision.retry_after
}

#[tokio::test]
async fn a_grant_of_millions_of_permits_is_one_member_and_decided_exactly() {
    let stack = Stack::start().await;
    let tokens = sliding_log(&stack, "tokens", u32::MAX);
    let first = granted(&tokens, T0, 3_000_000).await;
    assert_eq!((first.remaining, first.reset), (u64::from(u32::MAX) - 3_000_000, T0 + 1_000));
    let rest = granted(&tokens, T0 + 400, u32::MAX - 3_000_000).await;
    assert_eq!(rest.remaining, 0);
    assert_eq!(
        members(&stack, &tokens).await,
        [(0, 3_000_000, T0 + 1_000), (3_000_000, u32::MAX - 3_000_000, T0 + 1_400)]
    );
    // One more permit waits for the first grant; 3 000 001 more wait for the second.
    assert_eq!(retry_after(&tokens, T0 + 500, 1).await, 500);
    assert_eq!(retry_after(&tokens, T0 + 500, 3_000_000).await, 500);
    assert_eq!(retry_after(&tokens, T0 + 500, 3_000_001).await, 900);

    let leases = concurrency(&stack, "jobs", u32::MAX, SECOND);
    let lease = granted(&leases, T0, 2_000_000_000).await.receipt.unwrap();
    assert_eq!(lease.permits(), 2_000_000_000);
    assert_eq!(members(&stack, &leases).await, [(0, 2_000_000_000, T0 + 1_000)]);
    assert!(leases.clone().at(T0 + 1).release("id", &lease).await.unwrap());
    assert_eq!(members(&stack, &leases).await, []);
}

#[tokio::test]
async fn a_denied_wait_is_exact_over_mixed_weights() {
    let stack = Stack::start().await;
    let log = sliding_log(&stack, "mixed", 10);
    // Positions: 5 permits at [0, 5), 1 at [5, 6), 3 at [6, 9).
    for (offset, permits) in [(0, 5), (10, 1), (20, 3)] {
        granted(&log, T0 + offset, permits).await;
    }
    let at = T0 + 30;
    // (permits asked, when the grant holding the last permit that must free does): 9 held of 10.
    for (permits, frees_at) in [(2, T0 + 1_000), (6, T0 + 1_000), (7, T0 + 1_010), (8, T0 + 1_020), (10, T0 + 1_020)] {
        assert_eq!(retry_after(&log, at, permits).await, frees_at - at, "{permits} permits");
    }
    // Once the first grant frees, its 5 permits are free, exactly then and not a ms before.
    assert_eq!(retry_after(&log, T0 + 999, 6).await, 1);
    assert_eq!(log.clone().at(T0 + 1_000).peek("id", 6).await.unwrap().remaining, 6);
}

#[tokio::test]
async fn a_denied_wait_is_exact_over_a_long_log_of_equal_weights() {
    let stack = Stack::start().await;
    let log = sliding_log(&stack, "even", 3_000);
    for ms in 0..1_000 {
        granted(&log, T0 + ms, 3).await;
    }
    // 3 000 held: k more permits wait for the ceil(k / 3)-th grant, made at ms ceil(k / 3) - 1.
    for permits in [1, 2, 3, 4, 1_500, 2_999, 3_000] {
        let grant_ms = u64::from(permits).div_ceil(3) - 1;
        assert_eq!(retry_after(&log, T0 + 1_000 - 1, permits).await, grant_ms + 1, "{permits} permits");
    }
}

#[tokio::test]
async fn giving_back_a_grant_in_the_middle_keeps_the_count_and_the_waits_exact() {
    let stack = Stack::start().await;
    let log = sliding_log(&stack, "middle", 10);
    let mut receipts: Vec<Receipt> = Vec::new();
    for (offset, permits) in [(0, 3), (1, 2), (2, 4)] {
        receipts.push(granted(&log, T0 + offset, permits).await.receipt.unwrap());
    }
    let at = log.clone().at(T0 + 3);
    assert!(at.release("id", &receipts[1]).await.unwrap());
    assert!(!at.release("id", &receipts[1]).await.unwrap(), "a receipt gives back once");
    // 7 held, positions gapless again: 3 at [0, 3), 4 at [3, 7).
    assert_eq!(members(&stack, &log).await, [(0, 3, T0 + 1_000), (3, 4, T0 + 1_002)]);
    assert_eq!(at.peek("id", 3).await.unwrap().remaining, 3);
    assert_eq!(retry_after(&log, T0 + 3, 4).await, 997);
    assert_eq!(retry_after(&log, T0 + 3, 7).await, 999);
    // A receipt with other permits, or for a grant that has freed, gives back nothing.
    let forged: Receipt = format!("2:{}", receipts[2].mark()).parse().unwrap();
    assert!(!at.release("id", &forged).await.unwrap());
    assert!(!log.clone().at(T0 + 1_000).release("id", &receipts[0]).await.unwrap());
    assert_eq!(log.clone().at(T0 + 1_000).peek("id", 1).await.unwrap().remaining, 6);
}

#[tokio::test]
async fn a_lease_that_frees_before_older_ones_is_logged_in_expiry_order() {
    let stack = Stack::start().await;
    // The same limit with its lease time lowered from 1 s to 100 ms: the older lease still runs to its own expiry.
    let long = concurrency(&stack, "lowered", 10, SECOND);
    let short = concurrency(&stack, "lowered", 10, Duration::from_millis(100));
    granted(&long, T0, 4).await;
    granted(&short, T0 + 10, 3).await;
    assert_eq!(members(&stack, &short).await, [(0, 3, T0 + 110), (3, 4, T0 + 1_000)]);
    // 7 held: 5 more wait for the short lease, 8 more for both.
    assert_eq!(retry_after(&short, T0 + 20, 5).await, 90);
    assert_eq!(retry_after(&short, T0 + 20, 8).await, 980);
    assert_eq!(short.clone().at(T0 + 110).peek("id", 1).await.unwrap().remaining, 6);
}

#[tokio::test]
async fn a_log_in_an_older_layout_is_reported_and_never_granted() {
    let stack = Stack::start().await;
    let log = sliding_log(&stack, "old", 10);
    // What edgelimit wrote before one member per grant: one member per permit.
    let old = Command::new("ZADD").arg(log.state_key("id")).args([(T0 + 500).to_string(), "00ab/1".into()]);
    stack.client().command(&old).await.unwrap();
    let error = log.clone().at(T0).limit("id", 1).await.unwrap_err();
    assert!(error.to_string().contains("no known layout"), "{error}");
    assert_eq!(members_count(&stack, &log).await, 1, "nothing was written");
    let error = log.clone().at(T0).state("id").await.unwrap_err();
    assert!(error.to_string().contains("no known layout"), "{error}");
    // Once the old member has freed, the log is empty and works again.
    let StateDetail::Log { held, .. } = log.clone().at(T0 + 500).state("id").await.unwrap().detail else {
        unreachable!()
    };
    assert_eq!(held, 0);
    granted(&log, T0 + 500, 1).await;
}

async fn members_count(stack: &Stack, limiter: &Limiter) -> i64 {
    let command = Command::new("ZCARD").arg(limiter.state_key("id"));
    stack.client().command(&command).await.unwrap().into_int().unwrap()
}
