//! The algorithm family against real Redis through the real bridge: exact decisions at explicit times, weighted
//! requests, several limits at once, stored configs and quota changes, leases, refunds by receipt, TTLs under server
//! time, and hand-made garbage.

use std::time::Duration;

use edgelimit::limit::{self, Algorithm, GiveBack, Limiter, Quota, Receipt};
use edgelimit::ratelimit::{Limit, Options, Ratelimit};
use edgelimit::rest::Script;
use edgelimit::{Command, Decision, Error, Value};
use edgelimit_tests::Stack;

const T0: u64 = 1_700_000_000_000;
const SECOND: Duration = Duration::from_secs(1);

fn limiter(stack: &Stack, name: &str, quota: Quota) -> Limiter {
    Limiter::new(stack.client(), name, quota).unwrap()
}

/// A decision of `limiter` at `at` for `permits`, its receipt checked (a grant, and only a grant, has one) and then
/// left out, so that it compares with [`decision`].
async fn take(limiter: &Limiter, at: u64, permits: u32) -> Decision {
    without_receipt(limiter.clone().at(at).limit("id", permits).await.unwrap())
}

fn without_receipt(mut decision: Decision) -> Decision {
    assert_eq!(decision.receipt.is_some(), decision.success, "a grant, and only a grant, has a receipt: {decision:?}");
    decision.receipt = None;
    decision
}

fn decision(success: bool, limit: u64, remaining: u64, reset: u64, retry_after: u64) -> Decision {
    Decision { success, limit, remaining, reset, retry_after, receipt: None }
}

#[tokio::test]
async fn token_bucket_refills_continuously_and_waits_exactly_for_weighted_requests() {
    let stack = Stack::start().await;
    // 5 tokens, 3 per second: a token every 333.3 ms, with no rounding drift.
    let bucket = limiter(&stack, "tb", Quota::token_bucket(5, 3, SECOND).unwrap());
    assert_eq!(take(&bucket, T0, 5).await, decision(true, 5, 0, T0 + 1667, 0));
    // Two tokens need 2000/3 ms = 666.7 → 667 ms.
    assert_eq!(take(&bucket, T0, 2).await, decision(false, 5, 0, T0 + 1667, 667));
    assert!(!take(&bucket, T0 + 666, 2).await.success);
    // Full again 5000/3 ms after this grant.
    assert_eq!(take(&bucket, T0 + 667, 2).await, decision(true, 5, 0, T0 + 2334, 0));
    // 5 tokens refill in 5000/3 ms: exactly 5 by T0 + 2334 (a drifting bucket shows 4), not yet at T0 + 2333.
    assert_eq!(bucket.clone().at(T0 + 2333).peek("id", 1).await.unwrap().remaining, 4);
    assert_eq!(take(&bucket, T0 + 2334, 1).await.remaining, 4);
}

#[tokio::test]
async fn gcra_decides_like_the_token_bucket_with_one_timestamp() {
    let stack = Stack::start().await;
    let gcra = limiter(&stack, "gcra", Quota::gcra(5, 3, SECOND).unwrap());
    assert_eq!(take(&gcra, T0, 5).await, decision(true, 5, 0, T0 + 1667, 0));
    assert_eq!(take(&gcra, T0, 2).await, decision(false, 5, 0, T0 + 1667, 667));
    assert_eq!(take(&gcra, T0 + 667, 2).await, decision(true, 5, 0, T0 + 2334, 0));
    let stored = stack.client().command(&Command::new("GET").arg(gcra.state_key("id"))).await.unwrap();
    // The first grant set TAT = T0 + 5000/3 ms; at T0 + 667 that left a debt of 2999/3 ms, plus 2000/3 ms for this
    // grant: TAT = T0 + 667 + 4999/3 ms = T0 + 2333 ms + 1/3 ms, whole ms and the remainder in thirds, tagged.
    assert_eq!(stored.into_string().unwrap(), format!("gcra:{}:1", T0 + 2333));
}

#[tokio::test]
async fn fixed_window_counts_per_aligned_window_and_denials_count_nothing() {
    let stack = Stack::start().await;
    let window = limiter(&stack, "fw", Quota::fixed_window(3, SECOND).unwrap());
    let start = T0 + 250; // T0 is a whole second, so this window ends at T0 + 1000.
    assert_eq!(take(&window, start, 2).await, decision(true, 3, 1, T0 + 1000, 0));
    assert_eq!(take(&window, start, 2).await, decision(false, 3, 1, T0 + 1000, 750));
    assert_eq!(take(&window, start + 10, 1).await, decision(true, 3, 0, T0 + 1000, 0));
    assert_eq!(take(&window, T0 + 1000, 3).await, decision(true, 3, 0, T0 + 2000, 0));
}

#[tokio::test]
async fn sliding_window_weighs_the_previous_window_exactly() {
    let stack = Stack::start().await;
    let sliding = limiter(&stack, "sw", Quota::sliding_window(10, SECOND).unwrap());
    assert!(take(&sliding, T0 + 500, 10).await.success);
    // 250 ms into the next window the previous 10 weigh 7.5: 2 fit (9.5), 3 do not (10.5).
    assert_eq!(take(&sliding, T0 + 1250, 3).await, decision(false, 10, 2, T0 + 2000, 50));
    assert_eq!(take(&sliding, T0 + 1300, 3).await, decision(true, 10, 0, T0 + 3000, 0));
}

#[tokio::test]
async fn concurrency_leases_are_released_or_expire() {
    let stack = Stack::start().await;
    let slots = limiter(&stack, "conc", Quota::concurrency(2, Duration::from_secs(30)).unwrap());
    let first = slots.clone().at(T0).limit("id", 1).await.unwrap();
    let second = slots.clone().at(T0 + 10).limit("id", 1).await.unwrap();
    assert!(first.success && second.success);
    let (first_lease, second_lease) = (first.receipt.unwrap(), second.receipt.unwrap());
    assert_ne!(first_lease, second_lease);
    // Full: the wait is until the oldest lease expires (an upper bound: holders usually release sooner).
    assert_eq!(take(&slots, T0 + 20, 1).await, decision(false, 2, 0, T0 + 30_010, 29_980));
    let at = slots.clone().at(T0 + 30);
    assert!(at.release("id", &first_lease).await.unwrap());
    assert!(!at.release("id", &first_lease).await.unwrap(), "a lease is released once");
    assert!(take(&slots, T0 + 40, 1).await.success);
    // The second lease expires at T0 + 30 010 without being released.
    let after_expiry = take(&slots, T0 + 30_010, 1).await;
    assert_eq!((after_expiry.success, after_expiry.remaining), (true, 0));
    assert!(!slots.clone().at(T0 + 30_020).release("id", &second_lease).await.unwrap());
    // Well formed, but naming no lease this limit holds.
    let forged: Receipt = "1:1700000001000-000000000000002a".parse().unwrap();
    assert!(!at.release("id", &forged).await.unwrap());
}

#[tokio::test]
async fn sliding_log_frees_each_grant_exactly_one_interval_later() {
    let stack = Stack::start().await;
    let log = limiter(&stack, "sl", Quota::sliding_log(5, SECOND).unwrap());
    assert_eq!(take(&log, T0, 2).await, decision(true, 5, 3, T0 + 1000, 0));
    assert_eq!(take(&log, T0 + 400, 3).await, decision(true, 5, 0, T0 + 1400, 0));
    // Weighted waits, exact: 1 permit fits once T0's grant frees, 3 only once T0 + 400's frees too.
    assert_eq!(take(&log, T0 + 400, 1).await, decision(false, 5, 0, T0 + 1400, 600));
    assert_eq!(take(&log, T0 + 400, 3).await, decision(false, 5, 0, T0 + 1400, 1000));
    assert!(!take(&log, T0 + 999, 1).await.success, "not 1 ms sooner");
    let members = Command::new("ZCARD").arg(log.state_key("id"));
    assert_eq!(
        stack.client().command(&members).await.unwrap(),
        Value::Int(2),
        "one member per grant; denials log nothing"
    );
    // At exactly T0 + 1000 the grant made at T0 is out of the window (T0, T0 + 1000]: its 2 permits are free.
    assert_eq!(take(&log, T0 + 1000, 2).await, decision(true, 5, 0, T0 + 2000, 0));
    assert_eq!(take(&log, T0 + 1000, 1).await.retry_after, 400);
    // A grant's id only names it in its receipt: a reused id is another grant, logged at its own position, so
    // nothing is counted once for two.
    let call = ["1:5:1000", "same-id"];
    let script = Algorithm::SlidingLog.script();
    for _ in 0..2 {
        script.run(&stack.client(), &["s"], &call).await.unwrap();
    }
    let held = Command::new("ZCARD").arg("s");
    assert_eq!(stack.client().command(&held).await.unwrap(), Value::Int(2));
}

#[tokio::test]
async fn sliding_log_refunds_the_grant_its_receipt_names_and_its_key_expires_with_the_newest_left() {
    let stack = Stack::start().await;
    let client = stack.client();
    let log = limiter(&stack, "sl-refund", Quota::sliding_log(4, SECOND).unwrap());
    let ttl = || async {
        let command = Command::new("PTTL").arg(log.state_key("id"));
        client.command(&command).await.unwrap().into_int().unwrap()
    };
    let older = log.clone().at(T0).limit("id", 1).await.unwrap().receipt.unwrap();
    let newer = log.clone().at(T0 + 100).limit("id", 2).await.unwrap().receipt.unwrap();
    assert_eq!((older.permits(), newer.permits()), (1, 2));
    // Explicit time: the key lives a minute past the newest grant's end (T0 + 1100), seen from T0 + 100.
    assert!((60_900..=61_000).contains(&ttl().await));
    // The older grant goes back, not the newest: the limit is whole again when T0 + 100's grant frees.
    let refunded = log.clone().at(T0 + 200).refund("id", &older).await.unwrap();
    assert_eq!(refunded, decision(true, 4, 2, T0 + 1100, 0));
    let again = log.clone().at(T0 + 200).refund("id", &older).await.unwrap();
    assert_eq!(again, decision(false, 4, 2, T0 + 1100, 0), "a grant goes back once");
    // Refunding the newest, the key then expires with nothing left: the limit is whole.
    assert_eq!(log.clone().at(T0 + 300).refund("id", &newer).await.unwrap(), decision(true, 4, 4, T0 + 300, 0));
    assert_eq!(ttl().await, -2, "an empty log has no key");
    // A grant that has left the window gives nothing back.
    let gone = log.clone().at(T0 + 400).limit("id", 1).await.unwrap().receipt.unwrap();
    let late = log.clone().at(T0 + 1400).refund("id", &gone).await.unwrap();
    assert_eq!(late, decision(false, 4, 4, T0 + 1400, 0));
}

#[tokio::test]
async fn several_limits_are_all_or_nothing() {
    let stack = Stack::start().await;
    let per_ip = limiter(&stack, "ip", Quota::fixed_window(2, SECOND).unwrap()).at(T0);
    let per_key = limiter(&stack, "key", Quota::gcra(10, 10, SECOND).unwrap()).at(T0);
    let global = limiter(&stack, "global", Quota::sliding_window(100, SECOND).unwrap()).at(T0);
    let request = || [per_ip.request("1.2.3.4", 1), per_key.request("k", 1), global.request("all", 1)];
    for _ in 0..2 {
        assert!(limit::limit_all(&request()).await.unwrap().success);
    }
    let denied = limit::limit_all(&request()).await.unwrap();
    assert!(!denied.success);
    let verdicts: Vec<bool> = denied.decisions.iter().map(|d| d.success).collect();
    assert_eq!(verdicts, [false, true, true], "only the per-IP limit denies");
    assert_eq!(denied.retry_after(), 1000);
    // The others allowed but recorded nothing: 8 and 98 left, as after two requests.
    let remaining: Vec<u64> = denied.decisions.iter().map(|d| d.remaining).collect();
    assert_eq!(remaining, [0, 8, 98]);
    assert_eq!(per_key.peek("k", 1).await.unwrap().remaining, 8);
    // Another IP under the same key and global limits is unaffected.
    let other = [per_ip.request("5.6.7.8", 1), per_key.request("k", 1), global.request("all", 1)];
    assert!(limit::limit_all(&other).await.unwrap().success);
}

#[tokio::test]
async fn one_limit_named_twice_in_a_call_is_refused_not_granted_twice() {
    let stack = Stack::start().await;
    // Review: limit_all of the same limit and identifier twice, 6 + 6 permits, granted 12 on a limit of 10.
    for quota in [
        Quota::sliding_log(10, SECOND).unwrap(),
        Quota::fixed_window(10, SECOND).unwrap(),
        Quota::concurrency(10, SECOND).unwrap(),
    ] {
        let log = limiter(&stack, &format!("twice-{}", quota.algorithm()), quota);
        let error = limit::limit_all(&[log.request("x", 6), log.request("x", 6)]).await.unwrap_err();
        assert_eq!(error.code(), "EDGELIMIT_INVALID_ARGUMENT", "{error}");
        assert!(error.to_string().contains("named twice"), "{error}");
        assert!(limit::peek_all(&[log.request("x", 1), log.request("x", 1)]).await.is_err());
        assert_eq!(log.peek("x", 1).await.unwrap().remaining, 10, "nothing was taken");
        // Another identifier under the same limit is another state.
        assert!(limit::limit_all(&[log.request("x", 6), log.request("y", 6)]).await.unwrap().success);
    }
}

#[tokio::test]
async fn a_sliding_log_decides_with_other_limits_in_one_round_trip() {
    let stack = Stack::start().await;
    let log = limiter(&stack, "log", Quota::sliding_log(2, SECOND).unwrap()).at(T0);
    let bucket = limiter(&stack, "bucket", Quota::token_bucket(10, 10, SECOND).unwrap()).at(T0);
    let request = || [log.request("ip", 1), bucket.request("ip", 1)];
    for _ in 0..2 {
        let granted = limit::limit_all(&request()).await.unwrap();
        assert!(granted.success);
        let receipt = granted.decisions[0].receipt.unwrap();
        let (expiry, id) = receipt.mark().split_once('-').unwrap();
        assert_eq!(
            (receipt.permits(), expiry, id.len()),
            (1, "1700000001000", 16),
            "a sliding log's receipt names its grant: when it frees, and its id"
        );
    }
    let denied = limit::limit_all(&request()).await.unwrap();
    assert!(denied.decisions.iter().all(|d| d.receipt.is_none()), "nothing granted, no receipt");
    assert_eq!(denied.decisions[0], decision(false, 2, 0, T0 + 1000, 1000));
    assert_eq!(denied.decisions[1], decision(true, 10, 8, T0 + 200, 0));
    assert_eq!(bucket.peek("ip", 1).await.unwrap().remaining, 8, "the bucket recorded nothing");
    // The other way round: the bucket denies, and the log, which allowed, logs nothing.
    let too_many = [log.request("other", 1), bucket.request("ip", 9)];
    let denied = limit::limit_all(&too_many).await.unwrap();
    let verdicts: Vec<bool> = denied.decisions.iter().map(|d| d.success).collect();
    assert_eq!((denied.success, verdicts), (false, vec![true, false]));
    assert!(!log.reset("other").await.unwrap(), "no state for the log's identifier");
}

#[tokio::test]
async fn limits_across_cluster_slots_use_one_pipeline_and_give_back_partial_grants() {
    let stack = Stack::start().await;
    let per_ip = limiter(&stack, "ip", Quota::fixed_window(1, SECOND).unwrap()).at(T0);
    let slots = limiter(&stack, "slots", Quota::concurrency(5, SECOND).unwrap()).at(T0);
    let bucket = limiter(&stack, "bucket", Quota::token_bucket(5, 5, SECOND).unwrap()).at(T0);
    assert_ne!(limit::hash_slot(per_ip.config_key()), limit::hash_slot(bucket.config_key()));
    let request = [per_ip.request("a", 1), slots.request("a", 2), bucket.request("a", 3)];
    let granted = limit::limit_all_across_slots(&request).await.unwrap();
    assert!(granted.success && matches!(granted.give_back, GiveBack::NotNeeded));
    assert!(granted.decisions.iter().all(|d| d.unwrap().receipt.is_some()));
    let denied = limit::limit_all_across_slots(&request).await.unwrap();
    assert!(!denied.success && denied.denied() && denied.failed.is_empty());
    assert!(matches!(denied.give_back, GiveBack::Done), "{:?}", denied.give_back);
    assert!(!denied.decisions[0].unwrap().success);
    // The other two granted in their own slots, then were given back.
    assert_eq!(slots.peek("a", 1).await.unwrap().remaining, 3);
    assert_eq!(bucket.peek("a", 1).await.unwrap().remaining, 2);
    assert_eq!(denied.decisions[1].unwrap().receipt, None, "given back: no receipt to hold");
}

#[tokio::test]
async fn a_stored_quota_applies_at_once_everywhere() {
    let stack = Stack::start().await;
    let admin = limiter(&stack, "api", Quota::fixed_window(1, SECOND).unwrap());
    let stored = Limiter::stored(stack.client(), "api").unwrap().at(T0);
    let missing = stored.limit("u", 1).await.unwrap_err();
    assert!(matches!(missing, Error::NotInitialized { ref name } if name == "api"), "{missing}");
    assert_eq!(stored.stored_quota().await.unwrap(), None);
    let two_per_second = Quota::sliding_window(2, SECOND).unwrap();
    admin.store_quota(two_per_second).await.unwrap();
    assert_eq!(stored.stored_quota().await.unwrap(), Some(two_per_second));
    assert!(stored.limit("u", 2).await.unwrap().success);
    assert!(!stored.limit("u", 1).await.unwrap().success);
    // An operator raises the limit: the next decision uses it, state kept.
    admin.store_quota(Quota::sliding_window(3, SECOND).unwrap()).await.unwrap();
    assert_eq!(without_receipt(stored.limit("u", 1).await.unwrap()), decision(true, 3, 0, T0 + 2000, 0));
    let as_lease = Quota::concurrency(1, SECOND).unwrap();
    admin.store_quota(as_lease).await.unwrap();
    let leased = stored.limit("v", 1).await.unwrap();
    assert!(leased.receipt.is_some(), "a stored concurrency quota hands out leases");
    admin.store_quota(Quota::sliding_log(1, SECOND).unwrap()).await.unwrap();
    assert_eq!(without_receipt(stored.limit("w", 1).await.unwrap()), decision(true, 1, 0, T0 + 1000, 0));
    assert_eq!(stored.limit("w", 1).await.unwrap(), decision(false, 1, 0, T0 + 1000, 1000));
    assert!(admin.delete_stored_quota().await.unwrap());
}

#[tokio::test]
async fn a_stored_quota_that_changes_its_algorithm_never_misreads_the_old_state() {
    let stack = Stack::start().await;
    let client = stack.client();
    let admin = limiter(&stack, "switch", Quota::gcra(5, 5, SECOND).unwrap());
    let stored = Limiter::stored(stack.client(), "switch").unwrap().at(T0);
    let get = Command::new("GET").arg(stored.state_key("id"));
    // GCRA's TAT, then a fixed window: the TAT is no window count (it was read as one: reset 6.46e18).
    admin.store_quota(Quota::gcra(5, 5, SECOND).unwrap()).await.unwrap();
    assert!(stored.limit("id", 3).await.unwrap().success);
    admin.store_quota(Quota::fixed_window(5, SECOND).unwrap()).await.unwrap();
    assert_eq!(
        without_receipt(stored.limit("id", 1).await.unwrap()),
        decision(true, 5, 4, T0 + 1000, 0),
        "a fresh window"
    );
    let window = client.command(&get).await.unwrap().into_string().unwrap();
    assert_eq!(window, format!("fw:{}:1", T0 / 1000), "overwritten by the new algorithm's state");
    // A string under a log (fixed window → concurrency), and a log under a string (concurrency → GCRA): fresh,
    // instead of Redis's WRONGTYPE.
    admin.store_quota(Quota::concurrency(2, SECOND).unwrap()).await.unwrap();
    assert_eq!(stored.limit("id", 2).await.unwrap().remaining, 0);
    admin.store_quota(Quota::gcra(5, 5, SECOND).unwrap()).await.unwrap();
    assert_eq!(without_receipt(stored.limit("id", 1).await.unwrap()), decision(true, 5, 4, T0 + 200, 0));
    // Concurrency and the sliding log keep the same permit log: grants held stay held.
    admin.store_quota(Quota::concurrency(2, SECOND).unwrap()).await.unwrap();
    assert!(stored.limit("log", 2).await.unwrap().success);
    admin.store_quota(Quota::sliding_log(3, SECOND).unwrap()).await.unwrap();
    assert_eq!(stored.limit("log", 2).await.unwrap(), decision(false, 3, 1, T0 + 1000, 1000));
    // A type no algorithm writes is foreign state: reported, never read as no state and never overwritten.
    let foreign = stored.state_key("foreign");
    client.command(&Command::new("HSET").arg(&foreign).args(["a", "b"])).await.unwrap();
    let error = stored.limit("foreign", 1).await.unwrap_err();
    assert_eq!(error.code(), "EDGELIMIT_FOREIGN_STATE", "{error}");
    let kind = client.command(&Command::new("TYPE").arg(&foreign)).await.unwrap();
    assert_eq!(kind.into_string().unwrap(), "hash");
}

#[tokio::test]
async fn refunds_give_back_but_never_above_the_limit() {
    let stack = Stack::start().await;
    for quota in [
        Quota::token_bucket(4, 1, SECOND).unwrap(),
        Quota::gcra(4, 1, SECOND).unwrap(),
        Quota::fixed_window(4, SECOND).unwrap(),
        Quota::sliding_window(4, SECOND).unwrap(),
        Quota::sliding_log(4, SECOND).unwrap(),
    ] {
        let limiter = limiter(&stack, &quota.algorithm().to_string(), quota).at(T0);
        let first = limiter.limit("id", 1).await.unwrap().receipt.unwrap();
        let second = limiter.limit("id", 2).await.unwrap().receipt.unwrap();
        let refunded = limiter.refund("id", &second).await.unwrap();
        assert_eq!((refunded.success, refunded.remaining), (true, 3), "{quota}");
        assert_eq!(limiter.refund("id", &first).await.unwrap().remaining, 4, "{quota}");
        assert_eq!(limiter.peek("id", 1).await.unwrap().remaining, 4, "{quota}");
        assert!(!limiter.reset("id").await.unwrap(), "{quota}: a whole limit keeps no state");
    }
}

#[tokio::test]
async fn a_ratelimit_refunds_a_grant_with_one_receipt_per_limit() {
    let stack = Stack::start().await;
    let limits = [
        Limit::new(Quota::gcra(4, 1, Duration::from_secs(3600)).unwrap()),
        Limit::new(Quota::sliding_log(3, Duration::from_secs(3600)).unwrap()),
    ];
    let ratelimit = Ratelimit::new(stack.client(), &limits, Options::default()).unwrap();
    let granted = ratelimit.limit("id", 2).await.unwrap();
    assert!(granted.decision.success);
    assert_eq!(granted.decision.receipt, None, "one receipt cannot give back two limits' grants");
    let receipts: Vec<Receipt> = granted.limits.iter().map(|d| d.receipt.unwrap()).collect();
    let wrong = ratelimit.refund("id", &receipts[..1]).await.unwrap_err();
    assert_eq!(wrong.code(), "EDGELIMIT_INVALID_ARGUMENT");
    let refunded = ratelimit.refund("id", &receipts).await.unwrap();
    let after: Vec<(bool, u64)> = refunded.iter().map(|d| (d.success, d.remaining)).collect();
    assert_eq!(after, [(true, 4), (true, 3)]);
    let single = Ratelimit::new(stack.client(), &limits[..1], Options::default()).unwrap();
    let one = single.limit("other", 1).await.unwrap();
    assert_eq!(one.decision.receipt, Some(one.limits[0].receipt.unwrap()));
}

#[tokio::test]
async fn bad_requests_are_typed_errors_that_record_nothing() {
    let stack = Stack::start().await;
    let small = limiter(&stack, "small", Quota::gcra(3, 1, SECOND).unwrap()).at(T0);
    let other = limiter(&stack, "other", Quota::fixed_window(10, SECOND).unwrap()).at(T0);
    let too_many = limit::limit_all(&[other.request("id", 1), small.request("id", 4)]).await.unwrap_err();
    assert!(matches!(too_many, Error::PermitsExceedRate { permits: 4, rate: 3 }), "{too_many}");
    assert_eq!(too_many.code(), "EDGELIMIT_PERMITS_EXCEED_RATE");
    assert_eq!(other.peek("id", 1).await.unwrap().remaining, 10, "nothing recorded");
    assert_eq!(small.limit("id", 0).await.unwrap_err().code(), "EDGELIMIT_INVALID_ARGUMENT");
    assert!(limit::limit_all(&[]).await.is_err());
    let later = small.clone().at(T0 + 1);
    let skewed = [other.request("id", 1), later.request("id", 1)];
    assert!(limit::limit_all(&skewed).await.is_err());
    assert!(Limiter::new(stack.client(), "a{b", Quota::fixed_window(1, SECOND).unwrap()).is_err());
}

#[tokio::test]
async fn under_server_time_idle_keys_vanish_when_they_stop_mattering() {
    let stack = Stack::start().await;
    let client = stack.client();
    let quotas = [
        Quota::token_bucket(10, 10, Duration::from_millis(200)).unwrap(),
        Quota::gcra(10, 10, Duration::from_millis(200)).unwrap(),
        Quota::fixed_window(10, Duration::from_millis(200)).unwrap(),
        Quota::sliding_window(10, Duration::from_millis(200)).unwrap(),
        Quota::concurrency(10, Duration::from_millis(200)).unwrap(),
        Quota::sliding_log(10, Duration::from_millis(200)).unwrap(),
    ];
    for quota in quotas {
        let limiter = limiter(&stack, &quota.algorithm().to_string(), quota);
        assert!(limiter.limit("id", 3).await.unwrap().success);
        let key = limiter.state_key("id");
        let ttl = client.command(&Command::new("PTTL").arg(&key)).await.unwrap().into_int().unwrap();
        // At most two intervals (the sliding window keeps its count through the next window).
        assert!(ttl > 0 && ttl <= 400, "{quota}: PTTL {ttl}");
    }
    tokio::time::sleep(Duration::from_millis(450)).await;
    let keys = client.command(&Command::new("KEYS").arg("edgelimit:*")).await.unwrap();
    assert_eq!(keys, Value::Array(vec![]));
}

#[tokio::test]
async fn hand_made_calls_get_clean_errors_never_lua_stack_traces() {
    let stack = Stack::start().await;
    let client = stack.client();
    let good = ["token_bucket", "1", "5", "1000", "5", ""];
    let mut cases: Vec<(Vec<&str>, Vec<&str>)> = vec![
        (vec![], vec!["limit", ""]),
        (vec!["c"], [&["limit", ""][..], &good].concat()),
        (vec!["c", "s"], [&["jump", ""][..], &good].concat()),
        (vec!["c", "s"], [&["limit", "yesterday"][..], &good].concat()),
        (vec!["c", "s"], vec!["limit", "", "token_bucket", "1"]),
    ];
    let mut bad_limit = |index: usize, values: &[&'static str]| {
        for &value in values {
            let mut args = good.to_vec();
            args[index] = value;
            cases.push((vec!["c", "s"], [&["limit", ""][..], &args].concat()));
        }
    };
    // The CLI's spelling is not a script name.
    bad_limit(0, &["leaky", "sliding-log"]);
    bad_limit(1, &["0", "-1", "1.5", "x", "4294967296"]);
    bad_limit(2, &["0", "1e10", "two"]);
    bad_limit(3, &["0", "4503599627370497", "1.5"]);
    bad_limit(4, &["0", "-3"]);
    let mut too_large = good.to_vec();
    too_large[2] = "4294967295";
    too_large[3] = "4503599627370";
    cases.push((vec!["c", "s"], [&["limit", ""][..], &too_large].concat()));
    let concurrency = ["concurrency", "1", "5", "1000", "1", "no spaces allowed"];
    cases.push((vec!["c", "s"], [&["limit", ""][..], &concurrency].concat()));
    cases.push((vec!["c", "s"], [&["refund", ""][..], &concurrency[..5], &["nocolon"]].concat()));
    // Receipts no grant returned: other permits than the refund's, more than the limit, a mark too long or of
    // another form, a time or window after the clock (explicit time 1000 here: window 1 of 1000 ms).
    let long_mark = format!("1:{}", "a".repeat(65));
    for (algorithm, receipt) in [
        ("concurrency", "2:abc"),
        ("concurrency", long_mark.as_str()),
        ("concurrency", "1:a/b"),
        ("token_bucket", "1:1001"),
        ("token_bucket", "1:1e3"),
        ("gcra", "1:abc"),
        ("fixed_window", "1:2"),
        ("sliding_window", "1:2"),
    ] {
        let args = [algorithm, "1", "5", "1000", "5", receipt];
        cases.push((vec!["c", "s"], [&["refund", "1000"][..], &args].concat()));
    }
    let over_limit = ["sliding_log", "6", "5", "1000", "5", "6:abc"];
    cases.push((vec!["c", "s"], [&["refund", ""][..], &over_limit].concat()));
    let unnamed_grant = ["sliding_log", "1", "5", "1000", "5", ""];
    cases.push((vec!["c", "s"], [&["limit", ""][..], &unnamed_grant].concat()));
    // One state twice: both would be decided on one reading and granted, twice the permits past one check.
    let twice = ["fixed_window", "4", "5", "1000", "5", ""];
    cases.push((vec!["c", "s", "c", "s"], [&["limit", ""][..], &twice, &twice].concat()));
    // The single-limit scripts get the same calls, without the config key and the algorithm's name: the request in
    // one argument ('<permits>:<limit>:<interval>', and ':<rate>' for token bucket and GCRA), the lease, the
    // operation, the time (lua/limits/single.lua).
    let owned = |args: &[&str]| args.iter().map(|arg| arg.to_string()).collect::<Vec<String>>();
    let mut single_cases: Vec<(&Script, Vec<String>, Vec<String>)> = vec![
        (Algorithm::Gcra.script(), vec![], owned(&["1:5:1000:5"])),
        (Algorithm::Gcra.script(), owned(&["s"]), vec![]),
        (Algorithm::Gcra.script(), owned(&["s"]), owned(&["1:5:1000"])),
        (Algorithm::Gcra.script(), owned(&["s"]), owned(&["1:5:1000:5", "", "drop", ""])),
        (Algorithm::Gcra.script(), owned(&["s"]), owned(&["1:5:1000:5", "", "limit", "", "extra"])),
        (Algorithm::FixedWindow.script(), owned(&["s"]), owned(&["1:5:1000:5"])),
        (Algorithm::FixedWindow.script(), owned(&["s"]), owned(&["1:5:1000", "", "limit", "-5"])),
    ];
    for (keys, args) in &cases {
        let algorithm = Algorithm::ALL.into_iter().find(|a| args.get(2) == Some(&a.script_name()));
        if let (Some(algorithm), [_, state], [operation, time, _, permits, limit, interval, rate, lease]) =
            (algorithm, &keys[..], &args[..])
        {
            let request = match algorithm {
                Algorithm::TokenBucket | Algorithm::Gcra => format!("{permits}:{limit}:{interval}:{rate}"),
                // Without a rate, a bad one cannot be sent.
                _ if *rate != "5" && *rate != "1" => continue,
                _ => format!("{permits}:{limit}:{interval}"),
            };
            let args = vec![request, lease.to_string(), operation.to_string(), time.to_string()];
            single_cases.push((algorithm.script(), vec![state.to_string()], args));
        }
    }
    let all_cases = cases.into_iter().map(|(keys, args)| (&edgelimit::lua::LIMITS, owned(&keys), owned(&args)));
    for (script, keys, args) in all_cases.chain(single_cases) {
        let error = script.run(&client, &keys, &args).await.unwrap_err();
        let message = error.to_string();
        assert!(
            error.code() == "EDGELIMIT_INVALID_ARGUMENT"
                && message.contains("the script refused the call: invalid")
                && !message.contains("user_script"),
            "{keys:?} {args:?}: {message}"
        );
    }
    // A stored config that someone garbled by hand is named in the error.
    let command = Command::new("HSET").arg("c").args(["algorithm", "gcra", "limit", "ten", "interval", "1000"]);
    client.command(&command).await.unwrap();
    let stored = ["", "1", "", "", "", ""];
    let error =
        edgelimit::lua::LIMITS.run(&client, &["c", "s"], &[&["limit", ""][..], &stored].concat()).await.unwrap_err();
    assert!(error.to_string().contains("stored config in c, field limit"), "{error}");
    // … and so is a field someone left out.
    let command = Command::new("HSET").arg("c2").args(["algorithm", "gcra", "limit", "10", "interval", "1000"]);
    client.command(&command).await.unwrap();
    let error =
        edgelimit::lua::LIMITS.run(&client, &["c2", "s"], &[&["limit", ""][..], &stored].concat()).await.unwrap_err();
    assert!(error.to_string().contains("stored config in c2, field rate: false"), "{error}");
    assert_eq!(client.command(&Command::new("EXISTS").arg("s")).await.unwrap(), Value::Int(0));
}

#[tokio::test]
async fn a_lease_of_many_permits_is_held_and_released_whole() {
    let stack = Stack::start().await;
    let slots = limiter(&stack, "wide", Quota::concurrency(5000, SECOND).unwrap()).at(T0);
    let wide = slots.limit("id", 4999).await.unwrap();
    assert_eq!((wide.success, wide.remaining), (true, 1));
    assert!(!slots.limit("id", 2).await.unwrap().success);
    assert!(slots.release("id", &wide.receipt.unwrap()).await.unwrap());
    assert_eq!(slots.peek("id", 1).await.unwrap().remaining, 5000);
}

#[tokio::test]
async fn script_sha1s_match_what_redis_computes() {
    let stack = Stack::start().await;
    let client = stack.client();
    for script in edgelimit::lua::every_script() {
        let loaded = client.command(&Command::new("SCRIPT").args(["LOAD", script.source()])).await.unwrap();
        assert_eq!(loaded.into_string().unwrap(), script.sha1());
    }
}

#[tokio::test]
async fn every_algorithms_file_runs_alone_under_redis_cli_eval() {
    // What `edgelimit scripts NAME` prints runs as it is: `redis-cli --eval` sends a file's text.
    let redis = edgelimit_cli::redis_server::RedisServer::start().await.unwrap();
    let dir = std::env::temp_dir().join(format!("edgelimit-eval-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for algorithm in Algorithm::ALL {
        let name = algorithm.script_name();
        let file = dir.join(format!("{name}.lua"));
        std::fs::write(&file, edgelimit::lua::script_named(name).unwrap().source()).unwrap();
        // A log names each grant with a fresh id; the other algorithms take none.
        let lease = match algorithm {
            Algorithm::Concurrency | Algorithm::SlidingLog => "grant-1",
            _ => "",
        };
        // The request: 2 permits of 10 per second (and a rate of 10 for token bucket and GCRA).
        let request = match algorithm {
            Algorithm::TokenBucket | Algorithm::Gcra => "2:10:1000:10",
            _ => "2:10:1000",
        };
        let key = format!("{{cli}}:{algorithm}");
        let output = std::process::Command::new("redis-cli")
            .args(["-p", &redis.port().to_string(), "--eval"])
            .arg(&file)
            .args([&key, ",", request, lease])
            .output()
            .expect("run redis-cli");
        let reply = String::from_utf8_lossy(&output.stdout);
        let words: Vec<&str> = reply.lines().collect();
        assert!(output.status.success(), "{algorithm}: {output:?}");
        // Status 1 (granted), then the permits remaining.
        assert_eq!(words[..2], ["1", "8"], "{algorithm}: {reply}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A string no edgelimit algorithm wrote (another program's, a damaged state) under a string algorithm's key is
/// foreign state whether one limit or several are decided: reported, never read as nothing counted (which granted
/// on it and overwrote it), and its bytes, maybe another program's secret, never echoed. So is another string
/// algorithm's state: two limits sharing a name with different algorithms reset each other's state on every call
/// and limited nothing (a review: 20 of 20 admitted, alternating, on a limit of 3 each).
#[tokio::test]
async fn a_string_of_no_edgelimit_algorithm_is_foreign_state_never_nothing_counted() {
    let stack = Stack::start().await;
    let client = stack.client();
    let other = limiter(&stack, "other", Quota::fixed_window(5, SECOND).unwrap());
    for quota in [
        Quota::token_bucket(5, 5, SECOND).unwrap(),
        Quota::gcra(5, 5, SECOND).unwrap(),
        Quota::fixed_window(5, SECOND).unwrap(),
        Quota::sliding_window(5, SECOND).unwrap(),
    ] {
        let limiter = limiter(&stack, "foreign", quota);
        let own_tag = match quota.algorithm() {
            Algorithm::TokenBucket => "tb",
            Algorithm::Gcra => "gcra",
            Algorithm::FixedWindow => "fw",
            _ => "sw",
        };
        for value in ["sk_live_SECRET", &format!("{own_tag}:12:1O"), "tb:1", "sw:1:2"] {
            let key = limiter.state_key("victim");
            client.command(&Command::new("SET").arg(&key).arg(value)).await.unwrap();
            let one = limiter.limit("victim", 1).await.unwrap_err();
            let several =
                limit::limit_all(&[limiter.request("victim", 1), other.request("victim", 1)]).await.unwrap_err();
            for error in [one, several] {
                assert_eq!(error.code(), "EDGELIMIT_FOREIGN_STATE", "{quota:?} {value:?}: {error}");
                assert!(!error.to_string().contains("SECRET"), "{error}");
            }
            let kept = client.command(&Command::new("GET").arg(&key)).await.unwrap();
            assert_eq!(kept.into_string().unwrap(), value, "{quota:?}: overwritten");
        }
        // Another string algorithm's state (here a fixed window's, or a token bucket's under one), as two limits
        // of one name and different algorithms leave it.
        let another = if own_tag == "fw" { "tb:5:1" } else { "fw:1:5" };
        let key = limiter.state_key("shared");
        client.command(&Command::new("SET").arg(&key).arg(another)).await.unwrap();
        let error = limiter.limit("shared", 1).await.unwrap_err();
        assert_eq!(error.code(), "EDGELIMIT_FOREIGN_STATE", "{quota:?}: {error}");
        assert!(error.to_string().contains("give each its own name"), "{error}");
    }
}

/// Two limits of one name and different string algorithms, alternating: the second is refused as foreign state
/// instead of resetting the first's state (which let every request through both).
#[tokio::test]
async fn two_algorithms_under_one_name_never_reset_each_other() {
    let stack = Stack::start().await;
    let window = limiter(&stack, "login", Quota::fixed_window(3, Duration::from_secs(3600)).unwrap());
    let slide = limiter(&stack, "login", Quota::sliding_window(3, Duration::from_secs(3600)).unwrap());
    let mut admitted = 0;
    for i in 0..20 {
        let decided = if i % 2 == 0 { window.limit("u", 1).await } else { slide.limit("u", 1).await };
        match decided {
            Ok(decision) => admitted += u32::from(decision.success),
            Err(error) => assert_eq!(error.code(), "EDGELIMIT_FOREIGN_STATE", "{error}"),
        }
    }
    assert!(admitted <= 3, "{admitted} of 20 admitted on limits of 3");
}

/// A stored config whose algorithm changed drops another algorithm's state under its own limiter's keys only, and
/// only on a decision: a caller pairing some stored config of another algorithm with any state key had wiped a full
/// sliding log with one peek, and every peek after (review, through a limiter token).
#[tokio::test]
async fn a_stored_config_drops_no_state_but_its_own_limiters() {
    let stack = Stack::start().await;
    let client = stack.client();
    let stored = Limiter::stored(client.clone(), "ops").unwrap();
    stored.store_quota(Quota::fixed_window(100, Duration::from_secs(60)).unwrap()).await.unwrap();
    let login = limiter(&stack, "login", Quota::sliding_log(3, Duration::from_secs(600)).unwrap());
    for _ in 0..3 {
        assert!(login.limit("1.2.3.4", 1).await.unwrap().success);
    }
    let victim = login.state_key("1.2.3.4");
    for operation in ["peek", "limit"] {
        let args = [operation, "", "", "1", "", "", "", ""];
        let keys = [stored.config_key(), victim.clone()];
        // Refused or decided on the victim's state as it is: never dropped.
        let _ = edgelimit::lua::LIMITS.run(&client, &keys, &args).await;
        let exists = client.command(&Command::new("EXISTS").arg(&victim)).await.unwrap();
        assert_eq!(exists, Value::Int(1), "{operation}");
    }
    assert!(!login.limit("1.2.3.4", 1).await.unwrap().success, "the log is still full");
}
