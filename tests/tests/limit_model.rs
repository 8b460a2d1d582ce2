//! Property tests of the algorithm family.
//!
//! - On the reference model alone (cheap, many cases): token bucket and GCRA decide alike; `retry_after` is exact
//!   (allowed at `now + retry_after`, denied 1 ms before); the exact algorithms never over-admit.
//! - Differential, on real Redis through the bridge: random schedules of (time step, operation, permits) run through
//!   the model and through the scripts at the same explicit times, for one limit and for several decided together;
//!   every decision, receipt and refund must be identical.
//! - From each algorithm's *definition*, not from the model (which once shared the scripts' refund bug): random
//!   schedules of grants and refunds by receipt, on the model and on real Redis, and of decisions across Cluster
//!   slots with their give-backs, and the grants kept checked against the definition's bound over the times the
//!   decisions return (see [`definition_excess`]).
//!
//! Failing cases are saved in `limit_model.regressions` next to this file and replayed first on every run; it is
//! committed. `PROPTEST_CASES` sets the number of cases (default 256 for the model, 96 per differential test).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use edgelimit::limit::model::{decide_all, ModelLimit, Verdict};
use edgelimit::limit::{self, Algorithm, Limiter, Quota, Receipt};
use edgelimit::Decision;
use edgelimit_tests::Stack;
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, TestCaseError, TestRunner};

const T0: u64 = 1_700_000_000_000;

fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(default)
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
    /// Refund the n-th receipt not refunded yet (modulo their number); nothing when there is none.
    Refund(usize),
}

fn ops(quota: Quota) -> impl Strategy<Value = Vec<(u64, Op)>> {
    let permits = 1..=quota.limit();
    let op = prop_oneof![
        6 => permits.clone().prop_map(Op::Limit),
        1 => permits.prop_map(Op::Peek),
        2 => any::<usize>().prop_map(Op::Refund),
    ];
    prop::collection::vec((advance(), op), 1..40)
}

/// The decision the scripts must return for `verdict` (its receipt is the caller's to fill in).
fn expected(verdict: &Verdict, limit: u32, granted: bool) -> Decision {
    let standing = if granted { verdict.after } else { verdict.now };
    Decision {
        success: verdict.allowed,
        limit: u64::from(limit),
        remaining: standing.remaining,
        reset: standing.reset,
        retry_after: verdict.retry_after,
        receipt: None,
    }
}

/// The id a sliding log or concurrency grant's receipt names (the scripts pick it), for the model to log the same.
fn grant_id(receipt: Option<Receipt>) -> u64 {
    // A log's mark is '<expiry>-<grant id>'.
    receipt.and_then(|receipt| u64::from_str_radix(receipt.mark().split_once('-')?.1, 16).ok()).unwrap_or(0)
}

// ---------------------------------------------------------------------------------------------------------------
// The definition's bounds.

/// A grant as the definition checker sees it: when (the time its decision returned: the receipt's time for token
/// bucket and GCRA, its window's start for a fixed window, the explicit time otherwise), its permits, and when it
/// was refunded (the index of the refund among all operations), if it was.
#[derive(Debug, Clone)]
struct Grant {
    at: u64,
    permits: u64,
    step: usize,
    refunded_step: Option<usize>,
    receipt: Receipt,
}

impl Grant {
    /// A grant made at operation `step`, at explicit time `now`, as its receipt says.
    fn new(quota: Quota, receipt: Receipt, now: u64, step: usize) -> Grant {
        Grant {
            at: time_of(quota, &receipt, now),
            permits: receipt.permits().into(),
            step,
            refunded_step: None,
            receipt,
        }
    }
}

/// The first way `grants` (in the order they were made) exceed what `quota`'s algorithm allows by its definition,
/// counting only the grants not refunded (a refund by receipt may give back only what keeps the rest within it), or
/// None. Written from the definitions, not from the model or the scripts:
/// - token bucket, GCRA: in any span [a, b], granted × interval <= limit × interval + rate × (b − a);
/// - fixed window: in each aligned window, at most the limit;
/// - sliding window counter: the same, since its weighted count includes the current window's whole count (an
///   approximation of the sliding log, it has no tighter bound of this kind: see over_admission.rs);
/// - sliding log: in any interval-long span (b − a < interval), at most the limit;
/// - concurrency: held at the moment of each grant (granted, not expired, not yet released) at most the limit.
fn definition_excess(quota: Quota, grants: &[Grant]) -> Option<String> {
    let (limit, interval, rate) = (u64::from(quota.limit()), quota.interval_ms(), u64::from(quota.rate()));
    let kept: Vec<&Grant> = grants.iter().filter(|grant| grant.refunded_step.is_none()).collect();
    let in_span = |a: u64, b: u64| -> u64 {
        kept.iter().filter(|grant| (a..=b).contains(&grant.at)).map(|grant| grant.permits).sum()
    };
    match quota.algorithm() {
        Algorithm::TokenBucket | Algorithm::Gcra => {
            for a in &kept {
                for b in kept.iter().filter(|b| b.at >= a.at) {
                    let granted = in_span(a.at, b.at);
                    if u128::from(granted) * u128::from(interval)
                        > u128::from(limit) * u128::from(interval) + u128::from(rate) * u128::from(b.at - a.at)
                    {
                        return Some(format!("{granted} permits in [{}, {}]", a.at, b.at));
                    }
                }
            }
        }
        Algorithm::FixedWindow | Algorithm::SlidingWindow => {
            let mut windows: BTreeMap<u64, u64> = BTreeMap::new();
            for grant in &kept {
                *windows.entry(grant.at / interval).or_default() += grant.permits;
            }
            if let Some((window, granted)) = windows.into_iter().find(|&(_, granted)| granted > limit) {
                return Some(format!("{granted} permits in window {window}"));
            }
        }
        Algorithm::SlidingLog => {
            for b in &kept {
                let granted = in_span(b.at.saturating_sub(interval - 1), b.at);
                if granted > limit {
                    return Some(format!("{granted} permits in the interval ending at {}", b.at));
                }
            }
        }
        Algorithm::Concurrency => {
            for now in grants {
                let held: u64 = (grants.iter())
                    .filter(|grant| grant.step <= now.step && grant.at + interval > now.at)
                    .filter(|grant| grant.refunded_step.is_none_or(|step| step > now.step))
                    .map(|grant| grant.permits)
                    .sum();
                if held > limit {
                    return Some(format!("{held} permits held at {}", now.at));
                }
            }
        }
        _ => {}
    }
    None
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
    fn grants_not_refunded_keep_each_algorithms_definition_on_the_model(
        quota in any_quota(),
        schedule in grants_and_refunds(),
    ) {
        let mut model = ModelLimit::new(quota);
        let mut grants: Vec<Grant> = Vec::new();
        let mut now = T0;
        for (step, (advance, op)) in schedule.into_iter().enumerate() {
            now += advance;
            match op {
                Op::Limit(permits) | Op::Peek(permits) => {
                    let permits = permits.min(quota.limit());
                    if model.decide(now, permits).allowed {
                        let receipt = model.grant(now, permits, step as u64);
                        grants.push(Grant::new(quota, receipt, now, step));
                    }
                }
                Op::Refund(index) => {
                    if let Some(receipt) = refund_target(&mut grants, index, step) {
                        model.refund(now, &receipt).map_err(|e| TestCaseError::fail(e.to_string()))?;
                    }
                }
            }
        }
        if let Some(excess) = definition_excess(quota, &grants) {
            prop_assert!(false, "{:?}: {} (grants {:?})", quota, excess, grants);
        }
    }
}

/// Schedules of grants (any permits up to 12, clamped to the limit) and refunds by receipt.
fn grants_and_refunds() -> impl Strategy<Value = Vec<(u64, Op)>> {
    let op = prop_oneof![3 => (1u32..=12).prop_map(Op::Limit), 2 => any::<usize>().prop_map(Op::Refund)];
    prop::collection::vec((advance(), op), 1..60)
}

/// The receipt `Op::Refund(index)` refunds: the index-th (modulo) of the grants not refunded yet, marked refunded at
/// `step`; None when every grant was refunded.
fn refund_target(grants: &mut [Grant], index: usize, step: usize) -> Option<Receipt> {
    let open: Vec<usize> = (0..grants.len()).filter(|&i| grants[i].refunded_step.is_none()).collect();
    let chosen = *open.get(index % open.len().max(1))?;
    grants[chosen].refunded_step = Some(step);
    Some(grants[chosen].receipt)
}

/// The time the definition checker files a grant under, from its receipt: the grant's time (token bucket, GCRA), its
/// window's start (fixed window), else the explicit time it was decided at.
fn time_of(quota: Quota, receipt: &Receipt, now: u64) -> u64 {
    match quota.algorithm() {
        Algorithm::TokenBucket | Algorithm::Gcra => receipt.mark().parse().expect("a time receipt"),
        Algorithm::FixedWindow | Algorithm::SlidingWindow => {
            receipt.mark().parse::<u64>().expect("a window receipt") * quota.interval_ms()
        }
        _ => now,
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
    let mut runner = TestRunner::new(Config { source_file: Some(file!()), ..config(96) });
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
    let mut grants: Vec<Grant> = Vec::new();
    let mut now = start;
    for (step, (advance, op)) in schedule.into_iter().enumerate() {
        now += advance;
        let at = limiter.clone().at(now);
        match op {
            Op::Limit(permits) => {
                let actual = at.limit("id", permits).await.unwrap();
                let verdict = model.decide(now, permits);
                let mut wanted = expected(&verdict, quota.limit(), verdict.allowed);
                if verdict.allowed {
                    let receipt = model.grant(now, permits, grant_id(actual.receipt));
                    wanted.receipt = Some(receipt);
                    grants.push(Grant::new(quota, receipt, now, step));
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
            Op::Refund(index) => {
                let Some(receipt) = refund_target(&mut grants, index, step) else {
                    continue;
                };
                let actual = at.refund("id", &receipt).await.unwrap();
                let given = model.refund(now, &receipt).unwrap();
                let standing = model.decide(now, 1).now;
                prop_assert_eq!(
                    (actual.success, actual.remaining, actual.reset),
                    (given, standing.remaining, standing.reset),
                    "refund of {} at +{}",
                    receipt,
                    now - start
                );
            }
        }
    }
    if let Some(excess) = definition_excess(quota, &grants) {
        prop_assert!(false, "{:?}: {} (grants {:?})", quota, excess, grants);
    }
    Ok(())
}

#[test]
fn grants_not_refunded_keep_each_algorithms_definition_on_real_redis() {
    // The scripts alone, no model: grants and refunds by receipt at explicit times, then the definition's bound.
    let strategy = (any_quota(), 0u64..10_000, grants_and_refunds());
    check_on_redis(strategy, async |stack, (quota, offset, schedule)| {
        let limiter = Limiter::new(stack.client(), &fresh_name(), quota).unwrap();
        let mut grants: Vec<Grant> = Vec::new();
        let mut now = T0 + offset;
        for (step, (advance, op)) in schedule.into_iter().enumerate() {
            now += advance;
            let at = limiter.clone().at(now);
            match op {
                Op::Limit(permits) | Op::Peek(permits) => {
                    let decision = at.limit("id", permits.min(quota.limit())).await.unwrap();
                    if let Some(receipt) = decision.receipt {
                        grants.push(Grant::new(quota, receipt, now, step));
                    }
                }
                Op::Refund(index) => {
                    if let Some(receipt) = refund_target(&mut grants, index, step) {
                        at.refund("id", &receipt).await.unwrap();
                    }
                }
            }
        }
        if let Some(excess) = definition_excess(quota, &grants) {
            prop_assert!(false, "{:?}: {} (grants {:?})", quota, excess, grants);
        }
        Ok(())
    });
}

#[test]
fn across_slots_grants_kept_keep_each_algorithms_definition_on_real_redis() {
    // Two limits (in two slots, unless their names hash alike) decided across slots at explicit times: when one
    // denies, the other's grant is given back by its receipt. The grants each limit kept must keep its definition.
    let strategy = (any_quota(), any_quota(), 0u64..10_000).prop_flat_map(|(a, b, offset)| {
        let steps = prop::collection::vec((advance(), 1..=a.limit().min(b.limit())), 1..60);
        (Just([a, b]), Just(offset), steps)
    });
    check_on_redis(strategy, async |stack, (quotas, offset, schedule)| {
        let limiters = quotas.map(|quota| Limiter::new(stack.client(), &fresh_name(), quota).unwrap());
        let mut grants: [Vec<Grant>; 2] = Default::default();
        let mut now = T0 + offset;
        for (step, (advance, permits)) in schedule.into_iter().enumerate() {
            now += advance;
            let timed = limiters.clone().map(|limiter| limiter.at(now));
            let requests = [timed[0].request("id", permits), timed[1].request("id", permits)];
            let outcome = limit::limit_all_across_slots(&requests).await.unwrap();
            prop_assert!(outcome.failed.is_empty() && !matches!(outcome.give_back, limit::GiveBack::Failed(_)));
            for (i, decision) in outcome.decisions.iter().enumerate() {
                let decision = decision.ok_or_else(|| TestCaseError::fail("a decision per limit"))?;
                // Kept: granted and not given back (a grant given back has no receipt left).
                if let Some(receipt) = decision.receipt.filter(|_| decision.success) {
                    grants[i].push(Grant::new(quotas[i], receipt, now, step));
                }
            }
        }
        for (quota, grants) in quotas.iter().zip(&grants) {
            if let Some(excess) = definition_excess(*quota, grants) {
                prop_assert!(false, "{:?}: {} (grants {:?})", quota, excess, grants);
            }
        }
        Ok(())
    });
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
    let limiters: Vec<Limiter> =
        quotas.iter().map(|&quota| Limiter::new(stack.client(), &fresh_name(), quota).unwrap()).collect();
    let mut models: Vec<ModelLimit> = quotas.iter().map(|&quota| ModelLimit::new(quota)).collect();
    let mut now = start;
    for (step, permits) in schedule {
        now += step;
        let timed: Vec<Limiter> = limiters.iter().map(|limiter| limiter.clone().at(now)).collect();
        let requests: Vec<_> = timed.iter().map(|limiter| limiter.request("id", permits)).collect();
        let actual = limit::limit_all(&requests).await.unwrap();
        let grant_ids: HashMap<usize, u64> =
            (actual.decisions.iter().enumerate()).map(|(i, decision)| (i, grant_id(decision.receipt))).collect();
        let mut entries: Vec<(&mut ModelLimit, u32, u64)> =
            models.iter_mut().enumerate().map(|(i, model)| (model, permits, grant_ids[&i])).collect();
        let (verdicts, receipts) = decide_all(&mut entries, now);
        prop_assert_eq!(actual.success, receipts.is_some(), "at +{} ms", now - start);
        for (i, (decision, verdict)) in actual.decisions.iter().zip(&verdicts).enumerate() {
            let mut wanted = expected(verdict, quotas[i].limit(), receipts.is_some());
            wanted.receipt = receipts.as_ref().map(|receipts| receipts[i]);
            prop_assert_eq!(decision, &wanted, "limit {} of {:?} at +{} ms", i, quotas, now - start);
        }
    }
    Ok(())
}
