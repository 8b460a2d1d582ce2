//! The sliding log against real Redis through the real bridge: Redisson's behaviours, the bugs it must not have,
//! concurrency, and interop with Redisson's own script. Time travel uses an explicit `now`; only the keep-alive and
//! concurrency tests use real time, briefly.

use std::time::Duration;

use edgelimit::{Command, Decision, Error, Mode, Rate, RedissonLimiter, Script, Value};
use edgelimit_tests::Stack;

const T0: u64 = 1_700_000_000_000;

fn rate(permits: u32, interval_ms: u64) -> Rate {
    Rate::new(permits, Duration::from_millis(interval_ms)).unwrap()
}

async fn limiter(stack: &Stack, name: &str, permits: u32, interval_ms: u64) -> RedissonLimiter {
    let limiter = RedissonLimiter::new(stack.client(), name).unwrap();
    assert!(limiter.try_set_rate(rate(permits, interval_ms), Mode::Overall).await.unwrap());
    limiter
}

async fn take(limiter: &RedissonLimiter, at: u64, permits: u32) -> Decision {
    limiter.clone().at(at).try_acquire(permits).await.unwrap()
}

async fn available(limiter: &RedissonLimiter, at: u64) -> u64 {
    limiter.clone().at(at).available_permits().await.unwrap()
}

#[tokio::test]
async fn first_set_wins_and_config_reads_back() {
    let stack = Stack::start().await;
    let limiter = RedissonLimiter::new(stack.client(), "first").unwrap();
    assert_eq!(limiter.config().await.unwrap(), None);
    let first = rate(5, 1000).with_keep_alive(Duration::from_secs(60)).unwrap();
    assert!(limiter.try_set_rate(first, Mode::Overall).await.unwrap());
    assert!(!limiter.try_set_rate(rate(9, 2000), Mode::PerClient).await.unwrap());
    let config = limiter.config().await.unwrap().unwrap();
    assert_eq!((config.rate, config.mode), (first, Mode::Overall));
}

#[tokio::test]
async fn exact_count_per_interval_then_permits_return() {
    let stack = Stack::start().await;
    let limiter = limiter(&stack, "exact", 5, 1000).await;
    for remaining in (0..5).rev() {
        let d = take(&limiter, T0, 1).await;
        assert_eq!(d, Decision { success: true, limit: 5, remaining, reset: T0 + 1000, retry_after: 0, receipt: None });
    }
    let denied = take(&limiter, T0, 1).await;
    assert_eq!((denied.success, denied.remaining, denied.retry_after), (false, 0, 1000));
    assert_eq!(take(&limiter, T0 + 999, 1).await.retry_after, 1);
    let again = take(&limiter, T0 + 1000, 1).await;
    assert!(again.success, "{again:?}");
    assert_eq!(again.remaining, 4);
}

#[tokio::test]
async fn retry_after_is_the_wait_for_this_request_not_for_the_oldest_grant() {
    let stack = Stack::start().await;
    let limiter = limiter(&stack, "weighted", 10, 1000).await;
    assert!(take(&limiter, T0, 3).await.success);
    assert!(take(&limiter, T0 + 100, 3).await.success);
    assert!(take(&limiter, T0 + 200, 4).await.success);
    // 5 permits are missing; the oldest grant frees 3 at T0+1000, the next 3 more at T0+1100.
    // (Redisson answers 3 + 1000 - 300 = 703 ms, after which the request is still denied.)
    let denied = take(&limiter, T0 + 300, 5).await;
    assert_eq!((denied.success, denied.retry_after), (false, 800));
    assert!(!take(&limiter, T0 + 1099, 5).await.success);
    assert!(take(&limiter, T0 + 1100, 5).await.success);
}

#[tokio::test]
async fn permits_are_counted_by_amount_and_denials_consume_nothing() {
    let stack = Stack::start().await;
    let limiter = limiter(&stack, "amount", 5, 1000).await;
    assert!(take(&limiter, T0, 2).await.success);
    assert_eq!(available(&limiter, T0).await, 3);
    for _ in 0..10 {
        assert!(!take(&limiter, T0 + 1, 4).await.success);
    }
    assert_eq!(available(&limiter, T0 + 1).await, 3);
    assert!(take(&limiter, T0 + 2, 3).await.success);
    assert_eq!(available(&limiter, T0 + 2).await, 0);
}

#[tokio::test]
async fn bad_requests_are_typed_errors_not_lua_errors() {
    let stack = Stack::start().await;
    let unset = RedissonLimiter::new(stack.client(), "unset").unwrap();
    let err = unset.try_acquire(1).await.unwrap_err();
    assert!(matches!(&err, Error::NotInitialized { name } if name == "unset"), "{err}");
    assert!(err.to_string().contains("set-rate unset"), "{err}");
    assert_eq!(unset.available_permits().await.unwrap_err().code(), "EDGELIMIT_NOT_INITIALIZED");

    let limiter = limiter(&stack, "bad", 5, 1000).await;
    let err = limiter.try_acquire(6).await.unwrap_err();
    assert!(matches!(err, Error::PermitsExceedRate { permits: 6, rate: 5 }), "{err}");
    assert_eq!(err.code(), "EDGELIMIT_PERMITS_EXCEED_RATE");
    let err = limiter.try_acquire(0).await.unwrap_err();
    assert_eq!(err.code(), "EDGELIMIT_INVALID_ARGUMENT", "{err}");
    assert_eq!(limiter.available_permits().await.unwrap(), 5, "nothing was consumed");
    assert!(RedissonLimiter::new(stack.client(), "a{b}").is_err());
    assert!(limiter.acquire(1, Duration::from_secs(1)).await.is_ok());
    assert!(limiter.clone().at(T0).acquire(1, Duration::from_secs(1)).await.is_err());
}

/// A config no Redisson client writes is foreign state, never decided on: an interval of 0 or below once let every
/// grant expire at once (5 of 5 granted on a rate of 2).
#[tokio::test]
async fn a_config_of_no_meaning_is_foreign_state_not_a_grant() {
    let stack = Stack::start().await;
    let limiter = limiter(&stack, "odd", 2, 1000).await;
    for (field, value) in [
        ("interval", "0"),
        ("interval", "-1000"),
        ("interval", "1.5"),
        ("interval", "inf"),
        ("rate", "nan"),
        ("rate", "-1"),
    ] {
        let set = Command::new("HSET").args(["odd", field, value]);
        stack.client().command(&set).await.unwrap();
        let err = limiter.clone().at(T0).try_acquire(1).await.unwrap_err();
        assert_eq!(err.code(), "EDGELIMIT_FOREIGN_STATE", "{field} {value}: {err}");
        let restore = Command::new("HSET").args(["odd", "rate", "2", "interval", "1000"]);
        stack.client().command(&restore).await.unwrap();
    }
    assert!(take(&limiter, T0, 1).await.success);
}

#[tokio::test]
async fn missing_or_evicted_state_is_rebuilt_not_a_crash() {
    let stack = Stack::start().await;
    let client = stack.client();
    let limiter = limiter(&stack, "evict", 5, 1000).await;
    assert!(take(&limiter, T0, 2).await.success);
    // The counter evicted: rebuilt from the log.
    client.command(&Command::new("DEL").arg("{evict}:value")).await.unwrap();
    assert_eq!(available(&limiter, T0 + 1).await, 3);
    // The log evicted (Redisson's script then crashes on a nil): the counter is trusted no further than the rate.
    client.command(&Command::new("DEL").arg("{evict}:permits")).await.unwrap();
    let d = take(&limiter, T0 + 2, 3).await;
    assert!(d.success, "{d:?}");
    // Both gone: a fresh window.
    client.command(&Command::new("DEL").arg("{evict}:value").arg("{evict}:permits")).await.unwrap();
    assert_eq!(available(&limiter, T0 + 3).await, 5);
}

#[tokio::test]
async fn release_never_exceeds_the_rate_and_survives_the_next_acquire() {
    let stack = Stack::start().await;
    let limiter = limiter(&stack, "release", 5, 1000).await;
    assert!(take(&limiter, T0, 2).await.success);
    assert_eq!(limiter.clone().at(T0 + 1).release(10).await.unwrap(), 2, "only what is in use comes back");
    assert_eq!(available(&limiter, T0 + 1).await, 5);

    assert!(take(&limiter, T0 + 10, 5).await.success);
    assert_eq!(limiter.clone().at(T0 + 20).release(2).await.unwrap(), 2);
    assert_eq!(available(&limiter, T0 + 20).await, 2);
    assert!(take(&limiter, T0 + 30, 2).await.success);
    assert!(!take(&limiter, T0 + 40, 1).await.success);
    // When the window moves on, availability returns to the rate, not beyond it.
    assert_eq!(available(&limiter, T0 + 1030).await, 5);
}

#[tokio::test]
async fn rate_changes_keep_or_clear_state_as_asked() {
    let stack = Stack::start().await;
    let limiter = limiter(&stack, "change", 5, 1000).await;
    // The updates run at the decisions' explicit times too: an update drops what left the window by its clock.
    let at = |ms: u64| limiter.clone().at(ms);
    assert!(take(&limiter, T0, 5).await.success);
    assert!(at(T0 + 1).update_rate(rate(8, 1000), Mode::Overall).await.unwrap());
    assert_eq!(available(&limiter, T0 + 1).await, 3, "raising keeps the 5 in use");
    assert!(at(T0 + 2).update_rate(rate(2, 1000), Mode::Overall).await.unwrap());
    assert_eq!(available(&limiter, T0 + 2).await, 0, "lowering below use denies");
    assert!(!take(&limiter, T0 + 3, 1).await.success);
    // Raising again within the window still counts all 5 (what the lowering held back from the log too).
    assert!(at(T0 + 4).update_rate(rate(6, 1000), Mode::Overall).await.unwrap());
    assert_eq!(available(&limiter, T0 + 4).await, 1);
    assert_eq!(available(&limiter, T0 + 1000).await, 6, "until the grants expire");

    assert!(take(&limiter, T0 + 1000, 2).await.success);
    limiter.set_rate(rate(4, 1000), Mode::Overall).await.unwrap();
    assert_eq!(available(&limiter, T0 + 1001).await, 4, "set_rate starts a full window");

    // Redisson's updateRate: only a limiter that exists; nothing is created.
    let none = RedissonLimiter::new(stack.client(), "change-none").unwrap();
    assert!(!none.update_rate(rate(4, 1000), Mode::Overall).await.unwrap());
    assert_eq!(none.config().await.unwrap(), None);
}

#[tokio::test]
async fn lowering_below_use_keeps_the_counter_at_zero_and_frees_exactly_in_time() {
    let stack = Stack::start().await;
    let client = stack.client();
    let limiter = limiter(&stack, "lower", 10, 1000).await;
    for i in 0..8 {
        assert!(take(&limiter, T0 + i * 10, 1).await.success);
    }
    // 8 in use, the rate lowered to 5: the counter Redisson reads is 0, not -3.
    assert!(limiter.clone().at(T0 + 100).update_rate(rate(5, 1000), Mode::Overall).await.unwrap());
    let value = client.command(&Command::new("GET").arg("{lower}:value")).await.unwrap();
    assert_eq!(value.into_number::<i64>("value").unwrap(), 0);
    // The first 3 grants expire (T0+1000..T0+1020): the 5 still in the window fill the rate.
    assert_eq!(available(&limiter, T0 + 1020).await, 0);
    assert!(!take(&limiter, T0 + 1025, 1).await.success);
    // Each later expiry frees one.
    assert_eq!(available(&limiter, T0 + 1030).await, 1);
    assert_eq!(available(&limiter, T0 + 1070).await, 5);
}

#[tokio::test]
async fn per_client_mode_gives_each_client_its_own_budget() {
    let stack = Stack::start().await;
    let limiter = limiter(&stack, "mode", 2, 1000).await;
    assert!(take(&limiter, T0, 2).await.success);
    limiter.update_rate(rate(2, 1000), Mode::PerClient).await.unwrap();
    let alice = limiter.clone().with_client_id("alice");
    let bob = limiter.clone().with_client_id("bob");
    assert!(take(&alice, T0 + 1, 2).await.success);
    assert!(!take(&alice, T0 + 1, 1).await.success);
    assert!(take(&bob, T0 + 1, 2).await.success);
}

#[tokio::test]
async fn idle_limiters_vanish_after_their_keep_alive() {
    let stack = Stack::start().await;
    let client = stack.client();
    let idle = RedissonLimiter::new(stack.client(), "idle").unwrap();
    // Long enough that a loaded machine reads every TTL before the first key expires (20 ms once was not).
    let short = rate(5, 500).with_keep_alive(Duration::from_millis(1_000)).unwrap();
    idle.set_rate(short, Mode::Overall).await.unwrap();
    assert!(idle.try_acquire(1).await.unwrap().success);
    for key in ["idle", "{idle}:value", "{idle}:permits"] {
        let ttl = client.command(&Command::new("PTTL").arg(key)).await.unwrap().into_int().unwrap();
        assert!((1..=1_000).contains(&ttl), "{key} has TTL {ttl}");
    }
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(
        client.command(&Command::new("EXISTS").args(["idle", "{idle}:value", "{idle}:permits"])).await.unwrap(),
        Value::Int(0)
    );
    assert_eq!(idle.config().await.unwrap(), None);

    // Without a keep-alive the configuration and the state stay, as Redisson's: an expiry of edgelimit's own would
    // drop grants a Redisson client still counts (it never renews a TTL it did not set).
    let kept = limiter(&stack, "kept", 5, 1000).await;
    assert!(kept.try_acquire(1).await.unwrap().success);
    for key in ["kept", "{kept}:value", "{kept}:permits"] {
        assert_eq!(client.command(&Command::new("PTTL").arg(key)).await.unwrap(), Value::Int(-1), "{key}");
    }
}

#[tokio::test]
async fn expired_grants_leave_the_log() {
    let stack = Stack::start().await;
    let client = stack.client();
    let limiter = limiter(&stack, "trim", 100, 1000).await;
    for i in 0..100 {
        assert!(take(&limiter, T0 + i, 1).await.success);
    }
    assert!(take(&limiter, T0 + 1050, 1).await.success);
    // Grants at T0..T0+50 left the window and the log; T0+51..T0+99 and the new one remain.
    let size = client.command(&Command::new("ZCARD").arg("{trim}:permits")).await.unwrap();
    assert_eq!(size, Value::Int(50));
}

#[tokio::test]
async fn delete_removes_the_limiter() {
    let stack = Stack::start().await;
    let limiter = limiter(&stack, "gone", 5, 1000).await;
    assert!(take(&limiter, T0, 1).await.success);
    assert!(limiter.delete().await.unwrap());
    assert!(!limiter.delete().await.unwrap());
    assert_eq!(limiter.config().await.unwrap(), None);
}

#[tokio::test]
async fn acquire_waits_for_the_exact_delay_and_honours_its_timeout() {
    let stack = Stack::start().await;
    let limiter = limiter(&stack, "wait", 2, 300).await;
    assert!(limiter.try_acquire(2).await.unwrap().success);
    // Too short a timeout for the exact wait (about 300 ms): denied at once, not after waiting the timeout out.
    let started = std::time::Instant::now();
    let denied = limiter.acquire(1, Duration::from_millis(200)).await.unwrap();
    assert!(!denied.success && denied.retry_after > 200, "{denied:?}");
    assert!(started.elapsed() < Duration::from_millis(200), "{:?}", started.elapsed());
    // Enough time: granted once the window frees a permit.
    let granted = limiter.acquire(1, Duration::from_secs(5)).await.unwrap();
    assert!(granted.success, "{granted:?}");
}

#[tokio::test]
async fn sixteen_concurrent_clients_never_get_more_than_the_rate_in_any_window() {
    const RATE: u64 = 20;
    const INTERVAL: u64 = 200;
    let stack = Stack::start().await;
    let limiter = limiter(&stack, "busy", RATE as u32, INTERVAL).await;
    let tasks: Vec<_> = (0..16)
        .map(|task| {
            let limiter = limiter.clone();
            tokio::spawn(async move {
                let mut grants = Vec::new();
                for i in 0..60 {
                    let permits = 1 + (task + i) % 3;
                    let d = limiter.try_acquire(permits).await.unwrap();
                    if d.success {
                        // For a grant, `reset` is its own server time + interval: the exact server grant time.
                        grants.push((d.reset - INTERVAL, u64::from(permits)));
                    }
                    // 60 pauses of 5 ms: the run spans more than one window however fast the store answers (the
                    // client coalesces the 16 tasks' calls into one request per round).
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                grants
            })
        })
        .collect();
    let mut grants = Vec::new();
    for task in tasks {
        grants.extend(task.await.unwrap());
    }
    grants.sort();
    assert!(grants.len() > RATE as usize, "the test must span several windows ({} grants)", grants.len());
    // A window at time t holds the grants with time in (t - interval, t].
    let mut worst = 0;
    for &(t, _) in &grants {
        let in_window: u64 = grants.iter().filter(|(g, _)| *g + INTERVAL > t && *g <= t).map(|(_, p)| p).sum();
        worst = worst.max(in_window);
    }
    assert!(worst <= RATE, "{worst} permits granted within one {INTERVAL} ms window, rate {RATE}");
}

#[tokio::test]
async fn redisson_and_edgelimit_share_one_budget() {
    let stack = Stack::start().await;
    let client = stack.client();
    let limiter = limiter(&stack, "shared", 10, 1000).await;
    let redisson = Script::new(include_str!("../../bench/peers/redisson_acquire.lua"));
    let keys = ["shared", "{shared}:value", "{shared}:value:java", "{shared}:permits", "{shared}:permits:java"];
    let redisson_acquire = |now: u64, id: &'static str| {
        let (client, redisson) = (client.clone(), redisson.clone());
        async move { redisson.run(&client, &keys, &["2", &now.to_string(), id]).await.unwrap() }
    };
    // Alternate: edgelimit takes 3, Redisson 2, edgelimit 3, Redisson 2: the 10 are gone for both sides.
    assert!(take(&limiter, T0, 3).await.success);
    assert_eq!(redisson_acquire(T0 + 1, "java-1").await, Value::Nil, "Redisson granted");
    assert!(take(&limiter, T0 + 2, 3).await.success);
    assert_eq!(redisson_acquire(T0 + 3, "java-2").await, Value::Nil, "Redisson granted");
    assert!(!take(&limiter, T0 + 4, 1).await.success);
    assert!(matches!(redisson_acquire(T0 + 5, "java-3").await, Value::Int(delay) if delay > 0));
    assert_eq!(available(&limiter, T0 + 5).await, 0);
    // Both sides see the window move: at T0+1001 the first two grants (3 + 2) expire.
    assert_eq!(available(&limiter, T0 + 1001).await, 5);
    // At T0+1002 edgelimit's T0+2 grant expires too; Redisson takes 2 of the 8 then free: 10 - 2 (T0+3) - 2 = 6.
    assert_eq!(redisson_acquire(T0 + 1002, "java-4").await, Value::Nil);
    assert_eq!(available(&limiter, T0 + 1002).await, 6);
}

#[tokio::test]
async fn no_input_makes_a_script_raise_a_raw_lua_error() {
    use edgelimit::lua::{
        REDISSON_ACQUIRE as ACQUIRE, REDISSON_AVAILABLE as AVAILABLE, REDISSON_RELEASE as RELEASE,
        REDISSON_SET_RATE as SET_RATE,
    };
    let stack = Stack::start().await;
    let client = stack.client();
    limiter(&stack, "fuzz", 5, 1000).await;
    let good_keys = ["fuzz", "{fuzz}:value", "{fuzz}:value:c", "{fuzz}:permits", "{fuzz}:permits:c"];
    let long_id = "x".repeat(300);
    let arg_sets: Vec<Vec<&str>> = vec![
        vec![],
        vec![""],
        vec!["abc"],
        vec!["-5", "1", "id"],
        vec!["", "x", "id"],
        vec!["", "-1", "id"],
        vec!["", "1.5", "id"],
        vec!["", "1e40", "id"],
        vec!["", "nan", "id"],
        vec!["", "6", "id"],
        vec!["", "2", &long_id],
        vec!["", "2"],
        vec!["", "0", "1000", "0", "0", "set"],
        vec!["", "5", "abc", "0", "0", "set"],
        vec!["", "5", "1000", "7", "0", "set"],
        vec!["", "5", "1000", "0", "-5", "set"],
        vec!["", "5", "1000", "0", "0", "bogus"],
        vec!["", "5", "1000", "0", "0"],
    ];
    let mut checked = 0;
    for script in [&ACQUIRE, &AVAILABLE, &RELEASE, &SET_RATE] {
        for keys in [&good_keys[..], &good_keys[..2], &[]] {
            for args in &arg_sets {
                match script.run(&client, keys, args).await {
                    Ok(_) => {}
                    // Our own refusal, classified as an argument error. A raw Lua error would be Error::Redis.
                    Err(Error::InvalidArgument(message)) => assert!(
                        message.starts_with("the script refused the call: invalid"),
                        "{keys:?} {args:?}: {message}"
                    ),
                    Err(other) => panic!("{keys:?} {args:?}: {other}"),
                }
                checked += 1;
            }
        }
        // Between scripts, put the limiter back: a garbage-free set-rate above may have changed it.
        SET_RATE.run(&client, &good_keys, &["", "5", "1000", "0", "0", "set"]).await.unwrap();
    }
    assert_eq!(checked, 4 * 3 * arg_sets.len());
}

/// Redisson's lifetimes, exactly: with a keep-alive every key lives that long past each use, whatever the use;
/// without one the state lives as long as the config, which an expiry (Redisson's `expire`) makes finite.
#[tokio::test]
async fn state_keys_live_as_long_as_redisson_gives_them() {
    let stack = Stack::start().await;
    let client = stack.client();
    let pttl = |key: &'static str| {
        let client = client.clone();
        async move { client.command(&Command::new("PTTL").arg(key)).await.unwrap().into_int().unwrap() }
    };
    let limiter = RedissonLimiter::new(stack.client(), "ttl").unwrap();
    let with_keep_alive = rate(2, 1000).with_keep_alive(Duration::from_secs(60)).unwrap();
    assert!(limiter.try_set_rate(with_keep_alive, Mode::Overall).await.unwrap());
    // Grants, denials and reads: every key of the pair keeps the keep-alive's lifetime.
    assert!(take(&limiter, T0, 2).await.success);
    assert!(!take(&limiter, T0 + 1, 1).await.success);
    assert_eq!(available(&limiter, T0 + 500).await, 0);
    for key in ["ttl", "{ttl}:value", "{ttl}:permits"] {
        let ttl = pttl(key).await;
        assert!((55_000..=60_000).contains(&ttl), "{key}: {ttl}");
    }
    // A rebuild from scratch (both keys evicted) gets it too.
    client.command(&Command::new("DEL").args(["{ttl}:value", "{ttl}:permits"])).await.unwrap();
    assert!(take(&limiter, T0 + 2000, 1).await.success);
    assert!(pttl("{ttl}:value").await > 55_000);

    // No keep-alive: no lifetime; an expiry of the limiter is then every key's, renewed by nothing.
    assert!(limiter.set_keep_alive(None).await.unwrap());
    for key in ["ttl", "{ttl}:value", "{ttl}:permits"] {
        assert_eq!(pttl(key).await, -1, "{key}");
    }
    assert!(limiter.expire(Some(Duration::from_secs(30))).await.unwrap());
    assert!(take(&limiter, T0 + 3000, 1).await.success);
    for key in ["ttl", "{ttl}:value", "{ttl}:permits"] {
        let ttl = pttl(key).await;
        assert!((1..=30_000).contains(&ttl), "{key}: {ttl}");
    }
    assert!(limiter.expire(None).await.unwrap());
    assert_eq!(pttl("{ttl}:permits").await, -1);
    // A keep-alive shorter than the interval would forget grants in the window: refused.
    assert!(limiter.set_keep_alive(Some(Duration::from_millis(500))).await.is_err());
    assert!(limiter.set_keep_alive(Some(Duration::from_secs(5))).await.unwrap());
    assert_eq!(limiter.config().await.unwrap().unwrap().rate.keep_alive(), Some(Duration::from_secs(5)));
    // A rate updated without a keep-alive drops the keep-alive's lifetime too: kept, 5 s on a rate per 30 s would let
    // the grants in the window vanish after an idle 5 s (review: 4 grants in 2 s on 2 per 30 s).
    assert!(limiter.try_acquire(1).await.unwrap().success, "a grant in the window, on the server's clock");
    assert!(pttl("{ttl}:permits").await > 0);
    assert!(limiter.update_rate(rate(2, 30_000), Mode::Overall).await.unwrap());
    for key in ["ttl", "{ttl}:value", "{ttl}:permits"] {
        assert_eq!(pttl(key).await, -1, "{key}");
    }
    // Nothing to change on a limiter that does not exist.
    let none = RedissonLimiter::new(stack.client(), "ttl-none").unwrap();
    assert!(!none.expire(Some(Duration::from_secs(1))).await.unwrap());
    assert!(!none.set_keep_alive(None).await.unwrap());
}

/// Every state a Redisson client can leave is read without over-admitting or sticking.
#[tokio::test]
async fn states_a_redisson_client_leaves_are_repaired() {
    let stack = Stack::start().await;
    let client = stack.client();
    let limiter = limiter(&stack, "odd", 5, 1000).await;
    let set = |value: &'static str| {
        let client = client.clone();
        async move {
            client.command(&Command::new("SET").arg("{odd}:value").arg(value)).await.unwrap();
        }
    };
    // A counter without a log (the log expired under it): nothing is in use.
    set("1").await;
    assert_eq!(available(&limiter, T0).await, 5);
    // A log without a counter: rebuilt from the log, not the whole rate again.
    assert!(take(&limiter, T0 + 10, 3).await.success);
    client.command(&Command::new("DEL").arg("{odd}:value")).await.unwrap();
    assert_eq!(available(&limiter, T0 + 20).await, 2);
    // A negative counter, or one above the rate: rebuilt.
    set("-3").await;
    assert_eq!(available(&limiter, T0 + 30).await, 2);
    set("9").await;
    assert_eq!(available(&limiter, T0 + 40).await, 2);
    assert!(!take(&limiter, T0 + 50, 3).await.success);
    // Releasing 0 is a no-op, as Redisson's.
    assert_eq!(limiter.release(0).await.unwrap(), 0);
    assert_eq!(available(&limiter, T0 + 60).await, 2);
}

/// Every key a script is given is the limiter's own, spelt as Redisson spells them. A holder of a limiter token
/// once swapped the log for an empty key in the same slot: the script rebuilt the counter from it, the whole rate
/// again (17 grants in 60 s on a rate of 5).
#[tokio::test]
async fn keys_that_are_not_the_limiters_own_are_refused() {
    use edgelimit::lua::{REDISSON_ACQUIRE as ACQUIRE, REDISSON_AVAILABLE as AVAILABLE};
    let stack = Stack::start().await;
    let client = stack.client();
    let limiter = limiter(&stack, "own", 2, 60_000).await;
    assert!(take(&limiter, T0, 2).await.success);
    let keys = |value: &'static str, client_value: &'static str, log: &'static str, client_log: &'static str| {
        ["own", value, client_value, log, client_log]
    };
    for wrong in [
        keys("{own}:value", "{own}:value:c", "{own}:permits:fresh", "{own}:permits:c"),
        keys("{own}:value", "{own}:value:c", "{own}:permits", "{own}:permits:d"),
        keys("{own}:value:x", "{own}:value:x:c", "{own}:permits", "{own}:permits:c"),
        keys("{other}:value", "{other}:value:c", "{other}:permits", "{other}:permits:c"),
        keys("{own}:value", "{own}:valuex", "{own}:permits", "{own}:permitsx"),
    ] {
        for script in [&ACQUIRE, &AVAILABLE] {
            let err = script.run(&client, &wrong, &[&(T0 + 1).to_string(), "1", "id"]).await.unwrap_err();
            assert!(
                matches!(&err, Error::InvalidArgument(message) if message.contains("invalid keys")),
                "{wrong:?}: {err}"
            );
        }
    }
    assert!(!take(&limiter, T0 + 2, 1).await.success, "the limiter is still full");
    let log = client.command(&Command::new("ZCARD").arg("{own}:permits:fresh")).await.unwrap();
    assert_eq!(log.into_int().unwrap(), 0, "nothing written under a wrong key");
}

/// Redisson's own `release` raises the counter and leaves the grants in the log, which then free their permits a
/// second time when they expire: 10 grants in one window of a rate of 5 (review, with Redisson 3.52 and 4.7).
/// A counter above what the log leaves free is rebuilt from the log, so no window ever holds more than the rate.
#[tokio::test]
async fn a_counter_redissons_release_raised_frees_no_permit_twice() {
    let stack = Stack::start().await;
    let client = stack.client();
    let limiter = limiter(&stack, "twice", 5, 1000).await;
    for i in 0..5 {
        assert!(take(&limiter, T0 + i, 1).await.success);
    }
    // What Redisson's release(5) does: INCRBY on the counter, nothing else.
    let bump = Command::new("INCRBY").args(["{twice}:value", "5"]);
    client.command(&bump).await.unwrap();
    let mut granted = Vec::new();
    for at in (T0 + 10..T0 + 15).chain(T0 + 1000..T0 + 1010) {
        if take(&limiter, at, 1).await.success {
            granted.push(at);
        }
    }
    // Every window of 1000 ms from T0 + 10 on holds at most the rate, with the 5 grants before it counted.
    for start in T0 + 5..T0 + 1010 {
        let earlier = (0..5).filter(|i| (start..start + 1000).contains(&(T0 + i))).count();
        let later = granted.iter().filter(|at| (start..start + 1000).contains(*at)).count();
        assert!(earlier + later <= 5, "{} in [{start}, +1000): {granted:?}", earlier + later);
    }
    assert_eq!(granted.len(), 5, "each permit frees once: {granted:?}");
}

/// Lowering a per-client rate keeps every client's grants in use, not only the caller's: other clients' logs are
/// trimmed to the new rate on their next call (review: 8 more granted after a lowering to 4, 10 already in use).
#[tokio::test]
async fn lowering_a_per_client_rate_holds_every_clients_grants_to_it() {
    let stack = Stack::start().await;
    let limiter = RedissonLimiter::new(stack.client(), "lowered").unwrap();
    limiter.set_rate(rate(10, 1000), Mode::PerClient).await.unwrap();
    let alice = limiter.clone().with_client_id("alice");
    let before: Vec<u64> = (0..10).map(|i| T0 + i * 100).collect();
    for &at in &before {
        assert!(take(&alice, at, 1).await.success);
    }
    let bob = limiter.clone().with_client_id("bob").at(T0 + 950);
    assert!(bob.update_rate(rate(4, 1000), Mode::PerClient).await.unwrap());
    // Alice's grants expire one every 100 ms from T0 + 1000: one frees a permit only once at most 3 are left.
    let mut after = Vec::new();
    for at in (T0 + 1000..T0 + 2000).step_by(50) {
        if take(&alice, at, 1).await.success {
            after.push(at);
        }
    }
    // Every window holding a grant made after the lowering holds at most the new rate.
    for grant in &after {
        for start in grant - 999..=*grant {
            let held = before.iter().chain(&after).filter(|at| (start..start + 1000).contains(*at)).count();
            assert!(held <= 4, "{held} in [{start}, +1000): {after:?}");
        }
    }
    assert_eq!(after, [T0 + 1600, T0 + 1700, T0 + 1800, T0 + 1900]);
}

/// A log member no Redisson client writes is foreign state, before anything is changed: it was a raw Lua error
/// (`bad argument #2 to 'unpack'`), after the expired grants had left the log uncredited.
#[tokio::test]
async fn a_log_member_that_is_no_grant_is_foreign_state_and_nothing_changes() {
    let stack = Stack::start().await;
    let client = stack.client();
    let limiter = limiter(&stack, "damaged", 3, 1000).await;
    assert!(take(&limiter, T0, 2).await.success);
    for member in ["garbage", "", "\u{1}x\0\0\0"] {
        let add = Command::new("ZADD").args(["{damaged}:permits", &T0.to_string(), member]);
        client.command(&add).await.unwrap();
        let err = limiter.clone().at(T0 + 1000).try_acquire(1).await.unwrap_err();
        assert_eq!(err.code(), "EDGELIMIT_FOREIGN_STATE", "{member:?}: {err}");
        assert!(!err.to_string().contains("unpack"), "{err}");
        let log = client.command(&Command::new("ZCARD").arg("{damaged}:permits")).await.unwrap();
        assert_eq!(log.into_int().unwrap(), 2, "{member:?}: the expired grant is still logged");
        let remove = Command::new("ZREM").args(["{damaged}:permits", member]);
        client.command(&remove).await.unwrap();
    }
    assert_eq!(available(&limiter, T0 + 1000).await, 3);
    // A grant of 0 permits, which Redisson's tryAcquire(0) logs: it counts nothing, and stops nothing (review).
    let zero = Command::new("ZADD").args(["{damaged}:permits", &(T0 + 1000).to_string(), "\u{1}x\0\0\0\0"]);
    client.command(&zero).await.unwrap();
    assert_eq!(available(&limiter, T0 + 1001).await, 3);
    assert!(take(&limiter, T0 + 1002, 3).await.success);
    assert_eq!(available(&limiter, T0 + 2500).await, 3);
}
