//! Property tests of the algorithm family.
//!
//! - On the reference model alone (cheap, many cases): token bucket and GCRA decide alike; `retry_after` is exact
//!   (allowed at `now + retry_after`, denied 1 ms before); the exact algorithms never over-admit.
//! - Differential, on real Redis through the bridge: random schedules of (time step, operation, permits) run through
//!   the model and through the scripts at the same explicit times, for one limit and for several decided together;
//!   every decision must be identical.
//!
//! Failing cases are saved in `limit_model.regressions` next to this file and replayed first on every run; it is
//! committed. `PROPTEST_CASES` sets the number of cases (default 256 for the model, 96 per differential test).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use edgelimit::limit::model::{decide_all, ModelLimit, Verdict};
use edgelimit::limit::{self, Algorithm, Lease, Limiter, Quota};
use edgelimit::Decision;
use edgelimit_tests::Stack;
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, TestCaseError, TestRunner};

const T0: u64 = 1_700_000_000_000;

fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}

fn config(default_cases: u32) -> Config {
    Config {
        cases: cases(default_cases),
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("regressions"))),
        ..Config::default()
    }
}

fn quota_of(algorithm: Algorithm) -> impl Strategy<Value = Quota> {
    (1u32..=12, 1u64..=3000, 1u32..=12).prop_map(move |(limit, interval, rate)| {
        Quota::new(algorithm, limit, Duration::from_millis(interval), rate).unwrap()
    })
}

fn any_quota() -> impl Strategy<Value = Quota> {
    prop::sample::select(Algorithm::ALL.to_vec()).prop_flat_map(quota_of)
}

/// Time steps: often none (bursts), often small, sometimes long enough to cross windows and refill.
fn advance() -> impl Strategy<Value = u64> {
    prop_oneof![3 => Just(0u64), 3 => 1u64..40, 2 => 0u64..4000]
}

#[derive(Debug, Clone)]
enum Op {
    Limit(u32),
    Peek(u32),
    Refund(u32),
    /// Release the n-th lease granted so far (modulo their number), concurrency only.
    Release(usize),
}

fn ops(quota: Quota) -> impl Strategy<Value = Vec<(u64, Op)>> {
    let permits = 1..=quota.limit();
    let op = prop_oneof![
        6 => permits.clone().prop_map(Op::Limit),
        1 => permits.clone().prop_map(Op::Peek),
        1 => permits.prop_map(Op::Refund),
        1 => any::<usize>().prop_map(Op::Release),
    ];
    prop::collection::vec((advance(), op), 1..40)
}

fn expected(verdict: &Verdict, limit: u32, granted: bool) -> Decision {
    let standing = if granted { verdict.after } else { verdict.now };
    Decision {
        success: verdict.allowed,
        limit: u64::from(limit),
        remaining: standing.remaining,
        reset: standing.reset,
        retry_after: verdict.retry_after,
        lease: None,
    }
}

// ---------------------------------------------------------------------------------------------------------------
// The model alone.

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn token_bucket_and_gcra_decide_alike(
        (limit, interval, rate) in (1u32..=50, 1u64..=10_000, 1u32..=50),
        schedule in prop::collection::vec((advance(), 1u32..=50), 1..80),
    ) {
        let interval = Duration::from_millis(interval);
        let mut bucket = ModelLimit::new(Quota::token_bucket(limit, rate, interval).unwrap());
        let mut gcra = ModelLimit::new(Quota::gcra(limit, rate, interval).unwrap());
        let mut now = T0;
        for (step, permits) in schedule {
            now += step;
            let permits = permits.min(limit);
            let (a, b) = (bucket.decide(now, permits), gcra.decide(now, permits));
            prop_assert_eq!(a, b);
            if a.allowed {
                bucket.grant(now, permits, 0);
                gcra.grant(now, permits, 0);
            }
        }
    }

    #[test]
    fn retry_after_is_exact(
        quota in any_quota().prop_filter("leases end early on release", |q| q.algorithm() != Algorithm::Concurrency),
        schedule in prop::collection::vec((advance(), 1u32..=12), 1..60),
    ) {
        let mut model = ModelLimit::new(quota);
        let mut now = T0;
        for (step, permits) in schedule {
            now += step;
            let permits = permits.min(quota.limit());
            let verdict = model.decide(now, permits);
            if verdict.allowed {
                model.grant(now, permits, 0);
                continue;
            }
            prop_assert!(verdict.retry_after > 0);
            prop_assert!(model.clone().decide(now + verdict.retry_after, permits).allowed, "allowed at retry_after");
            prop_assert!(!model.clone().decide(now + verdict.retry_after - 1, permits).allowed, "not 1 ms sooner");
        }
    }

    #[test]
    fn exact_algorithms_never_over_admit(
        quota in any_quota().prop_filter("approximate", |q| q.algorithm() != Algorithm::SlidingWindow),
        schedule in prop::collection::vec((advance(), 1u32..=12), 1..80),
    ) {
        let mut model = ModelLimit::new(quota);
        let (limit, interval, rate) = (u64::from(quota.limit()), quota.interval_ms(), u64::from(quota.rate()));
        let mut grants: Vec<(u64, u64)> = Vec::new();
        let mut now = T0;
        for (step, permits) in schedule {
            now += step;
            let permits = permits.min(quota.limit());
            if model.decide(now, permits).allowed {
                model.grant(now, permits, 0);
                grants.push((now, u64::from(permits)));
            }
        }
        for (i, &(start, _)) in grants.iter().enumerate() {
            for &(end, _) in &grants[i..] {
                let taken: u64 = grants.iter().filter(|(t, _)| (start..=end).contains(t)).map(|(_, p)| p).sum();
                let bound = match quota.algorithm() {
                    // Any span: the capacity plus what refilled during it.
                    Algorithm::TokenBucket | Algorithm::Gcra => limit + rate * (end - start) / interval,
                    // Within one aligned window: the limit.
                    Algorithm::FixedWindow if start / interval == end / interval => limit,
                    // Leases last `interval`: within one lease time no more than the limit can be held.
                    Algorithm::Concurrency if end - start < interval => limit,
                    // Within any interval-long span: the limit.
                    Algorithm::SlidingLog if end - start < interval => limit,
                    _ => continue,
                };
                prop_assert!(taken <= bound, "{} permits in [{}, {}], bound {}", taken, start, end, bound);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Model against the scripts on real Redis.

/// A fresh limiter name for every case, so cases never share state.
fn fresh_name() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("case{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// Runs `case` on every value of `strategy` against one real Redis (a fresh one per test).
fn check_on_redis<S: Strategy>(strategy: S, case: impl AsyncFn(&Stack, S::Value) -> Result<(), TestCaseError>) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let stack = runtime.block_on(Stack::start());
    let mut runner = TestRunner::new(Config {
        source_file: Some(file!()),
        ..config(96)
    });
    if let Err(failure) = runner.run(&strategy, |value| runtime.block_on(case(&stack, value))) {
        panic!("{failure}");
    }
}

#[test]
fn one_limit_decides_as_the_model_on_real_redis() {
    // A quota in code runs the algorithm's single-limit script; a stored one runs the driver with every algorithm.
    let strategy = (any_quota(), 0u64..10_000, any::<bool>())
        .prop_flat_map(|(quota, offset, stored)| (Just(quota), Just(offset), Just(stored), ops(quota)));
    check_on_redis(strategy, async |stack, (quota, offset, stored, schedule)| {
        one_limit_case(stack, quota, stored, T0 + offset, schedule).await
    });
}

async fn one_limit_case(
    stack: &Stack,
    quota: Quota,
    stored: bool,
    start: u64,
    schedule: Vec<(u64, Op)>,
) -> Result<(), TestCaseError> {
    let limiter = if stored {
        let limiter = Limiter::stored(stack.client(), &fresh_name()).unwrap();
        limiter.store_quota(quota).await.unwrap();
        limiter
    } else {
        Limiter::new(stack.client(), &fresh_name(), quota).unwrap()
    };
    let mut model = ModelLimit::new(quota);
    let mut leases: Vec<Lease> = Vec::new();
    let mut now = start;
    for (step, op) in schedule {
        now += step;
        let at = limiter.clone().at(now);
        match op {
            Op::Limit(permits) => {
                let actual = at.limit("id", permits).await.unwrap();
                let verdict = model.decide(now, permits);
                let mut wanted = expected(&verdict, quota.limit(), verdict.allowed);
                if quota.algorithm() == Algorithm::Concurrency && verdict.allowed {
                    let lease = actual.lease.ok_or_else(|| TestCaseError::fail("a granted lease"))?;
                    prop_assert_eq!(lease.permits, permits);
                    leases.push(lease);
                    wanted.lease = Some(lease);
                }
                if verdict.allowed {
                    model.grant(now, permits, wanted.lease.map_or(0, |lease| lease.id));
                }
                prop_assert_eq!(actual, wanted, "limit({}) at +{} ms", permits, now - start);
            }
            Op::Peek(permits) => {
                let actual = at.peek("id", permits).await.unwrap();
                let verdict = model.decide(now, permits);
                prop_assert_eq!(
                    actual,
                    expected(&verdict, quota.limit(), false),
                    "peek({}) at +{}",
                    permits,
                    now - start
                );
            }
            Op::Refund(permits) if quota.algorithm() != Algorithm::Concurrency => {
                let actual = at.refund("id", permits).await.unwrap();
                model.refund(now, permits, 0);
                let standing = model.decide(now, 1).now;
                prop_assert_eq!(
                    (actual.success, actual.remaining, actual.reset),
                    (true, standing.remaining, standing.reset)
                );
            }
            Op::Release(index) if quota.algorithm() == Algorithm::Concurrency && !leases.is_empty() => {
                let lease = leases[index % leases.len()];
                let actual = at.release("id", &lease).await.unwrap();
                prop_assert_eq!(
                    actual,
                    model.refund(now, lease.permits, lease.id),
                    "release at +{}",
                    now - start
                );
            }
            Op::Refund(_) | Op::Release(_) => {}
        }
    }
    Ok(())
}

#[test]
fn several_limits_decide_as_the_model_on_real_redis() {
    let strategy = (prop::collection::vec(any_quota(), 2..=3), 0u64..10_000).prop_flat_map(|(quotas, offset)| {
        let smallest = quotas.iter().map(Quota::limit).min().unwrap();
        let steps = prop::collection::vec((advance(), 1..=smallest), 1..40);
        (Just(quotas), Just(offset), steps)
    });
    check_on_redis(strategy, async |stack, (quotas, offset, schedule)| {
        several_limits_case(stack, quotas, T0 + offset, schedule).await
    });
}

async fn several_limits_case(
    stack: &Stack,
    quotas: Vec<Quota>,
    start: u64,
    schedule: Vec<(u64, u32)>,
) -> Result<(), TestCaseError> {
    let limiters: Vec<Limiter> = quotas
        .iter()
        .map(|&quota| Limiter::new(stack.client(), &fresh_name(), quota).unwrap())
        .collect();
    let mut models: Vec<ModelLimit> = quotas.iter().map(|&quota| ModelLimit::new(quota)).collect();
    let mut now = start;
    for (step, permits) in schedule {
        now += step;
        let timed: Vec<Limiter> = limiters.iter().map(|limiter| limiter.clone().at(now)).collect();
        let requests: Vec<_> = timed.iter().map(|limiter| limiter.request("id", permits)).collect();
        let actual = limit::limit_all(&requests).await.unwrap();
        let lease_ids: HashMap<usize, u64> = actual
            .decisions
            .iter()
            .enumerate()
            .filter_map(|(i, decision)| decision.lease.map(|lease| (i, lease.id)))
            .collect();
        let mut entries: Vec<(&mut ModelLimit, u32, u64)> = models
            .iter_mut()
            .enumerate()
            .map(|(i, model)| (model, permits, lease_ids.get(&i).copied().unwrap_or(0)))
            .collect();
        let (granted, verdicts) = decide_all(&mut entries, now);
        prop_assert_eq!(actual.success, granted, "at +{} ms", now - start);
        for (i, (decision, verdict)) in actual.decisions.iter().zip(&verdicts).enumerate() {
            let mut wanted = expected(verdict, quotas[i].limit(), granted);
            wanted.lease = decision
                .lease
                .filter(|_| granted && quotas[i].algorithm() == Algorithm::Concurrency);
            prop_assert_eq!(decision, &wanted, "limit {} of {:?} at +{} ms", i, quotas, now - start);
        }
    }
    Ok(())
}
