//! Reserved blocks (`lua/reserve/gcra.lua`, `src/limit/reserved.rs`) against real Redis through the real bridge:
//! the script's rule to the unit at explicit times, and concurrent clients granting from blocks checked for
//! exactness, each reserved grant counted in every window its block's span overlaps.

use std::time::Duration;

use edgelimit::limit::{Limiter, Quota, Reserved, ReservedDecision};
use edgelimit::lua::RESERVE_GCRA;
use edgelimit::{Error, Value};
use edgelimit_tests::Stack;

const T0: u64 = 1_700_000_000_000;

/// The reserve script at explicit time `at`: `permits` of a GCRA of `burst` at `rate` per second, a block of `block`
/// for `length` ms; the reply's six numbers.
async fn reserve(stack: &Stack, permits: u32, burst: u32, rate: u32, block: u32, length: u64, at: u64) -> [i64; 6] {
    let request = format!("{permits}:{burst}:1000:{rate}");
    let reply = RESERVE_GCRA
        .run(
            &stack.client(),
            &["r:key"],
            &[request, format!("{block}:{length}"), at.to_string()],
        )
        .await
        .unwrap();
    reply.into_tuple::<6>().unwrap().map(|value| value.into_int().unwrap())
}

#[tokio::test]
async fn a_block_is_checked_at_its_start_and_charged_at_its_end_and_at_most_half_of_what_is_left() {
    let stack = Stack::start().await;
    // Burst 10, 10 per second: a permit every 100 ms. A block of 200 ms is charged as if used at its end: TAT =
    // max(TAT, T0 + 200) + 4 × 100. Of the 8 permits that then fit, the block is half: 4 (the request's among them).
    assert_eq!(
        reserve(&stack, 1, 10, 10, 6, 200, T0).await,
        [4, T0 as i64, T0 as i64 + 200, 4, T0 as i64 + 600, 0]
    );
    // Now the bucket is busy (TAT − now = 600 ms > 200): nothing is lost to the span, 4 fit, half is 2.
    assert_eq!(
        reserve(&stack, 1, 10, 10, 6, 200, T0).await,
        [2, T0 as i64, T0 as i64 + 200, 2, T0 as i64 + 800, 0]
    );
    // 2 fit, half is 1: no more than the request, so it is decided alone, as lua/gcra.lua would: no block.
    assert_eq!(
        reserve(&stack, 1, 10, 10, 6, 200, T0).await,
        [1, T0 as i64, T0 as i64, 1, T0 as i64 + 900, 0]
    );
    assert_eq!(
        reserve(&stack, 1, 10, 10, 6, 200, T0).await,
        [1, T0 as i64, T0 as i64, 0, T0 as i64 + 1000, 0]
    );
    // Empty: denied, and the permit is back in 100 ms.
    assert_eq!(
        reserve(&stack, 1, 10, 10, 6, 200, T0).await,
        [0, T0 as i64, T0 as i64, 0, T0 as i64 + 1000, 100]
    );
    // A block no bigger than the request is a plain decision even with room: nothing charged for a span.
    assert_eq!(
        reserve(&stack, 1, 10, 10, 1, 200, T0 + 5000).await,
        [1, T0 as i64 + 5000, T0 as i64 + 5000, 9, T0 as i64 + 5100, 0]
    );
    // The state is lua/gcra.lua's: a plain decision reads what the block wrote.
    let state = stack
        .client()
        .command(&edgelimit::Command::new("GET").arg("r:key"))
        .await
        .unwrap();
    assert_eq!(state, Value::Bytes(format!("gcra:{}:0", T0 + 5100).into_bytes()));
}

#[tokio::test]
async fn arguments_no_client_sends_are_refused_by_name() {
    let stack = Stack::start().await;
    for (request, block, what) in [
        ("1:10:1000:10", "11:200", "invalid block"),
        ("2:10:1000:10", "1:200", "invalid block"),
        ("1:10:1000:10", "2:0", "invalid block"),
        ("1:10:1000:10", "2:60001", "invalid block"),
        ("1:10:1000:10", "x", "invalid block"),
        ("11:10:1000:10", "11:200", "invalid request"),
        ("1:10:1000", "2:200", "invalid request"),
        ("", "2:200", "invalid request"),
    ] {
        let error = RESERVE_GCRA
            .run(&stack.client(), &["r:key"], &[request, block])
            .await
            .unwrap_err();
        assert!(
            matches!(&error, Error::InvalidArgument(message) if message.contains(what)),
            "{request} {block}: {error}"
        );
    }
    assert_eq!(
        stack
            .client()
            .command(&edgelimit::Command::new("EXISTS").arg("r:key"))
            .await
            .unwrap(),
        Value::Int(0)
    );
}

/// `clients` tasks deciding one identifier every `pause` for `run`; every decision.
async fn hammer(reserved: &Reserved, clients: usize, pause: Duration, run: Duration) -> Vec<ReservedDecision> {
    let tasks: Vec<_> = (0..clients)
        .map(|_| {
            let reserved = reserved.clone();
            tokio::spawn(async move {
                let started = std::time::Instant::now();
                let mut decisions = Vec::new();
                while started.elapsed() < run {
                    decisions.push(reserved.limit("hot", 1).await.unwrap());
                    tokio::time::sleep(pause).await;
                }
                decisions
            })
        })
        .collect();
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.unwrap());
    }
    all
}

/// The most grants any window [a, b] holds beyond what GCRA allows it (burst + (b − a) × rate / 1000), each grant
/// counted in every window its span overlaps; 0 or less is exact.
fn worst_excess(decisions: &[ReservedDecision], burst: u64, rate: u64) -> i64 {
    let mut spans: Vec<(u64, u64)> = decisions
        .iter()
        .filter(|d| d.decision.success)
        .map(|d| d.span)
        .collect();
    spans.sort();
    let mut worst = i64::MIN;
    // The tightest window holding a set of spans starts at one of their ends, a, and ends at the latest of their
    // starts (or at a, when they all hold a). So: for each end a, the spans that end at a or later, by start; the
    // first n of them all overlap [a, max(a, the n-th start)].
    for &(_, a) in &spans {
        let by_start = spans.iter().filter(|(_, end)| *end >= a);
        for (n, &(start, _)) in by_start.enumerate() {
            let b = start.max(a);
            let allowed = (burst + (b - a) * rate / 1000) as i64;
            worst = worst.max(n as i64 + 1 - allowed);
        }
    }
    worst
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_clients_granting_from_blocks_never_exceed_the_limit_in_any_window() {
    let stack = Stack::start().await;
    for (burst, rate, pause, length, name) in [
        // Saturated: 4 clients asking every 2 ms of a limit of 50 per second (refilled from empty in 400 ms).
        (20, 50, Duration::from_millis(2), 100, "saturated"),
        // Under the limit: 4 clients asking every 10 ms (400/s) of 1000 per second (refilled in 100 ms).
        (100, 1000, Duration::from_millis(10), 20, "light"),
    ] {
        let limiter = Limiter::new(
            stack.client(),
            name,
            Quota::gcra(burst, rate, Duration::from_secs(1)).unwrap(),
        )
        .unwrap();
        let reserved = Reserved::new(limiter, Duration::from_millis(length)).unwrap();
        let decisions = hammer(&reserved, 4, pause, Duration::from_millis(1500)).await;
        let excess = worst_excess(&decisions, burst.into(), rate.into());
        assert!(excess <= 0, "{name}: a window held {excess} grants too many");
        let local = decisions.iter().filter(|d| d.local && d.decision.success).count();
        let granted = decisions.iter().filter(|d| d.decision.success).count();
        if name == "light" {
            assert!(local > 0, "{name}: {granted} granted, none from a block");
        }
    }
}

#[tokio::test]
async fn a_reserved_limiter_needs_a_gcra_quota_in_code_and_a_sane_length() {
    let stack = Stack::start().await;
    let window = Limiter::new(
        stack.client(),
        "w",
        Quota::fixed_window(10, Duration::from_secs(1)).unwrap(),
    )
    .unwrap();
    let error = Reserved::new(window, Duration::from_millis(100)).unwrap_err();
    assert!(error.to_string().contains("need a GCRA quota"), "{error}");
    let gcra = Limiter::new(
        stack.client(),
        "g",
        Quota::gcra(10, 10, Duration::from_secs(1)).unwrap(),
    )
    .unwrap();
    assert!(Reserved::new(gcra.clone(), Duration::ZERO).is_err());
    assert!(Reserved::new(gcra.clone(), Duration::from_secs(61)).is_err());
    // 10 per second refill from empty in 1 s: a block of more than 500 ms is refused, with the longest to use.
    let error = Reserved::new(gcra.clone(), Duration::from_millis(501)).unwrap_err();
    assert!(error.to_string().contains("use at most 500 ms"), "{error}");
    assert!(Reserved::new(gcra.clone().at(T0), Duration::from_millis(100)).is_err());
    let reserved = Reserved::new(gcra, Duration::from_millis(100)).unwrap();
    assert!(matches!(
        reserved.limit("x", 11).await,
        Err(Error::PermitsExceedRate { permits: 11, rate: 10 })
    ));
    assert!(matches!(
        reserved.limit("x", 0).await,
        Err(Error::PermitsExceedRate { .. })
    ));
}
