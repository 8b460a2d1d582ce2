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

/// The reserve script at explicit time `at`: `permits` of a GCRA of `burst` at `rate` per second, and `block` more
/// whose slots start at least `window` ms from now and whose use starts within `horizon` ms; the reply's seven
/// numbers.
async fn reserve(
    stack: &Stack,
    key: &str,
    permits: u32,
    (burst, rate): (u32, u32),
    block: (u32, u64, u64),
    at: u64,
) -> [i64; 7] {
    let request = format!("{permits}:{burst}:1000:{rate}");
    let (block, window, horizon) = block;
    let reply = RESERVE_GCRA
        .run(
            &stack.client(),
            &[key],
            &[request, format!("{block}:{window}:{horizon}"), at.to_string()],
        )
        .await
        .unwrap();
    reply.into_tuple::<7>().unwrap().map(|value| value.into_int().unwrap())
}

#[tokio::test]
async fn reserved_permits_take_the_next_slots_from_the_window_on_and_start_on_the_refill_pace() {
    let stack = Stack::start().await;
    let t = T0 as i64;
    // Burst 10, 10 per second: a slot is 100 ms (1000 units; 10 come back per ms; the bucket holds 10 000). The
    // request takes the slot to T0 + 100, later than the window (T0 + 50); the 5 reserved take the slots from there
    // to T0 + 600 (charged: 1000 units). The i-th is usable from its slot's end less 1 s (all before now: at once)
    // until its slot's start.
    assert_eq!(
        reserve(&stack, "r", 1, (10, 10), (5, 50, 200), T0).await,
        [1, t, 5, 1000, 4, t + 600, 0]
    );
    // Busy now: the request's slot ends at T0 + 700 and the 5 reserved follow; the i-th starts ceil((7000 + i ×
    // 1000 − 10 000) / 10) ms from now: 0, 0, 0, 100, 200, the 5th just within the horizon.
    assert_eq!(
        reserve(&stack, "r", 1, (10, 10), (5, 50, 200), T0).await,
        [1, t, 5, 7000, 0, t + 1200, 0]
    );
    // Nothing left now: denied (the next slot ends 300 ms too late), and none would start within 200 ms.
    assert_eq!(
        reserve(&stack, "r", 1, (10, 10), (5, 50, 200), T0).await,
        [0, t, 0, 12000, 0, t + 1200, 300]
    );
    // The state is lua/gcra.lua's: TAT = T0 + 1200.
    let state = stack
        .client()
        .command(&edgelimit::Command::new("GET").arg("r"))
        .await
        .unwrap();
    assert_eq!(state, Value::Bytes(format!("gcra:{}:0", T0 + 1200).into_bytes()));
    // Once TAT has passed: nothing asked, nothing charged, a plain decision.
    assert_eq!(
        reserve(&stack, "r", 1, (10, 10), (0, 50, 200), T0 + 5000).await,
        [1, t + 5000, 0, 1000, 9, t + 5100, 0]
    );
}

#[tokio::test]
async fn permits_reserved_on_an_idle_bucket_and_used_at_their_latest_leave_no_more_than_the_limit() {
    let stack = Stack::start().await;
    // Burst 10, 10 per second. At T0 the bucket is idle: 8 permits (and the request's 1) are reserved, their slots
    // from T0 + 200 (the window) on, so the first of them may be used until T0 + 200. If its holder uses all 8
    // then (each within its span: the i-th until T0 + 100 + i × 100), plain decisions at T0 + 200 must find at
    // most 2 left, whatever the bucket refilled in between (slots taken from TAT instead would leave 3).
    let gcra = Limiter::new(
        stack.client(),
        "idle",
        Quota::gcra(10, 10, Duration::from_secs(1)).unwrap(),
    )
    .unwrap();
    let key = gcra.state_key("id");
    let [granted, _, reserved, charged, ..] = reserve(&stack, &key, 1, (10, 10), (8, 200, 1000), T0).await;
    assert_eq!((granted, reserved, charged), (1, 8, 2000));
    let mut plain = 0;
    while gcra.clone().at(T0 + 200).limit("id", 1).await.unwrap().success {
        plain += 1;
    }
    assert_eq!(plain, 2, "the reserved 8 at T0 + 200 and these: the limit's 10");
}

#[tokio::test]
async fn arguments_no_client_sends_are_refused_by_name() {
    let stack = Stack::start().await;
    for (request, block, what) in [
        ("1:10:1000:10", "11:50:200", "invalid block"),
        ("1:10:1000:10", "-1:50:200", "invalid block"),
        ("1:10:1000:10", "2:0:200", "invalid block"),
        ("1:10:1000:10", "2:50:60001", "invalid block"),
        ("1:10:1000:10", "2:201:200", "invalid block"),
        ("1:10:1000:10", "2:200", "invalid block"),
        ("1:10:1000:10", "x", "invalid block"),
        ("11:10:1000:10", "1:50:200", "invalid request"),
        ("1:10:1000", "2:50:200", "invalid request"),
        ("", "2:50:200", "invalid request"),
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
        (100, 1000, Duration::from_millis(10), none, 50, "light"),
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
    assert!(error.to_string().contains("needs a GCRA quota"), "{error}");
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
    // No permits is what no decision means, refused as every limiter refuses it.
    assert!(matches!(
        reserved.limit("x", 0).await,
        Err(Error::InvalidArgument(message)) if message.contains("permits must be at least 1")
    ));
}
