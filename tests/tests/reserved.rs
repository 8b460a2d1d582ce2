//! Reserved blocks (`lua/reserve/<algorithm>.lua`, `src/limit/reserved.rs`) against real Redis through the real
//! bridge: each script's rule to the unit at explicit times (where GCRA's unsafe variant, slots taken from now instead
//! of from the block's end, fails), and concurrent clients granting from blocks checked for exactness: each reserved
//! grant is counted in every window its span (where its use may fall) overlaps; the same under several limits at
//! once (`src/limit/reserved/several.rs`), each limit's grants checked in its own windows.

use std::time::Duration;

use edgelimit::limit::{Algorithm, Limiter, Quota, Reserved, ReservedAll, ReservedDecision, ReservedDecisions};
use edgelimit::lua::{LIMITS, RESERVE_FIXED_WINDOW, RESERVE_GCRA, RESERVE_SLIDING_LOG};
use edgelimit::ratelimit::{Limit, Options, Outcome, Ratelimit, Reason};
use edgelimit::{Command, Error, RestClient, Script, Value};
use edgelimit_cli::redis_cluster;
use edgelimit_tests::{grants_until_denied, relay_stalling_on, script_numbers, spawned_at_once, Stack, TOKEN};

const T0: u64 = 1_700_000_000_000;

/// The GCRA reserve script at explicit time `at`: `permits` of a GCRA of `burst` at `rate` per second, and `block`
/// more whose slots start at least `lead` ms from now and whose use starts within `horizon` ms; the reply's numbers.
async fn reserve(
    stack: &Stack,
    key: &str,
    permits: u32,
    (burst, rate): (u32, u32),
    (block, lead, horizon): (u32, u64, u64),
    at: u64,
) -> Vec<i64> {
    let request = format!("{permits}:{burst}:1000:{rate}");
    let arguments = [request, format!("{block}:{lead}:{horizon}"), at.to_string()];
    script_numbers(stack, &RESERVE_GCRA, key, &arguments).await
}

#[tokio::test]
async fn reserved_permits_take_the_next_slots_from_the_window_on_and_start_on_the_refill_pace() {
    let stack = Stack::start().await;
    let t = T0 as i64;
    // Burst 10, 10 per second: a slot is 100 ms (1000 units; 10 come back per ms; the bucket holds 10 000). The
    // request takes the slot to T0 + 100, later than the window (T0 + 50); the 5 reserved take the slots from there
    // to T0 + 600 (charged: 1000 units). The i-th is usable from its slot's end less 1 s (all before now: at once)
    // until its slot's start.
    assert_eq!(reserve(&stack, "r", 1, (10, 10), (5, 50, 200), T0).await, [1, t, 5, 1000, 4, t + 600, 0]);
    // Busy now: the request's slot ends at T0 + 700 and the 5 reserved follow; the i-th starts ceil((7000 + i ×
    // 1000 − 10 000) / 10) ms from now: 0, 0, 0, 100, 200, the 5th just within the horizon.
    assert_eq!(reserve(&stack, "r", 1, (10, 10), (5, 50, 200), T0).await, [1, t, 5, 7000, 0, t + 1200, 0]);
    // Nothing left now: denied (the next slot ends 300 ms too late), and none would start within 200 ms.
    assert_eq!(reserve(&stack, "r", 1, (10, 10), (5, 50, 200), T0).await, [0, t, 0, 12000, 0, t + 1200, 300]);
    // The state is lua/gcra.lua's: TAT = T0 + 1200.
    let state = stack.client().command(&edgelimit::Command::new("GET").arg("r")).await.unwrap();
    // With reserved permits, their slots' end (T0 + 1200) is marked in the remainder, so that no refund moves TAT
    // back over them (lua/limits/gcra.lua): 10 × (⌊2^32 / 10⌋ + 1 + T0 + 1200 + 1 − (T0 + 1200)).
    let marked = 10 * ((1u64 << 32) / 10 + 2);
    assert_eq!(state, Value::Bytes(format!("gcra:{}:{marked}", T0 + 1200).into_bytes()));
    // Once TAT has passed: nothing asked, nothing charged, a plain decision.
    assert_eq!(
        reserve(&stack, "r", 1, (10, 10), (0, 50, 200), T0 + 5000).await,
        [1, t + 5000, 0, 1000, 9, t + 5100, 0]
    );
}

#[tokio::test]
async fn a_refund_never_moves_a_gcra_bucket_back_over_reserved_slots() {
    let stack = Stack::start().await;
    let t = T0 as i64;
    // Burst 2, 2 per second: a slot is 500 ms (1000 units, 2 come back per ms).
    let gcra = Limiter::new(stack.client(), "g", Quota::gcra(2, 2, Duration::from_secs(1)).unwrap()).unwrap();
    let key = gcra.state_key("id");
    let plain = gcra.clone().at(T0).limit("id", 1).await.unwrap();
    assert!(plain.success);
    // The request takes the slot to T0 + 1000; 2 reserved take the slots to T0 + 2000, the first usable from
    // T0 + 500 until T0 + 1000, the second from T0 + 1000 until T0 + 1500.
    let request = "1:2:1000:2".to_owned();
    let arguments = [request, "2:1:1000".to_owned(), T0.to_string()];
    assert_eq!(script_numbers(&stack, &RESERVE_GCRA, &key, &arguments).await, [1, t, 2, 2000, 0, t + 2000, 0]);
    // The first grant refunded at T0 + 1: its 998 units would move TAT back to T0 + 1500, and a request at T0 + 1001
    // would be granted, while both reserved permits may be used at T0 + 1000: 3 in 1 ms, of a burst of 2. The
    // reserved slots' end is marked, so the refund gives nothing back and the request is denied.
    let refund = gcra.clone().at(T0 + 1).refund("id", &plain.receipt.unwrap()).await.unwrap();
    assert!(!refund.success);
    assert!(!gcra.clone().at(T0 + 1001).limit("id", 1).await.unwrap().success);
    // Once the reserved slots are behind: plain again, and refunds give back as before.
    let late = gcra.clone().at(T0 + 2000).limit("id", 1).await.unwrap();
    assert!(late.success);
    assert!(gcra.clone().at(T0 + 2001).refund("id", &late.receipt.unwrap()).await.unwrap().success);
}

#[tokio::test]
async fn permits_reserved_on_an_idle_bucket_and_used_at_their_latest_leave_no_more_than_the_limit() {
    let stack = Stack::start().await;
    // Burst 10, 10 per second. At T0 the bucket is idle: 8 permits (and the request's 1) are reserved, their slots
    // from T0 + 200 (the window) on, so the first of them may be used until T0 + 200. If its holder uses all 8
    // then (each within its span: the i-th until T0 + 100 + i × 100), plain decisions at T0 + 200 must find at
    // most 2 left, whatever the bucket refilled in between (slots taken from TAT instead would leave 3).
    let gcra = Limiter::new(stack.client(), "idle", Quota::gcra(10, 10, Duration::from_secs(1)).unwrap()).unwrap();
    let key = gcra.state_key("id");
    let reply = reserve(&stack, &key, 1, (10, 10), (8, 200, 1000), T0).await;
    let (granted, reserved, charged) = (reply[0], reply[2], reply[3]);
    assert_eq!((granted, reserved, charged), (1, 8, 2000));
    let plain = grants_until_denied(&gcra, "id", T0 + 200).await;
    assert_eq!(plain, 2, "the reserved 8 at T0 + 200 and these: the limit's 10");
}

#[tokio::test]
async fn a_fixed_window_reserves_what_is_left_in_the_window_until_its_last_ms() {
    let stack = Stack::start().await;
    let t = T0 as i64;
    // 10 per 1000 ms window; T0 starts a window. At T0 + 100 the request and 5 reserved, usable for the horizon.
    let at = |offset: u64, limit: u32, block: u32| {
        let arguments = [format!("1:{limit}:1000"), format!("{block}:50:200"), (T0 + offset).to_string()];
        let stack = &stack;
        async move { script_numbers(stack, &RESERVE_FIXED_WINDOW, "w", &arguments).await }
    };
    assert_eq!(at(100, 10, 5).await, [1, t + 100, 5, 200, 4, t + 1000, 0]);
    // At T0 + 900 the window's last ms is 99 ms away: the 3 left are usable until then.
    assert_eq!(at(900, 10, 5).await, [1, t + 900, 3, 99, 0, t + 1000, 0]);
    // Full: denied until the window ends; and 49 ms left is less than the lead, so nothing would be reserved.
    assert_eq!(at(950, 10, 5).await, [0, t + 950, 0, 49, 0, t + 1000, 50]);
    // A lowered limit below the count: denied, nothing left, nothing reserved.
    assert_eq!(at(960, 5, 5).await, [0, t + 960, 0, 39, 0, t + 1000, 40]);
    // The state is lua/fixed_window.lua's: plain decisions in the window find it full, and the next window empty.
    let window = Limiter::new(stack.client(), "w", Quota::fixed_window(10, Duration::from_secs(1)).unwrap()).unwrap();
    let key = window.state_key("id");
    assert_eq!(reserve_the_window(&stack, &key, T0 + 100).await[..3], [1, t + 100, 9]);
    assert!(!window.clone().at(T0 + 999).limit("id", 1).await.unwrap().success);
    assert!(window.clone().at(T0 + 1000).limit("id", 1).await.unwrap().success);
}

/// A fixed-window request of 1 permit of 10 per second at `at`, and a reservation of all that is left.
async fn reserve_the_window(stack: &Stack, key: &str, at: u64) -> Vec<i64> {
    let arguments = ["1:10:1000".to_owned(), "10:50:1000".to_owned(), at.to_string()];
    script_numbers(stack, &RESERVE_FIXED_WINDOW, key, &arguments).await
}

/// The sliding-log reserve script on `key` at T0 + `offset`: 1 permit of 10 per second, `block` more usable for
/// 200 ms, logged under `id`, with `returns`; the reply's seven numbers.
async fn reserve_log(stack: &Stack, key: &str, offset: u64, block: u32, id: &str, returns: &[String]) -> Vec<i64> {
    let mut arguments =
        vec!["1:10:1000".to_owned(), format!("{block}:50:200"), id.to_owned(), (T0 + offset).to_string()];
    arguments.extend_from_slice(returns);
    script_numbers(stack, &RESERVE_SLIDING_LOG, key, &arguments).await
}

/// A sliding-log limiter "l" of 10 per second, as `reserve_log` calls it.
fn ten_per_second_log(stack: &Stack) -> Limiter {
    Limiter::new(stack.client(), "l", Quota::sliding_log(10, Duration::from_secs(1)).unwrap()).unwrap()
}

#[tokio::test]
async fn a_sliding_log_logs_reserved_permits_as_one_grant_freeing_an_interval_after_the_horizon() {
    let stack = Stack::start().await;
    let t = T0 as i64;
    let log = ten_per_second_log(&stack);
    let key = log.state_key("id");
    // The request frees at T0 + 1000, the 5 reserved at T0 + 1200 (usable until T0 + 200).
    assert_eq!(reserve_log(&stack, &key, 0, 5, "a", &[]).await, [1, t, 5, 0, 4, t + 1200, 0]);
    // The request's receipt is 1:<T0 + 1000>-a. A refund naming the tranche as a receipt would (worked out from it)
    // gives nothing back: the tranche is logged under a name no receipt can give, and the client still uses it.
    let forged: edgelimit::Receipt = format!("5:{}-a", T0 + 1200).parse().unwrap();
    assert!(!log.clone().at(T0 + 50).refund("id", &forged).await.unwrap().success);
    // The request frees at T0 + 1100, before the reserved grant: it goes before it in the log. 3 are left to reserve.
    assert_eq!(reserve_log(&stack, &key, 100, 5, "b", &[]).await, [1, t + 100, 3, 0, 0, t + 1300, 0]);
    // Full: denied until the first grant frees at T0 + 1000; and no permit frees within the horizon (T0 + 350).
    assert_eq!(reserve_log(&stack, &key, 150, 5, "c", &[]).await, [0, t + 150, 0, 0, 0, t + 1300, 850]);
    // The state is lua/sliding_log.lua's: at T0 + 1000 the first grant has freed, and one plain decision fits; at
    // T0 + 1100 the second.
    assert!(log.clone().at(T0 + 1000).limit("id", 1).await.unwrap().success);
    assert!(!log.clone().at(T0 + 1000).limit("id", 1).await.unwrap().success);
    assert!(log.clone().at(T0 + 1100).limit("id", 1).await.unwrap().success);
    assert!(!log.clone().at(T0 + 1199).limit("id", 1).await.unwrap().success);
    // The 5 reserved free at T0 + 1200.
    assert_eq!(grants_until_denied(&log, "id", T0 + 1200).await, 5);
    // A grant id no client sends is refused by name, before anything is written.
    let error =
        RESERVE_SLIDING_LOG.run(&stack.client(), &["l2"], &["1:10:1000", "1:50:200", "a b", ""]).await.unwrap_err();
    assert!(error.to_string().contains("invalid grant id"), "{error}");
}

#[tokio::test]
async fn on_a_full_sliding_log_a_block_holds_the_permits_that_free_next_from_when_they_free() {
    let stack = Stack::start().await;
    let t = T0 as i64;
    let log = ten_per_second_log(&stack);
    let key = log.state_key("id");
    // The request frees at T0 + 1000, 9 reserved at T0 + 1200: full.
    assert_eq!(reserve_log(&stack, &key, 0, 9, "a", &[]).await, [1, t, 9, 0, 0, t + 1200, 0]);
    // At T0 + 900, 5 are asked: they would free at T0 + 1200, beyond the horizon (T0 + 1100); what frees within it,
    // the 1 at T0 + 1000, is the block's, usable from then (100 ms from now) for 200 ms, freeing at T0 + 2200. The
    // request is denied; its own wait (100 ms) is the block's start.
    assert_eq!(reserve_log(&stack, &key, 900, 5, "b", &[]).await, [0, t + 900, 1, 100, 0, t + 2200, 100]);
    // So at T0 + 1000 the permit that freed is the block's: a plain decision finds none.
    assert!(!log.clone().at(T0 + 1000).limit("id", 1).await.unwrap().success);
    // And at T0 + 1200 the 9 free: 9 plain decisions fit, not 10.
    assert_eq!(grants_until_denied(&log, "id", T0 + 1200).await, 9);
}

/// `key`'s log of 10 per second filled by 10 plain grants, at T0, T0 + 10, …, T0 + 90: they free 10 ms apart from
/// T0 + 1000.
async fn fill_log(log: &Limiter, id: &str) {
    for at in (0..100).step_by(10) {
        assert!(log.clone().at(T0 + at).limit(id, 1).await.unwrap().success);
    }
}

#[tokio::test]
async fn on_a_full_sliding_log_a_block_is_reserved_in_tranches_that_start_as_the_permits_they_take_free() {
    let stack = Stack::start().await;
    let t = T0 as i64;
    let log = ten_per_second_log(&stack);
    let key = log.state_key("id");
    fill_log(&log, "id").await;
    // At T0 + 950 the request is denied (the first grant frees at T0 + 1000: 50 ms), and the 6 reserved start one by
    // one as the grants free: at +50, +60, …, +100 ms, each a tranche freeing 200 ms + 1 s after its start (the
    // last at T0 + 950 + 100 + 1200).
    assert_eq!(
        reserve_log(&stack, &key, 950, 6, "a", &[]).await,
        [0, t + 950, 6, 50, 0, t + 2250, 50, 1, 60, 1, 70, 1, 80, 1, 90, 1, 100]
    );
    // Each permit that frees is a tranche's: a plain decision finds none until the 7th grant frees, at T0 + 1060.
    assert!(!log.clone().at(T0 + 1055).limit("id", 1).await.unwrap().success);
    assert!(log.clone().at(T0 + 1060).limit("id", 1).await.unwrap().success);
    assert!(!log.clone().at(T0 + 1060).limit("id", 1).await.unwrap().success);

    // 10 permits starting 10 ms apart make 8 tranches at most: 5 of 2, each starting with its second permit.
    let other = log.state_key("other");
    fill_log(&log, "other").await;
    assert_eq!(
        reserve_log(&stack, &other, 950, 10, "b", &[]).await,
        [0, t + 950, 10, 60, 0, t + 2290, 50, 2, 80, 2, 100, 2, 120, 2, 140]
    );
    // Requests of 2 permits: a tranche holds whole requests (the 5th permit, which would start at +90, is not
    // reserved), so that one tranche answers one; the request waits until 2 have freed (60 ms).
    let third = log.state_key("third");
    fill_log(&log, "third").await;
    let arguments = ["2:10:1000", "5:50:200", "c", &(T0 + 950).to_string()].map(String::from);
    assert_eq!(
        script_numbers(&stack, &RESERVE_SLIDING_LOG, &third, &arguments).await,
        [0, t + 950, 4, 60, 0, t + 2230, 60, 2, 80]
    );
}

#[tokio::test]
async fn on_a_full_sliding_log_tranches_booked_ahead_start_at_the_clients_pace_and_leave_the_permits_between_to_others()
{
    let stack = Stack::start().await;
    let t = T0 as i64;
    let log = ten_per_second_log(&stack);
    let key = log.state_key("id");
    fill_log(&log, "id").await;
    // At T0 + 950 a client whose requests come 20 ms apart asks for 4: the first tranche starts when the first grant
    // frees (T0 + 1000), each next one 20 ms after the one before, with the grant freeing then: T0 + 1020, 1040, 1060.
    let arguments = ["1:10:1000", "4:50:200:20", "a", &(T0 + 950).to_string()].map(String::from);
    assert_eq!(
        script_numbers(&stack, &RESERVE_SLIDING_LOG, &key, &arguments).await,
        [0, t + 950, 4, 50, 0, t + 2260, 50, 1, 70, 1, 90, 1, 110]
    );
    // The grants freeing in between (T0 + 1010, 1030, 1050) are left to the others: the tranches count from their
    // starts. Before 1010 nothing is free, and the wait is exact.
    let denied = log.clone().at(T0 + 1005).limit("id", 1).await.unwrap();
    assert_eq!((denied.success, denied.retry_after), (false, 5));
    for at in [1010, 1030, 1050] {
        assert!(log.clone().at(T0 + at).limit("id", 1).await.unwrap().success, "at T0 + {at}");
        // The next one waits for the next grant that is no tranche's.
        let denied = log.clone().at(T0 + at).limit("id", 1).await.unwrap();
        assert_eq!((denied.success, denied.retry_after), (false, 20), "at T0 + {at}");
    }
    // The window (T0 + 60, T0 + 1060] holds 3 of the first grants (T0 + 70, 80, 90), the 4 tranches (their uses may
    // all fall in it) and the 3 plain grants: the limit. One more fits at T0 + 1070, when T0 + 70's grant frees.
    assert!(!log.clone().at(T0 + 1060).limit("id", 1).await.unwrap().success);
    assert!(log.clone().at(T0 + 1070).limit("id", 1).await.unwrap().success);
    assert!(!log.clone().at(T0 + 1070).limit("id", 1).await.unwrap().success);
    // The client returns its last tranche unused (logged as a+<its start>, returned by its grant as any tranche):
    // its permit frees at once, and the request that comes with the return takes it.
    let arguments = [
        "1:10:1000".to_owned(),
        "0:50:200:20".to_owned(),
        "b".to_owned(),
        (T0 + 1075).to_string(),
        format!("{}-a:1:0:{}", T0 + 2260, T0 + 1075),
    ];
    assert_eq!(
        script_numbers(&stack, &RESERVE_SLIDING_LOG, &key, &arguments).await,
        [1, t + 1075, 0, 0, 0, t + 2240, 0]
    );
}

#[tokio::test]
async fn a_decision_that_fits_now_is_denied_when_a_window_at_a_tranches_start_would_go_over() {
    let stack = Stack::start().await;
    let t = T0 as i64;
    let log = ten_per_second_log(&stack);
    let key = log.state_key("id");
    fill_log(&log, "id").await;
    // Requests of 2 permits, 40 ms apart, at T0 + 950: the first tranche starts when 2 grants have freed (T0 + 1010),
    // the second 40 ms later (T0 + 1050), when 6 have.
    let arguments = ["2:10:1000", "4:50:200:40", "a", &(T0 + 950).to_string()].map(String::from);
    assert_eq!(
        script_numbers(&stack, &RESERVE_SLIDING_LOG, &key, &arguments).await,
        [0, t + 950, 4, 60, 0, t + 2250, 60, 2, 100]
    );
    // T0 + 1020's grant is no tranche's: a plain grant takes it.
    assert!(log.clone().at(T0 + 1020).limit("id", 1).await.unwrap().success);
    // At T0 + 1040 a request of 2 fits in every window ending before the second tranche starts (8 counted), but the
    // window ending at its start, (T0 + 50, T0 + 1050], may hold the 4 first grants still held (T0 + 60 to 90), both
    // tranches and the plain grant: 9, and 11 with these. Denied, and it fits when T0 + 60's grant frees.
    let denied = log.clone().at(T0 + 1040).limit("id", 2).await.unwrap();
    assert_eq!((denied.success, denied.retry_after), (false, 20));
    assert!(!log.clone().at(T0 + 1059).limit("id", 2).await.unwrap().success);
    assert!(log.clone().at(T0 + 1060).limit("id", 2).await.unwrap().success);
}

#[tokio::test]
async fn a_returned_sliding_log_block_frees_its_unused_permits_now_and_its_used_ones_an_interval_after() {
    let stack = Stack::start().await;
    let t = T0 as i64;
    let log = ten_per_second_log(&stack);
    let key = log.state_key("id");
    // The request, and 9 reserved freeing at T0 + 1200: the log is full.
    assert_eq!(reserve_log(&stack, &key, 0, 9, "a", &[]).await, [1, t, 9, 0, 0, t + 1200, 0]);
    // At T0 + 100 the client returns the block, 4 of its 9 used: 3 by T0 + 30 and the last by T0 + 50 on the
    // server's clock. 5 free now, the 3 at T0 + 1030, the last at T0 + 1050. So the request fits.
    let returned = format!("{}-a:9:3:{}:1:{}", T0 + 1200, T0 + 30, T0 + 50);
    assert_eq!(
        reserve_log(&stack, &key, 100, 0, "b", std::slice::from_ref(&returned)).await,
        [1, t + 100, 0, 0, 4, t + 1100, 0]
    );
    // The same return again finds no block: nothing changes (a return is idempotent).
    assert_eq!(reserve_log(&stack, &key, 110, 0, "c", &[returned]).await, [1, t + 110, 0, 0, 3, t + 1110, 0]);
    // Held at T0 + 1000: the 4 used, b's and c's (the first grant has freed); at T0 + 1030 the 3 free, at T0 + 1050
    // the last.
    let mut plain = Vec::new();
    for at in [1000, 1030, 1050] {
        plain.push(grants_until_denied(&log, "id", T0 + at).await);
    }
    assert_eq!(plain, [4, 3, 1]);
    // A last use the client puts after the return's now (its clock ahead, or the reservation's request slow to
    // leave): the used permits free an interval after the time the client names, here at T0 + 1150 (the latest it
    // can name is what a check of its grants counts), and the request waits for the first grant.
    let other = log.state_key("other");
    assert_eq!(reserve_log(&stack, &other, 0, 9, "e", &[]).await, [1, t, 9, 0, 0, t + 1200, 0]);
    let returned = format!("{}-e:9:9:{}", T0 + 1200, T0 + 150);
    assert_eq!(reserve_log(&stack, &other, 100, 0, "f", &[returned]).await, [0, t + 100, 0, 0, 0, t + 1150, 900]);
    // A group whose last use is an interval old by the return frees at once (it is not logged again): at T0 + 1005
    // the 2 used at T0 are free, the 7 used by T0 + 10 free at T0 + 1010.
    let third = log.state_key("third");
    reserve_log(&stack, &third, 0, 9, "g", &[]).await;
    let returned = format!("{}-g:9:2:{}:7:{}", T0 + 1200, T0, T0 + 10);
    assert_eq!(reserve_log(&stack, &third, 1005, 0, "h", &[returned]).await, [1, t + 1005, 0, 0, 2, t + 2005, 0]);
    // Returns no client sends are refused by name, before anything is written.
    let seventeen_groups = format!("1200-a:20{}", ":1:0".repeat(17));
    for bad in [
        "x",
        "1200-a:9:10:0",
        "1200-a b:9:1:0",
        "1200-a:9:1",
        "1200-a:9:1:x",
        "1200-a:9:1:0:",
        "1200-a:9:1:0:1",
        "1200-a:9:5:0:5:0",
        "1200-a:9:1::0",
        &seventeen_groups,
    ] {
        let error = RESERVE_SLIDING_LOG
            .run(&stack.client(), &["l3"], &["1:10:1000", "1:50:200", "id", "", bad])
            .await
            .unwrap_err();
        assert!(error.to_string().contains("invalid return"), "{bad}: {error}");
    }
}

#[tokio::test]
async fn a_sliding_log_call_with_a_bad_return_writes_nothing_and_no_return_frees_a_use_before_its_tranche() {
    let stack = Stack::start().await;
    let t = T0 as i64;
    let log = ten_per_second_log(&stack);
    let key = log.state_key("id");
    assert_eq!(reserve_log(&stack, &key, 0, 9, "a", &[]).await, [1, t, 9, 0, 0, t + 1200, 0]);
    // A good return, then one that is not, or a grant id no client sends: the call is refused by name, and the good
    // return is not applied (every return and the id are checked before the first is).
    let good = format!("{}-a:9:0:{T0}", T0 + 1200);
    let call = |returns: Vec<String>, id: &str| {
        let mut arguments = vec!["1:10:1000".to_owned(), "0:50:200".to_owned(), id.to_owned(), (T0 + 100).to_string()];
        arguments.extend(returns);
        let (client, key) = (stack.client(), key.clone());
        async move { RESERVE_SLIDING_LOG.run(&client, &[&key], &arguments).await }
    };
    let error = call(vec![good.clone(), "garbage".to_owned()], "b").await.unwrap_err();
    assert!(error.to_string().contains("invalid return"), "{error}");
    let error = call(vec![good.clone()], "bad id!").await.unwrap_err();
    assert!(error.to_string().contains("invalid grant id"), "{error}");
    // Long returns are refused at once by their length: one of half a megabyte, or a long run of digits (which a
    // searching pattern would take quadratic time over, inside one C call no script timeout interrupts).
    for long in ["1".repeat(500_000), format!("1-a:1:{}", "1".repeat(40_000))] {
        let error = call(vec![long], "b").await.unwrap_err();
        assert!(error.to_string().contains("at most 1024 bytes"), "{error}");
    }
    let error = call(vec![format!("1-a:1:{}", "1".repeat(1000))], "b").await.unwrap_err();
    assert!(error.to_string().contains("invalid return"), "{error}");
    // The block is still logged: the log is full.
    assert!(!log.clone().at(T0 + 100).limit("id", 1).await.unwrap().success);
    // A return that puts the uses before the tranche could start (at unix 0) has them used at its start, T0: they
    // free at T0 + 1000, with the first grant, not at once.
    let forged = format!("{}-a:9:9:0", T0 + 1200);
    assert_eq!(reserve_log(&stack, &key, 100, 0, "c", &[forged]).await, [0, t + 100, 0, 0, 0, t + 1000, 900]);
    assert!(!log.clone().at(T0 + 999).limit("id", 1).await.unwrap().success);
    assert!(log.clone().at(T0 + 1000).limit("id", 1).await.unwrap().success);
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
        let error = RESERVE_GCRA.run(&stack.client(), &["r:key"], &[request, block]).await.unwrap_err();
        assert!(
            matches!(&error, Error::InvalidArgument(message) if message.contains(what)),
            "{request} {block}: {error}"
        );
    }
    // A time is decimal digits, as a client writes it: not what Lua's tonumber would also read.
    for time in ["0x1A", " 1700000000000", "1e12", "1700000000000\0x", "-1"] {
        let error =
            RESERVE_GCRA.run(&stack.client(), &["r:key"], &["1:10:1000:10", "2:50:200", time]).await.unwrap_err();
        assert!(error.to_string().contains("invalid time"), "{time:?}: {error}");
    }
    let exists = stack.client().command(&edgelimit::Command::new("EXISTS").arg("r:key")).await.unwrap();
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

/// The most grants any window holds beyond what `quota` allows it, each grant counted in every window its span
/// overlaps; 0 or less is exact. The windows: GCRA, every [a, b], allowed burst + (b − a) × rate / interval; a fixed
/// window, each of its windows; a sliding log, every (t − interval, t].
fn worst_excess(decisions: &[ReservedDecision], quota: &Quota) -> i64 {
    let mut spans: Vec<(u64, u64)> = decisions.iter().filter(|d| d.decision.success).map(|d| d.span).collect();
    spans.sort();
    let (limit, interval) = (i64::from(quota.limit()), quota.interval_ms());
    let mut worst = i64::MIN;
    match quota.algorithm() {
        Algorithm::Gcra => {
            // The tightest window holding a set of spans starts at one of their ends, a, and ends at the latest of
            // their starts (or at a, when they all hold a). So: for each end a, the spans that end at a or later,
            // by start; the first n of them all overlap [a, max(a, the n-th start)].
            for &(_, a) in &spans {
                let by_start = spans.iter().filter(|(_, end)| *end >= a);
                for (n, &(start, _)) in by_start.enumerate() {
                    let b = start.max(a);
                    let allowed = limit + ((b - a) * u64::from(quota.rate()) / interval) as i64;
                    worst = worst.max(n as i64 + 1 - allowed);
                }
            }
        }
        Algorithm::FixedWindow => {
            let mut counts = std::collections::HashMap::new();
            for &(start, end) in &spans {
                for window in start / interval..=end / interval {
                    *counts.entry(window).or_insert(0) += 1;
                }
            }
            worst = counts.values().map(|count| count - limit).max().unwrap_or(worst);
        }
        Algorithm::SlidingLog => {
            // The spans overlapping (t − interval, t] grow as t passes a start: the fullest such window ends at one.
            for &(t, _) in &spans {
                let held = spans.iter().filter(|&&(start, end)| start <= t && end + interval > t);
                worst = worst.max(held.count() as i64 - limit);
            }
        }
        algorithm => unreachable!("{algorithm} reserves nothing"),
    }
    worst
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_clients_granting_from_blocks_never_exceed_the_limit_in_any_window() {
    let stack = Stack::start().await;
    let none = (Duration::ZERO, Duration::ZERO);
    // Bursts of 60 ms and rests of 300 ms, in which the limit refills: blocks reserved while it is idle.
    let bursts = (Duration::from_millis(60), Duration::from_millis(300));
    let (second, half) = (Duration::from_secs(1), Duration::from_millis(500));
    let (fast, slow) = (Duration::from_millis(2), Duration::from_millis(10));
    for (quota, pause, bursts, length, name) in [
        // Saturated: 4 clients asking every 2 ms of a limit of 50 per second (refilled from empty in 400 ms).
        (Quota::gcra(20, 50, second), fast, none, 100, "gcra saturated"),
        (Quota::gcra(20, 50, second), fast, bursts, 100, "gcra bursts"),
        // Under the limit: 4 clients asking every 10 ms (400/s) of 1000 per second (refilled in 100 ms).
        (Quota::gcra(100, 1000, second), slow, none, 50, "gcra light"),
        (Quota::fixed_window(25, half), fast, none, 100, "fixed window saturated"),
        (Quota::fixed_window(25, half), fast, bursts, 100, "fixed window bursts"),
        (Quota::fixed_window(500, second), slow, none, 100, "fixed window light"),
        (Quota::sliding_log(25, half), fast, none, 100, "sliding log saturated"),
        (Quota::sliding_log(25, half), fast, bursts, 100, "sliding log bursts"),
        (Quota::sliding_log(500, second), slow, none, 100, "sliding log light"),
    ] {
        let quota = quota.unwrap();
        let limiter = Limiter::new(stack.client(), &name.replace(' ', "-"), quota).unwrap();
        let reserved = Reserved::new(limiter, Duration::from_millis(length)).unwrap();
        let decisions = hammer(&reserved, 4, pause, bursts, Duration::from_millis(1500)).await;
        let excess = worst_excess(&decisions, &quota);
        assert!(excess <= 0, "{name}: a window held {excess} grants too many");
        let local = decisions.iter().filter(|d| d.local && d.decision.success).count();
        let granted = decisions.iter().filter(|d| d.decision.success).count();
        let remote = decisions.iter().filter(|d| !d.local).count();
        eprintln!(
            "{name}: {} decisions, {granted} granted ({local} from blocks), {remote} round trips",
            decisions.len()
        );
        if name.ends_with("light") {
            assert!(local > 0, "{name}: {granted} granted, none from a block");
        }
    }
}

#[tokio::test]
async fn a_call_that_reserves_only_takes_nothing_for_the_request_and_reserves_as_the_same_call_taking_it() {
    let stack = Stack::start().await;
    let second = Duration::from_secs(1);
    for (script, quota, request, names_grants) in [
        (&RESERVE_GCRA, Quota::gcra(10, 10, second), "1:10:1000:10", false),
        (&RESERVE_FIXED_WINDOW, Quota::fixed_window(10, second), "1:10:1000", false),
        (&RESERVE_SLIDING_LOG, Quota::sliding_log(10, second), "1:10:1000", true),
    ] {
        let quota = quota.unwrap();
        let limiter = Limiter::new(stack.client(), &format!("only-{}", quota.algorithm()), quota).unwrap();
        // The same request and block at the same time on two identifiers, each half full (on an idle GCRA bucket the
        // reserved slots start a lead from now, and a request's slot fits before them): one call takes the request,
        // one does not.
        let mut replies = Vec::new();
        for (id, only) in [("taking", ""), ("only", ":only")] {
            for _ in 0..5 {
                assert!(limiter.clone().at(T0).limit(id, 1).await.unwrap().success);
            }
            let mut arguments = vec![request.to_owned(), format!("3:50:200:0{only}")];
            if names_grants {
                arguments.push(format!("grant{id}"));
            }
            arguments.push(T0.to_string());
            replies.push(script_numbers(&stack, script, &limiter.state_key(id), &arguments).await);
        }
        let (taking, only) = (&replies[0], &replies[1]);
        assert_eq!((taking[0], only[0]), (1, 0), "{request}: {taking:?} {only:?}");
        assert_eq!((taking[2], only[2]), (3, 3), "{request}: both reserve the block");
        // What is left now: one more permit where the request was not taken.
        let left_taking = grants_until_denied(&limiter, "taking", T0).await;
        let left_only = grants_until_denied(&limiter, "only", T0).await;
        assert_eq!(left_only, left_taking + 1, "{request}");
    }
    // Anything after the pace but ':only' is refused by name, and writes nothing.
    for block in ["3:50:200:0:onl", "3:50:200:0:only:", "3:50:200:only", "3:50:200::only"] {
        let error = RESERVE_FIXED_WINDOW.run(&stack.client(), &["only:bad"], &["1:10:1000", block]).await.unwrap_err();
        assert!(error.to_string().contains("invalid block"), "{block}: {error}");
    }
}

/// Where each limit's grant of a decision under several limits was used, as [`worst_excess`] counts it: a grant from
/// reserved permits in its span; a grant Redis decided at the time its receipt names (a GCRA grant's unix ms, a
/// sliding log's expiry less the interval, a fixed window's window).
fn per_limit(decisions: &[ReservedDecisions], quotas: &[Quota]) -> Vec<Vec<ReservedDecision>> {
    (quotas.iter().enumerate())
        .map(|(i, quota)| {
            (decisions.iter().filter(|d| d.decision.success))
                .map(|d| {
                    let mut part = d.limits[i];
                    if !part.local {
                        let receipt = part.decision.receipt.expect("a grant Redis decided has a receipt");
                        let number = |text: &str| text.parse::<u64>().unwrap();
                        let at = match quota.algorithm() {
                            Algorithm::Gcra => number(receipt.mark()),
                            Algorithm::FixedWindow => number(receipt.mark()) * quota.interval_ms(),
                            _ => number(receipt.mark().split('-').next().unwrap()) - quota.interval_ms(),
                        };
                        part.span = (at, at);
                    }
                    part
                })
                .collect()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_clients_granting_under_several_limits_never_exceed_any_limit_in_any_window() {
    let stack = Stack::start().await;
    let second = Duration::from_secs(1);
    let half = Duration::from_millis(500);
    let (fast, slow) = (Duration::from_millis(2), Duration::from_millis(10));
    for (quotas, pause, name) in [
        // Saturated, the tighter limit a sliding log, then a GCRA; and under both limits.
        ([Quota::gcra(40, 100, second), Quota::sliding_log(25, half)], fast, "gcra and sliding log saturated"),
        ([Quota::sliding_log(60, half), Quota::gcra(20, 50, second)], fast, "sliding log and gcra saturated"),
        ([Quota::fixed_window(30, half), Quota::sliding_log(40, half)], fast, "fixed window and sliding log saturated"),
        ([Quota::gcra(200, 1000, second), Quota::sliding_log(500, second)], slow, "gcra and sliding log light"),
    ] {
        let quotas: Vec<Quota> = quotas.into_iter().map(Result::unwrap).collect();
        let limiters = (quotas.iter().enumerate())
            .map(|(i, quota)| Limiter::new(stack.client(), &format!("{}-{i}", name.replace(' ', "-")), *quota))
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        let reserved = ReservedAll::new(limiters, Duration::from_millis(100)).unwrap();
        let tasks: Vec<_> = (0..4)
            .map(|client| {
                let reserved = reserved.fresh();
                tokio::spawn(async move {
                    let started = std::time::Instant::now();
                    tokio::time::sleep(pause * 7 * client).await;
                    let mut decisions = Vec::new();
                    while started.elapsed() < Duration::from_millis(1500) {
                        decisions.push(reserved.limit("hot", 1).await.unwrap());
                        tokio::time::sleep(pause).await;
                    }
                    decisions
                })
            })
            .collect();
        let mut decisions = Vec::new();
        for task in tasks {
            decisions.extend(task.await.unwrap());
        }
        for (quota, grants) in quotas.iter().zip(per_limit(&decisions, &quotas)) {
            let excess = worst_excess(&grants, quota);
            assert!(excess <= 0, "{name}: a window of {quota:?} held {excess} grants too many");
        }
        // A grant is all or nothing: every limit granted it (from Redis, or from reserved permits with a span), or
        // none did.
        for d in decisions.iter().filter(|d| d.decision.success) {
            assert_eq!(d.limits.len(), quotas.len(), "{name}: {d:?}");
            for part in &d.limits {
                assert!(part.decision.success && (part.local == (part.span != (0, 0))), "{name}: {d:?}");
            }
            assert_eq!(d.local, d.limits.iter().all(|part| part.local), "{name}: {d:?}");
        }
        let local = decisions.iter().filter(|d| d.local && d.decision.success).count();
        let granted = decisions.iter().filter(|d| d.decision.success).count();
        let mixed = (decisions.iter().filter(|d| d.decision.success && !d.local))
            .filter(|d| d.limits.iter().any(|part| part.local))
            .count();
        eprintln!(
            "{name}: {} decisions, {granted} granted ({local} from reserved permits, {mixed} partly), {} round trips",
            decisions.len(),
            decisions.iter().filter(|d| !d.local).count()
        );
        assert!(local > 0, "{name}: {granted} granted, none from reserved permits");
        if name.ends_with("light") {
            assert!(mixed > 0, "{name}: no grant took one limit's reserved permit beside Redis's grant of another");
        }
        // Denials are answered here too: until reserved permits start, or as Redis's denial said.
        if name.ends_with("saturated") {
            let local_denials = decisions.iter().filter(|d| d.local && !d.decision.success).count();
            assert!(local_denials > 0, "{name}: every denial asked Redis");
        }
    }
}

#[tokio::test]
async fn several_limits_reserve_without_a_concurrency_limit_and_decide_all_or_nothing() {
    let stack = Stack::start().await;
    let second = Duration::from_secs(1);
    let limiter = |name: &str, quota: Result<Quota, Error>| Limiter::new(stack.client(), name, quota.unwrap()).unwrap();
    for (beside, refused) in [
        (limiter("c", Quota::concurrency(5, second)), "a concurrency limit reserves permits only alone"),
        (
            limiter("t", Quota::token_bucket(10, 10, second)),
            "needs a GCRA, fixed-window, sliding-log or concurrency quota",
        ),
        // One state twice would be reserved and granted twice from one reading.
        (limiter("g", Quota::gcra(10, 10, second)), "is given twice"),
    ] {
        let limiters = vec![limiter("g", Quota::gcra(10, 10, second)), beside];
        let error = ReservedAll::new(limiters, Duration::from_millis(100)).unwrap_err();
        assert!(error.to_string().contains(refused), "{error}");
    }
    assert!(ReservedAll::new(Vec::new(), Duration::from_millis(100)).is_err());

    // A limit of 3 per second and one of 100 per hour: one client asks 10 times at once (a fresh client each time, so
    // that nothing is reserved): the tight limit grants 3, and the loose one counts only those 3 (a denial takes
    // from none).
    let tight = limiter("tight", Quota::sliding_log(3, second));
    let loose = limiter("loose", Quota::gcra(100, 100, Duration::from_secs(3600)));
    let reserved = ReservedAll::new(vec![tight.clone(), loose.clone()], Duration::from_millis(100)).unwrap();
    let mut granted = 0;
    for _ in 0..10 {
        let decided = reserved.fresh().limit("id", 1).await.unwrap();
        assert!(!decided.local);
        granted += usize::from(decided.decision.success);
    }
    assert_eq!(granted, 3);
    let left = loose.peek("id", 1).await.unwrap();
    assert_eq!(left.remaining, 97, "{left:?}");
    // Permits above the tightest limit: refused before anything is sent.
    let error = reserved.limit("id", 4).await.unwrap_err();
    assert!(matches!(error, Error::PermitsExceedRate { permits: 4, rate: 3 }), "{error}");
}

/// A Ratelimit's options reserving for `length_ms`.
fn reserving(length_ms: u64) -> Options {
    Options { reserve: Some(Duration::from_millis(length_ms)), ..Options::default() }
}

/// A limit named `name`.
fn named(name: &str, quota: Result<Quota, Error>) -> Limit {
    Limit { quota: quota.unwrap(), name: Some(name.into()) }
}

/// Two limits: "tight", a fixed window of 2 an hour, and "loose", a GCRA that reserves beside it.
fn tight_and_loose() -> [Limit; 2] {
    [
        named("tight", Quota::fixed_window(2, Duration::from_secs(3600))),
        named("loose", Quota::gcra(100, 100, Duration::from_secs(1))),
    ]
}

/// `stack`'s Redis allowed no memory (`true`: writes fail with OOM, reads and denials still answer) or any.
async fn out_of_memory(stack: &Stack, out: bool) {
    let port = stack.redis_url().rsplit(':').next().unwrap().parse().unwrap();
    let maxmemory = if out { "1" } else { "0" };
    redis_cluster::command(port, &["CONFIG", "SET", "maxmemory", maxmemory]).await.unwrap();
}

#[tokio::test]
async fn a_denial_redis_gives_while_it_cannot_write_stays_a_denial_when_permits_are_reserved() {
    // Under OOM a plain denial writes nothing and is answered; a reservation writes, and fails. The failure policy
    // (allow, the default) must not get the denial as an error to absorb.
    let stack = Stack::start().await;
    // One limit: a GCRA bucket of 5 refilling one a second, emptied by plain requests; the second request of the
    // Ratelimit (its demand now seen) is denied (for a second) and reserves slots to come.
    let single =
        Ratelimit::new(stack.client(), &[named("single", Quota::gcra(5, 1, Duration::from_secs(1)))], reserving(2000));
    let single = single.unwrap();
    assert!(single.limit("id", 1).await.unwrap().decision.success);
    let plain = single.limiters()[0].clone();
    while plain.limit("id", 1).await.unwrap().success {}
    let several = Ratelimit::new(stack.client(), &tight_and_loose(), reserving(100)).unwrap();
    for _ in 0..2 {
        assert!(several.limit("id", 1).await.unwrap().decision.success);
    }
    // The loose limit's reserved slot ends (its block is gone), so the next request reserves for it again.
    tokio::time::sleep(Duration::from_millis(150)).await;
    out_of_memory(&stack, true).await;
    let outcomes = [single.limit("id", 1).await.unwrap(), several.limit("id", 1).await.unwrap()];
    out_of_memory(&stack, false).await;
    for outcome in outcomes {
        assert_denied_by_redis(&outcome);
    }
}

/// A Redis out of memory cannot record a grant: that is reported (`EDGELIMIT_STORE_FULL`), never absorbed by the
/// default failure policy, which fails open (a client inventing identifiers could fill the store, then pass every
/// limit); its denials are still answered.
#[tokio::test]
async fn a_grant_a_full_store_cannot_record_is_reported_not_admitted() {
    let stack = Stack::start().await;
    let ratelimit = Ratelimit::new(stack.client(), &tight_and_loose()[..1], Options::default()).unwrap();
    for _ in 0..2 {
        assert!(ratelimit.limit("spent", 1).await.unwrap().decision.success);
    }
    out_of_memory(&stack, true).await;
    let grant = ratelimit.limit("fresh", 1).await;
    let denial = ratelimit.limit("spent", 1).await;
    out_of_memory(&stack, false).await;
    match grant {
        Err(error) => assert_eq!(error.code(), "EDGELIMIT_STORE_FULL", "{error}"),
        Ok(outcome) => panic!("a grant Redis could not record was answered: {outcome:?}"),
    }
    assert_denied_by_redis(&denial.unwrap());
}

/// `outcome` is a denial Redis decided, with a wait, and no error for the failure policy to absorb.
fn assert_denied_by_redis(outcome: &Outcome) {
    assert!(!outcome.decision.success, "{outcome:?}");
    assert_eq!((outcome.reason, outcome.error.is_none()), (Reason::Decided, true), "{outcome:?}");
    assert!(outcome.decision.retry_after > 0, "{outcome:?}");
}

#[tokio::test]
async fn a_denial_stays_a_denial_when_the_resend_of_its_reservation_after_noscript_never_answers() {
    // Under several limits the decision (lua/limits.lua) and a limit's reservation go in one pipeline. When only the
    // reservation's script has left Redis's cache, its resend (an EVAL) is a second round trip; here it never gets
    // an answer. The denial Redis gave in the first is known and must stand: as the call's error, the failure
    // policy (allow, the default) would admit the request.
    let stack = Stack::start().await;
    let marker = b"invalid block (";
    let text = |script: &Script| script.source().as_bytes().windows(marker.len()).any(|window| window == marker);
    assert!(text(&RESERVE_GCRA) && !text(&LIMITS), "the marker names the reservation's script only");
    let relay = relay_stalling_on(stack.url(), marker).await;
    let client =
        RestClient::new(&relay, TOKEN).and_then(|client| client.with_timeout(Duration::from_millis(500))).unwrap();
    let several = Ratelimit::new(client, &tight_and_loose(), reserving(100)).unwrap();
    // Scripts loaded, the tight limit's 2 taken; then the loose limit's reserved slot ends (its block is gone), so
    // the next request reserves for it again.
    stack.client().command(&Command::new("SCRIPT").arg("FLUSH")).await.unwrap();
    for script in [&LIMITS, &RESERVE_GCRA, &RESERVE_FIXED_WINDOW] {
        stack.client().command(&Command::new("SCRIPT").arg("LOAD").arg(script.source())).await.unwrap();
    }
    for _ in 0..2 {
        assert!(several.limit("id", 1).await.unwrap().decision.success);
    }
    tokio::time::sleep(Duration::from_millis(150)).await;
    stack.client().command(&Command::new("SCRIPT").arg("FLUSH")).await.unwrap();
    stack.client().command(&Command::new("SCRIPT").arg("LOAD").arg(LIMITS.source())).await.unwrap();
    let started = std::time::Instant::now();
    let outcome = several.limit("id", 1).await.unwrap();
    // The reservation was sent, and its resend waited out the client's timeout (a lower bound only).
    assert!(started.elapsed() >= Duration::from_millis(500));
    assert_denied_by_redis(&outcome);
}

#[tokio::test]
async fn a_reset_forgets_the_denials_reserving_clients_remembered() {
    let stack = Stack::start().await;
    let limits = tight_and_loose();
    for limits in [&limits[..1], &limits[..]] {
        let ratelimit = Ratelimit::new(stack.client(), limits, reserving(100)).unwrap();
        let id = format!("id-{}", limits.len());
        let mut seen = Vec::new();
        for _ in 0..4 {
            let outcome = ratelimit.limit(&id, 1).await.unwrap();
            seen.push((outcome.decision.success, outcome.reason));
        }
        // Two granted, the third denied by Redis, the fourth answered here from that denial.
        assert_eq!(seen[2..], [(false, Reason::Decided), (false, Reason::Reserved)], "{seen:?}");
        assert!(ratelimit.reset(&id).await.unwrap());
        let after = ratelimit.limit(&id, 1).await.unwrap();
        assert!(after.decision.success, "{after:?}");
    }
}

/// `count` requests of `reserved` (one client) for one identifier, each its own task, all spawned before any runs.
async fn request_at_once(reserved: &Reserved, count: usize) -> Vec<Result<ReservedDecision, Error>> {
    spawned_at_once((0..count).map(|_| {
        let reserved = reserved.clone();
        async move { reserved.limit("id", 1).await }
    }))
    .await
}

#[tokio::test]
async fn requests_of_one_client_at_once_wait_for_its_reservation_instead_of_making_their_own() {
    let stack = Stack::start().await;
    let quota = Quota::gcra(100, 100, Duration::from_secs(1)).unwrap();
    let limiter = Limiter::new(stack.client(), "at-once", quota).unwrap();
    let reserved = Reserved::new(limiter, Duration::from_millis(500)).unwrap();
    // The first asks Redis with no demand seen yet (it reserves nothing); the 19 others, which came meanwhile, wait
    // for its reply, then one of them reserves for the 19 and the others wait for that: two round trips in all.
    let decisions = request_at_once(&reserved, 20).await;
    let decisions: Vec<_> = decisions.into_iter().map(Result::unwrap).collect();
    assert!(decisions.iter().all(|d| d.decision.success));
    assert_eq!(decisions.iter().filter(|d| !d.local).count(), 2);

    // A store that cannot be reached: every request fails (none waits forever, none is granted). The first fails,
    // and each that waited for it then asks itself.
    let port = edgelimit_cli::redis_server::free_port().unwrap();
    let client = edgelimit::RestClient::new(&format!("http://127.0.0.1:{port}"), "t").unwrap();
    let limiter = Limiter::new(client, "unreachable", quota).unwrap();
    let reserved = Reserved::new(limiter, Duration::from_millis(500)).unwrap();
    for outcome in request_at_once(&reserved, 5).await {
        assert!(matches!(outcome, Err(Error::Transport { .. })), "{outcome:?}");
    }
}

#[tokio::test]
async fn a_reserved_limiter_needs_a_quota_that_reserves_given_in_code_and_a_sane_length() {
    let stack = Stack::start().await;
    let interval = Duration::from_secs(1);
    for quota in [Quota::token_bucket(10, 10, interval), Quota::sliding_window(10, interval)] {
        let limiter = Limiter::new(stack.client(), "x", quota.unwrap()).unwrap();
        let error = Reserved::new(limiter, Duration::from_millis(100)).unwrap_err();
        assert!(error.to_string().contains("needs a GCRA, fixed-window, sliding-log or concurrency quota"), "{error}");
    }
    let stored = Limiter::stored(stack.client(), "stored").unwrap();
    assert!(Reserved::new(stored, Duration::from_millis(100)).is_err());
    // A fixed window, sliding log or concurrency limit of 1 s: at most 500 ms.
    for quota in [Quota::fixed_window(10, interval), Quota::sliding_log(10, interval), Quota::concurrency(10, interval)]
    {
        let limiter = Limiter::new(stack.client(), "x", quota.unwrap()).unwrap();
        let error = Reserved::new(limiter.clone(), Duration::from_millis(501)).unwrap_err();
        assert!(error.to_string().contains("its interval is 1000 ms"), "{error}");
        assert!(error.to_string().contains("use at most 500 ms"), "{error}");
        assert!(Reserved::new(limiter, Duration::from_millis(500)).is_ok());
    }
    let gcra = Limiter::new(stack.client(), "g", Quota::gcra(10, 10, Duration::from_secs(1)).unwrap()).unwrap();
    assert!(Reserved::new(gcra.clone(), Duration::ZERO).is_err());
    // Under a millisecond would be sent as a block of 0 ms, which no script takes.
    assert!(Reserved::new(gcra.clone(), Duration::from_micros(999)).is_err());
    assert!(Reserved::new(gcra.clone(), Duration::from_secs(61)).is_err());
    // 10 per second refill from empty in 1 s: a block of more than 500 ms is refused, with the longest to use.
    let error = Reserved::new(gcra.clone(), Duration::from_millis(501)).unwrap_err();
    assert!(error.to_string().contains("use at most 500 ms"), "{error}");
    assert!(Reserved::new(gcra.clone().at(T0), Duration::from_millis(100)).is_err());
    let reserved = Reserved::new(gcra, Duration::from_millis(100)).unwrap();
    assert!(matches!(reserved.limit("x", 11).await, Err(Error::PermitsExceedRate { permits: 11, rate: 10 })));
    // No permits is what no decision means, refused as every limiter refuses it.
    assert!(matches!(
        reserved.limit("x", 0).await,
        Err(Error::InvalidArgument(message)) if message.contains("permits must be at least 1")
    ));
}
