//! The insurance limit (`OnError::Insurance`) against a real Redis behind the real bridge: decisions exact from
//! Redis; Redis stopped mid-run, decisions go on in this process under the stated local limit (`Reason::Insurance`,
//! never more admitted than it allows); Redis back, decisions are Redis's again at the next call. Only the store's
//! unavailability is insured: a caller's mistake or a refused token is an error as before. The last test measures
//! what docs/npm.md states: what each of 4 processes admits in a 5 s outage against its stated local limit.

use std::time::{Duration, Instant};

use edgelimit::limit::Quota;
use edgelimit::ratelimit::{Insurance, Limit, OnError, Options, Ratelimit, Reason};
use edgelimit::RestClient;
use edgelimit_tests::Stack;

const HOUR: Duration = Duration::from_secs(3600);

/// A Ratelimit through `client` under `limits`, insured by `insurance`, without the block cache (so every call asks
/// Redis first).
fn insured(client: RestClient, limits: &[Quota], insurance: Insurance) -> Ratelimit {
    let limits: Vec<Limit> = limits.iter().map(|&quota| Limit::new(quota)).collect();
    let options = Options { on_error: OnError::Insurance(insurance), cache_entries: 0, ..Options::default() };
    Ratelimit::new(client, &limits, options).unwrap()
}

/// `(success, reason)` of `permits` for `id`.
async fn limit(ratelimit: &Ratelimit, id: &str, permits: u32) -> (bool, Reason) {
    let outcome = ratelimit.limit(id, permits).await.unwrap();
    if outcome.reason == Reason::Insurance {
        let error = outcome.error.as_ref().expect("the store's failure the insurance stood in for");
        assert!(error.is_store_unavailable(), "{error}");
        assert!(outcome.limits.iter().all(|limit| limit.receipt.is_none()), "no receipt from a local grant");
    }
    (outcome.decision.success, outcome.reason)
}

#[tokio::test]
async fn redis_decides_then_the_local_limit_while_it_is_down_then_redis_again() {
    let mut stack = Stack::start().await;
    // Long intervals and no aligned windows: nothing frees or refills while the test runs, so every count is exact.
    let local = Quota::sliding_log(3, HOUR).unwrap();
    let ratelimit =
        insured(stack.client(), &[Quota::sliding_log(5, HOUR).unwrap()], Insurance::Limits(vec![Limit::new(local)]));
    for _ in 0..5 {
        assert_eq!(limit(&ratelimit, "ip", 1).await, (true, Reason::Decided));
    }
    assert_eq!(limit(&ratelimit, "ip", 1).await, (false, Reason::Decided));

    stack.stop_redis().await;
    // The local limit starts afresh: it never saw Redis's count. It admits exactly its 3, then denies.
    let mut admitted = 0;
    for _ in 0..10 {
        let (success, reason) = limit(&ratelimit, "ip", 1).await;
        assert_eq!(reason, Reason::Insurance);
        admitted += u32::from(success);
    }
    assert_eq!(admitted, 3, "the stated local limit, no more");
    // Weighted permits, as in Redis: 2 + 1 of 3, then nothing; 4 permits (within Redis's 5, beyond the local 3) is a
    // denial, not an error.
    assert_eq!(limit(&ratelimit, "w", 2).await, (true, Reason::Insurance));
    assert_eq!(limit(&ratelimit, "w", 2).await, (false, Reason::Insurance));
    assert_eq!(limit(&ratelimit, "w", 1).await, (true, Reason::Insurance));
    assert_eq!(limit(&ratelimit, "w", 1).await, (false, Reason::Insurance));
    let beyond = ratelimit.limit("x", 4).await.unwrap();
    assert_eq!((beyond.decision.success, beyond.reason, beyond.decision.limit), (false, Reason::Insurance, 3));
    // Final: blocking for it waits for nothing (it never fits the local limit), and does not spin until the timeout.
    let started = Instant::now();
    let blocked = ratelimit.block_until_ready("x", 4, Duration::from_secs(30)).await.unwrap();
    assert_eq!((blocked.decision.success, blocked.reason), (false, Reason::Insurance));
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
    // A caller's mistake is an error, insured or not; so is more than Redis's own limit.
    assert_eq!(ratelimit.limit("ip", 0).await.unwrap_err().code(), "EDGELIMIT_INVALID_ARGUMENT");
    assert_eq!(ratelimit.limit("ip", 6).await.unwrap_err().code(), "EDGELIMIT_PERMITS_EXCEED_RATE");

    stack.restart_redis().await;
    // Redis again at the next call (it restarted empty: nothing decided locally was written to it).
    for _ in 0..5 {
        assert_eq!(limit(&ratelimit, "ip", 1).await, (true, Reason::Decided));
    }
    assert_eq!(limit(&ratelimit, "ip", 1).await, (false, Reason::Decided));
    assert_eq!(ratelimit.remaining("w").await.unwrap().remaining, 5, "the local grants are not in Redis");
}

#[tokio::test]
async fn same_insures_under_the_limiters_own_limits_several_and_weighted() {
    let mut stack = Stack::start().await;
    let limits = [Quota::sliding_log(4, HOUR).unwrap(), Quota::token_bucket(3, 1, HOUR).unwrap()];
    let ratelimit = insured(stack.client(), &limits, Insurance::Same);
    stack.stop_redis().await;
    let granted = ratelimit.limit("ip", 2).await.unwrap();
    assert_eq!((granted.decision.success, granted.reason), (true, Reason::Insurance));
    assert_eq!(granted.limits.iter().map(|limit| limit.remaining).collect::<Vec<_>>(), [2, 1]);
    assert_eq!(granted.decision.receipt, None);
    // The bucket has 1 token left (a token comes back in an hour): all or nothing, nothing taken from the log.
    let denied = ratelimit.limit("ip", 2).await.unwrap();
    assert_eq!(denied.limits.iter().map(|limit| limit.success).collect::<Vec<_>>(), [true, false]);
    assert!(denied.decision.retry_after > 0);
    assert_eq!(limit(&ratelimit, "ip", 1).await, (true, Reason::Insurance));
    assert_eq!(limit(&ratelimit, "ip", 1).await, (false, Reason::Insurance));
    // limit_all under "same" is insured under the call's limits.
    let hourly = [Limit { quota: Quota::token_bucket(1, 1, HOUR).unwrap(), name: Some("hourly".into()) }];
    assert!(ratelimit.limit_all("other", &hourly, 1).await.unwrap().decision.success);
    let second = ratelimit.limit_all("other", &hourly, 1).await.unwrap();
    assert_eq!((second.decision.success, second.reason), (false, Reason::Insurance));
    // A concurrency limit is not insured: a local lease could not be released through Redis.
    let leases = [Limit::new(Quota::concurrency(2, HOUR).unwrap())];
    let error = ratelimit.limit_all("other", &leases, 1).await.unwrap_err();
    assert!(error.is_store_unavailable(), "the store's error: {error}");
}

#[tokio::test]
async fn only_the_stores_unavailability_is_insured_and_a_bad_insurance_is_refused() {
    let stack = Stack::start().await;
    let redis = [Quota::sliding_log(5, HOUR).unwrap()];
    let wrong_token = insured(stack.client_with("wrong"), &redis, Insurance::Same);
    let error = wrong_token.limit("ip", 1).await.unwrap_err();
    assert_eq!(error.code(), "EDGELIMIT_AUTH", "a refused token is not insured");

    let refused = |limits: Vec<Limit>, insurance| {
        let options = Options { on_error: OnError::Insurance(insurance), ..Options::default() };
        Ratelimit::new(stack.client(), &limits, options).unwrap_err().to_string()
    };
    let log = Limit::new(redis[0]);
    let concurrency = Limit::new(Quota::concurrency(2, HOUR).unwrap());
    assert!(refused(vec![log.clone()], Insurance::Limits(vec![])).contains("the insurance limit: no limits"));
    assert!(refused(vec![log.clone()], Insurance::Limits(vec![log.clone(), log.clone()])).contains("two limits"));
    assert!(refused(vec![log.clone()], Insurance::Limits(vec![concurrency.clone()])).contains("concurrency"));
    assert!(refused(vec![concurrency], Insurance::Same).contains("concurrency"));
}

#[tokio::test]
async fn a_five_second_outage_admits_per_process_at_most_the_stated_local_limit() {
    const PROCESSES: usize = 4;
    let mut stack = Stack::start().await;
    // Globally 40 per second over 4 processes: each states 10 per second (an exact sliding log) as its insurance.
    let global = [Quota::sliding_window(40, Duration::from_secs(1)).unwrap()];
    let local = Limit::new(Quota::sliding_log(10, Duration::from_secs(1)).unwrap());
    let processes: Vec<Ratelimit> =
        (0..PROCESSES).map(|_| insured(stack.client(), &global, Insurance::Limits(vec![local.clone()]))).collect();
    stack.stop_redis().await;
    let outage = Duration::from_secs(5);
    let runs = processes.into_iter().map(|ratelimit| async move {
        let (started, mut admitted, mut asked) = (Instant::now(), 0u64, 0u64);
        while started.elapsed() < outage {
            let outcome = ratelimit.limit("203.0.113.7", 1).await.unwrap();
            assert_eq!(outcome.reason, Reason::Insurance);
            admitted += u64::from(outcome.decision.success);
            asked += 1;
            // As a server between requests: the loop must not starve the bridge it shares the runtime with.
            tokio::task::yield_now().await;
        }
        (admitted, asked, started.elapsed())
    });
    let results = edgelimit_tests::spawned_at_once(runs).await;
    stack.restart_redis().await;
    for (i, (admitted, asked, took)) in results.iter().enumerate() {
        // Any 1 s span holds at most 10 grants: over `took`, at most 10 per started second.
        let bound = 10 * (took.as_millis() as u64 / 1000 + 1);
        println!(
            "insurance figure: process {i}: admitted {admitted} of {asked} in a {} ms outage; stated 10 per 1 s, at \
             most {bound}",
            took.as_millis()
        );
        assert!(*admitted <= bound, "process {i} admitted {admitted} > {bound}");
        assert!(*admitted >= 10, "process {i} admitted {admitted}: the insurance must admit, not close the site");
    }
}
