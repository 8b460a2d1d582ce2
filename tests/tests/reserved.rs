//! Reserved blocks (`lua/reserve/gcra.lua`, `src/limit/reserved.rs`) against real Redis through the real bridge:
//! the script's rule to the unit at explicit times (where the unsafe variant, slots taken from now instead of from
//! the block's end, fails), and concurrent clients granting from blocks checked for exactness: each reserved grant
//! is counted in every window its span (its permit's start to the block's end) overlaps.

use std::time::Duration;

use edgelimit::limit::{Limiter, Quota, Reserved, ReservedDecision};
use edgelimit::lua::RESERVE_GCRA;
use edgelimit::{Error, Value};
use edgelimit_tests::Stack;

const T0: u64 = 1_700_000_000_000;

/// The reserve script at explicit time `at`: `permits` of a GCRA of `burst` at `rate` per second, and a block of
/// `block` more for `length` ms; the reply's eight numbers.
async fn reserve(stack: &Stack, permits: u32, burst: u32, rate: u32, block: u32, length: u64, at: u64) -> [i64; 8] {
    let request = format!("{permits}:{burst}:1000:{rate}");
    let reply = RESERVE_GCRA
        .run(
            &stack.client(),
            &["r:key"],
            &[request, format!("{block}:{length}:{length}"), at.to_string()],
        )
        .await
        .unwrap();
    reply.into_tuple::<8>().unwrap().map(|value| value.into_int().unwrap())
}

#[tokio::test]
async fn a_block_takes_the_slots_after_its_end_and_its_permits_start_on_the_refill_pace() {
    let stack = Stack::start().await;
    let t = T0 as i64;
    // Burst 10, 10 per second: a slot is 100 ms (1000 units; 10 come back per ms; the bucket holds 10 000). The
    // request takes a slot now; the block's 5 take the slots after its end, T0 + 200 (charged: 2000 units) to
    // T0 + 700, each ending within 1 s of now: all start at once.
    assert_eq!(
        reserve(&stack, 1, 10, 10, 5, 200, T0).await,
        [1, t, t + 200, 5, 2000, 3, t + 700, 0]
    );
    // Busy now: the request's slot ends at T0 + 800, the block's from there; only 4 start by the block's end (the
    // i-th from ceil((8000 + i × 1000 − 10 000) / 10) ms: 0, 0, 100, 200).
    assert_eq!(
        reserve(&stack, 1, 10, 10, 5, 200, T0).await,
        [1, t, t + 200, 4, 8000, 0, t + 1200, 0]
    );
    // Nothing left: denied (the next slot ends 300 ms too late), and no block starts by its end.
    assert_eq!(
        reserve(&stack, 1, 10, 10, 5, 200, T0).await,
        [0, t, t + 200, 0, 12000, 0, t + 1200, 300]
    );
    // The state is lua/gcra.lua's: TAT = T0 + 1200.
    let state = stack
        .client()
        .command(&edgelimit::Command::new("GET").arg("r:key"))
        .await
        .unwrap();
    assert_eq!(state, Value::Bytes(format!("gcra:{}:0", T0 + 1200).into_bytes()));
    // Once TAT has passed: no block asked, none charged, a plain decision.
    assert_eq!(
        reserve(&stack, 1, 10, 10, 0, 200, T0 + 5000).await,
        [1, t + 5000, t + 5200, 0, 2000, 9, t + 5100, 0]
    );
}

#[tokio::test]
async fn permits_reserved_on_an_idle_bucket_and_used_at_the_block_end_leave_no_more_than_the_limit() {
    let stack = Stack::start().await;
    // Burst 10, 10 per second. At T0 the bucket is idle: a block of 8 (and the request's 1) is reserved until
    // T0 + 200. Its holder may use all 8 at T0 + 200; plain decisions at T0 + 200 must then find at most 2 left,
    // whatever the bucket refilled in between (taking the block's slots from now instead would leave 3).
    let gcra = Limiter::new(
        stack.client(),
        "idle",
        Quota::gcra(10, 10, Duration::from_secs(1)).unwrap(),
    )
    .unwrap();
    let key = gcra.state_key("id");
    let reply = RESERVE_GCRA
        .run(
            &stack.client(),
            &[&key],
            &["1:10:1000:10", "8:200:200", &T0.to_string()],
        )
        .await
        .unwrap();
    let [granted, _, until, reserved, ..] = reply.into_tuple::<8>().unwrap().map(|value| value.into_int().unwrap());
    assert_eq!((granted, until, reserved), (1, T0 as i64 + 200, 8));
    let mut plain = 0;
    while gcra.clone().at(T0 + 200).limit("id", 1).await.unwrap().success {
        plain += 1;
    }
    assert_eq!(plain, 2, "the block's 8 at T0 + 200 and these: the limit's 10");
}

#[tokio::test]
async fn arguments_no_client_sends_are_refused_by_name() {
    let stack = Stack::start().await;
    for (request, block, what) in [
        ("1:10:1000:10", "11:200:200", "invalid block"),
        ("1:10:1000:10", "-1:200:200", "invalid block"),
        ("1:10:1000:10", "2:0:0", "invalid block"),
        ("1:10:1000:10", "2:60001:0", "invalid block"),
        ("1:10:1000:10", "2:200:201", "invalid block"),
        ("1:10:1000:10", "2:200", "invalid block"),
        ("1:10:1000:10", "x", "invalid block"),
        ("11:10:1000:10", "1:200:200", "invalid request"),
        ("1:10:1000", "2:200:200", "invalid request"),
        ("", "2:200:200", "invalid request"),
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
    let exists = stack
        .client()
        .command(&edgelimit::Command::new("EXISTS").arg("r:key"))
        .await
        .unwrap();
    assert_eq!(exists, Value::Int(0));
}

/// `clients` tasks, each a client of its own (as isolates or processes are), deciding one identifier every
/// `pause` for `run`, in bursts of `burst` then a rest of `rest` (none when zero), each client's bursts starting
/// a little after the previous client's; every decision.
async fn hammer(
    reserved: &Reserved,
    clients: usize,
    pause: Duration,
    bursts: (Duration, Duration),
    run: Duration,
) -> Vec<ReservedDecision> {
    let (burst, rest) = bursts;
    let tasks: Vec<_> = (0..clients)
        .map(|client| {
            let reserved = reserved.fresh();
            tokio::spawn(async move {
                let started = std::time::Instant::now();
                tokio::time::sleep(pause * 7 * client as u32).await;
                let mut decisions = Vec::new();
                let mut burst_started = std::time::Instant::now();
                while started.elapsed() < run {
                    decisions.push(reserved.limit("hot", 1).await.unwrap());
                    tokio::time::sleep(pause).await;
                    if !rest.is_zero() && burst_started.elapsed() >= burst {
                        tokio::time::sleep(rest).await;
                        burst_started = std::time::Instant::now();
                    }
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
    let none = (Duration::ZERO, Duration::ZERO);
    for (burst, rate, pause, bursts, length, name) in [
        // Saturated: 4 clients asking every 2 ms of a limit of 50 per second (refilled from empty in 400 ms).
        (20, 50, Duration::from_millis(2), none, 100, "saturated"),
        // Bursts of 60 ms and rests of 300 ms, in which the bucket refills: blocks reserved while it is idle.
        (
            20,
            50,
            Duration::from_millis(2),
            (Duration::from_millis(60), Duration::from_millis(300)),
            100,
            "bursts",
        ),
        // Under the limit: 4 clients asking every 10 ms (400/s) of 1000 per second (refilled in 100 ms).
        (100, 1000, Duration::from_millis(10), none, 20, "light"),
    ] {
        let limiter = Limiter::new(
            stack.client(),
            name,
            Quota::gcra(burst, rate, Duration::from_secs(1)).unwrap(),
        )
        .unwrap();
        let reserved = Reserved::new(limiter, Duration::from_millis(length)).unwrap();
        let decisions = hammer(&reserved, 4, pause, bursts, Duration::from_millis(1500)).await;
        let excess = worst_excess(&decisions, burst.into(), rate.into());
        assert!(excess <= 0, "{name}: a window held {excess} grants too many");
        let local = decisions.iter().filter(|d| d.local && d.decision.success).count();
        let granted = decisions.iter().filter(|d| d.decision.success).count();
        let remote = decisions.iter().filter(|d| !d.local).count();
        eprintln!(
            "{name}: {} decisions, {granted} granted ({local} from blocks), {remote} round trips",
            decisions.len()
        );
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
