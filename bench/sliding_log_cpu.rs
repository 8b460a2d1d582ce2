//! Redis CPU per sliding-log decision: edgelimit's acquire script next to Redisson's original (seeds), on the same
//! Redis and the same workload, read from `INFO commandstats` (µs per EVALSHA, and the commands each call ran).
//!
//! Workload at rate R: interval = R ms and one grant per ms, so the log holds R grants in steady state (the size
//! that matters for cost). Warm-up fills the window; then, for 2000 ms of explicit time, each ms gets one request
//! that is granted (and expires the oldest grant) and one that is denied.
//!
//! Run: `cargo run --release -p edgelimit-tests --example sliding_log_cpu`

use std::time::Duration;

use edgelimit::sliding_log::scripts::ACQUIRE;
use edgelimit::{Mode, Rate, RateLimiter, Script};
use edgelimit_tests::redis_stats::{reset as reset_stats, script_cost};
use edgelimit_tests::Stack;

const T0: u64 = 1_700_000_000_000;
const MEASURED_MS: u64 = 2_000;

/// Runs `call(now)` for every `now` in `times`, 16 at a time (warm-up order does not matter: nothing expires).
async fn warm_up<F, Fut>(rate: u64, call: F)
where
    F: Fn(u64) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let tasks: Vec<_> = (0..16)
        .map(|lane| {
            let call = call.clone();
            tokio::spawn(async move {
                for t in (lane..rate).step_by(16) {
                    call(T0 + t).await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
}

#[tokio::main]
async fn main() {
    let stack = Stack::start().await;
    let client = stack.client();
    let redisson = Script::new(include_str!("../tests/fixtures/redisson_acquire.lua"));
    println!("| rate (per interval) | edgelimit µs/decision | Redisson µs/decision | ratio | edgelimit cmds/decision | Redisson cmds/decision |");
    println!("|---|---|---|---|---|---|");
    for rate in [10u64, 1_000, 100_000] {
        let setting = Rate::new(rate as u32, Duration::from_millis(rate)).unwrap();
        let ours = RateLimiter::new(client.clone(), &format!("ours{rate}")).unwrap();
        ours.set_rate(setting, Mode::Overall).await.unwrap();
        let theirs_name = format!("theirs{rate}");
        RateLimiter::new(client.clone(), &theirs_name)
            .unwrap()
            .set_rate(setting, Mode::Overall)
            .await
            .unwrap();
        let theirs_keys: Vec<String> = ["", ":value", ":value:java", ":permits", ":permits:java"]
            .iter()
            .enumerate()
            .map(|(i, suffix)| {
                if i == 0 {
                    theirs_name.clone()
                } else {
                    format!("{{{theirs_name}}}{suffix}")
                }
            })
            .collect();
        let redisson_call = {
            let (client, redisson, keys) = (client.clone(), redisson.clone(), theirs_keys.clone());
            move |now: u64, id: String| {
                let (client, redisson, keys) = (client.clone(), redisson.clone(), keys.clone());
                async move {
                    redisson
                        .run(&client, &keys, &["1".to_owned(), now.to_string(), id])
                        .await
                        .unwrap();
                }
            }
        };

        let ours_warm = ours.clone();
        warm_up(rate, move |now| {
            let limiter = ours_warm.clone().at(now);
            async move {
                assert!(limiter.try_acquire(1).await.unwrap().success);
            }
        })
        .await;
        let theirs_warm = redisson_call.clone();
        warm_up(rate, move |now| theirs_warm(now, format!("w{now}"))).await;

        reset_stats(&client).await;
        for ms in 0..MEASURED_MS {
            let limiter = ours.clone().at(T0 + rate + ms);
            assert!(
                limiter.try_acquire(1).await.unwrap().success,
                "steady state grants one per ms"
            );
            assert!(!limiter.try_acquire(1).await.unwrap().success, "and denies the second");
        }
        let (ours_us, ours_cmds) = script_cost(&client).await;

        reset_stats(&client).await;
        for ms in 0..MEASURED_MS {
            let now = T0 + rate + ms;
            redisson_call(now, format!("g{now}")).await;
            redisson_call(now, format!("d{now}")).await;
        }
        let (theirs_us, theirs_cmds) = script_cost(&client).await;
        println!(
            "| {rate} | {ours_us:.2} | {theirs_us:.2} | {:.2} | {ours_cmds:.1} | {theirs_cmds:.1} |",
            ours_us / theirs_us
        );
    }
    println!(
        "\nacquire script SHA1 {}; {} ms of steady state per rate, one grant + one denial per ms",
        ACQUIRE.sha1(),
        MEASURED_MS
    );
}
