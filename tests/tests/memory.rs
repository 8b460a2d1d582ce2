//! The memory backend against real Redis, at explicit times: one scenario table (weighted permits, denials, refunds by
//! receipt, peeks, time crossing windows and refills) through `Ratelimit::in_memory` on a test clock and through the
//! scripts (`Limiter::at`), for every algorithm alone and for several limits together. Every decision must be the
//! same; a logged grant's receipt differs only in its random id.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use edgelimit::limit::{self, Algorithm, Limiter, Memory, Quota, Receipt};
use edgelimit::ratelimit::{Limit, Ratelimit};
use edgelimit::Decision;
use edgelimit_tests::Stack;

const T0: u64 = 1_700_000_000_123;

#[derive(Clone, Copy, Debug)]
enum Op {
    Limit(u32),
    Peek,
    /// Refund the n-th grant (nothing if there is none).
    Refund(usize),
}

/// (ms to advance first, operation): bursts, weighted permits above what is left, refunds of old and new grants, and
/// steps across windows, refills and lease expiries.
const SCHEDULE: &[(u64, Op)] = &[
    (0, Op::Limit(2)),
    (0, Op::Limit(3)),
    (1, Op::Limit(1)),
    (0, Op::Peek),
    (10, Op::Refund(0)),
    (0, Op::Limit(2)),
    (400, Op::Limit(3)),
    (600, Op::Limit(1)),
    (0, Op::Refund(1)),
    (0, Op::Peek),
    (999, Op::Limit(4)),
    (1, Op::Limit(4)),
    (1500, Op::Limit(2)),
    (0, Op::Refund(3)),
    (2500, Op::Limit(4)),
    (0, Op::Limit(1)),
    (0, Op::Peek),
];

/// A decision as both sides must agree on it: a log's receipt without its id.
fn comparable(decision: &Decision) -> (bool, u64, u64, u64, u64, Option<(u32, String)>) {
    let receipt = decision.receipt.map(|receipt: Receipt| {
        let mark = receipt.mark();
        (receipt.permits(), mark.split('-').next().unwrap_or(mark).to_owned())
    });
    (decision.success, decision.limit, decision.remaining, decision.reset, decision.retry_after, receipt)
}

async fn same_decisions(stack: &Stack, case: &str, quotas: &[Quota]) {
    let clock = Arc::new(AtomicU64::new(T0));
    let read = clock.clone();
    let memory = Memory::with_clock(Box::new(move || Ok(read.load(Ordering::Relaxed))));
    let limits: Vec<Limit> =
        (quotas.iter().enumerate()).map(|(i, &quota)| Limit { quota, name: Some(format!("{case}{i}")) }).collect();
    let local = Ratelimit::in_memory(&limits, memory, "edgelimit").unwrap();
    let limiters: Vec<Limiter> = (limits.iter())
        .map(|limit| Limiter::new(stack.client(), limit.name.as_deref().unwrap(), limit.quota).unwrap())
        .collect();
    let (mut local_grants, mut redis_grants) = (Vec::new(), Vec::new());
    let mut now = T0;
    for (step, &(advance, op)) in SCHEDULE.iter().enumerate() {
        now += advance;
        clock.store(now, Ordering::Relaxed);
        let timed: Vec<Limiter> = limiters.iter().map(|limiter| limiter.clone().at(now)).collect();
        let smallest = quotas.iter().map(Quota::limit).min().unwrap();
        let (mine, theirs) = match op {
            Op::Limit(permits) => {
                let permits = permits.min(smallest);
                let requests: Vec<_> = timed.iter().map(|limiter| limiter.request("id", permits)).collect();
                let theirs = limit::limit_all(&requests).await.unwrap();
                let mine = local.limit("id", permits).await.unwrap();
                assert_eq!(mine.decision.success, theirs.success, "{case} step {step}");
                if theirs.success {
                    local_grants.push(mine.limits.iter().map(|d| d.receipt.unwrap()).collect::<Vec<_>>());
                    redis_grants.push(theirs.decisions.iter().map(|d| d.receipt.unwrap()).collect::<Vec<_>>());
                }
                (mine.limits, theirs.decisions)
            }
            Op::Peek => {
                let requests: Vec<_> = timed.iter().map(|limiter| limiter.request("id", 1)).collect();
                let theirs = limit::peek_all(&requests).await.unwrap().speaking_for_all();
                (vec![local.remaining("id").await.unwrap()], vec![theirs])
            }
            Op::Refund(n) => {
                let (Some(mine), Some(theirs)) = (local_grants.get(n), redis_grants.get(n)) else {
                    continue;
                };
                let refunds: Vec<_> =
                    (timed.iter().zip(theirs)).map(|(limiter, receipt)| (limiter.request("id", 1), *receipt)).collect();
                let theirs = limit::refund_all(&refunds).await.unwrap().into_iter().map(Result::unwrap).collect();
                (local.refund("id", mine).await.unwrap(), theirs)
            }
        };
        let (mine, theirs): (Vec<_>, Vec<_>) =
            (mine.iter().map(comparable).collect(), theirs.iter().map(comparable).collect());
        assert_eq!(mine, theirs, "{case} step {step} ({op:?}) at +{} ms", now - T0);
    }
}

#[tokio::test]
async fn memory_decides_as_redis_for_every_algorithm_weighted_and_several_limits() {
    let stack = Stack::start().await;
    let second = Duration::from_secs(1);
    for algorithm in Algorithm::ALL {
        let quota = Quota::new(algorithm, 5, second, 2).unwrap();
        same_decisions(&stack, &format!("{algorithm}"), &[quota]).await;
    }
    let several = [
        Quota::sliding_log(4, second).unwrap(),
        Quota::token_bucket(6, 1, Duration::from_secs(3)).unwrap(),
        Quota::fixed_window(7, Duration::from_secs(2)).unwrap(),
        Quota::concurrency(5, second).unwrap(),
    ];
    same_decisions(&stack, "several", &several).await;
}
