//! Identifiers (points 1, 6, 7): any identifier works and is exact. A 1 MiB identifier is limited exactly (keyed by
//! a hash of its bytes, not refused by the endpoint and absorbed by a fail-open policy), an identifier equal to
//! another's hashed key or differing only after a NUL is another limit, and no identifier can stand for another
//! limit's entry in the block cache. See `tests/tests/adversarial/main.rs`.

use std::time::Duration;

use edgelimit::ratelimit::{Limit, OnError, Options, Ratelimit, Reason};
use edgelimit::{Command, Identifier, Quota};
use edgelimit_tests::Stack;

fn fail_open(stack: &Stack, limits: &[Limit]) -> Ratelimit {
    let options = Options { on_error: OnError::Allow, ..Options::default() };
    Ratelimit::new(stack.client(), limits, options).unwrap()
}

fn sliding_log(limit: u32, seconds: u64) -> Limit {
    Limit::new(Quota::sliding_log(limit, Duration::from_secs(seconds)).unwrap())
}

async fn exists(stack: &Stack, key: &str) -> bool {
    let command = Command::new("EXISTS").arg(key);
    stack.client().command(&command).await.unwrap().into_int().unwrap() == 1
}

#[tokio::test]
async fn a_megabyte_identifier_is_limited_exactly_under_a_hash_of_its_bytes() {
    let stack = Stack::start().await;
    let ratelimit = fail_open(&stack, &[sliding_log(1, 3600)]);
    let huge = "A".repeat(1 << 20);
    let first = ratelimit.limit(huge.as_str(), 1).await.unwrap();
    assert_eq!((first.decision.success, first.reason), (true, Reason::Decided));
    let second = ratelimit.limit(huge.as_str(), 1).await.unwrap();
    assert_eq!((second.decision.success, second.reason), (false, Reason::Decided));
    assert!(second.decision.retry_after > 3_500_000, "{:?}", second.decision);
    // Keyed by '#' and the SHA-256 of its bytes: a fixed-size key.
    let key = ratelimit.limiters()[0].state_key(huge.as_str());
    let part = Identifier::from(huge.as_str()).key_part().to_owned();
    assert!(key.ends_with(&format!("}}:{part}")) && part.len() == 65 && part.starts_with('#'), "{key}");
    assert!(exists(&stack, &key).await);
    // One byte more is another identifier.
    let other = format!("{huge}A");
    assert!(ratelimit.limit(other.as_str(), 1).await.unwrap().decision.success);
}

#[tokio::test]
async fn identifiers_that_look_alike_are_different_limits() {
    let stack = Stack::start().await;
    let ratelimit = fail_open(&stack, &[sliding_log(1, 3600)]);
    let long = "x".repeat(300);
    let hashed_form = Identifier::from(long.as_str()).key_part().to_owned();
    let with_nul = "user\0admin";
    let truncated = "user";
    for id in [long.as_str(), hashed_form.as_str(), with_nul, truncated, "", "#", "##"] {
        let first = ratelimit.limit(id, 1).await.unwrap();
        assert!(first.decision.success, "{id:.20?}: its own limit, untouched by the others");
        assert!(!ratelimit.limit(id, 1).await.unwrap().decision.success, "{id:.20?}");
    }
    // The hashed form, used as an identifier, is hashed itself: its key is not the long identifier's.
    let limiter = &ratelimit.limiters()[0];
    assert_ne!(limiter.state_key(long.as_str()), limiter.state_key(hashed_form.as_str()));
}

#[tokio::test]
async fn no_identifier_can_poison_another_limits_block_cache_entry() {
    let stack = Stack::start().await;
    let ratelimit = Ratelimit::new(stack.client(), &[sliding_log(1, 10)], Options::default()).unwrap();
    // Before, the cache key was `<id>\0<name>\0…`: this identifier under the sliding log had the key of `victim`
    // under [fixed window, sliding log], and its cached denial answered the victim's first request.
    let attacker = "victim\0fixed_window-10000ms";
    assert!(ratelimit.limit(attacker, 1).await.unwrap().decision.success);
    let denied = ratelimit.limit(attacker, 1).await.unwrap();
    assert_eq!((denied.decision.success, denied.reason), (false, Reason::Decided));
    assert_eq!(ratelimit.limit(attacker, 1).await.unwrap().reason, Reason::Cache);
    let limits = [Limit::new(Quota::fixed_window(5, Duration::from_secs(10)).unwrap()), sliding_log(1, 10)];
    let victim = ratelimit.limit_all("victim", &limits, 1).await.unwrap();
    assert_eq!((victim.decision.success, victim.reason), (true, Reason::Decided));
    // Resetting the attacker forgets its cached denial, and only its own.
    assert!(ratelimit.reset(attacker).await.unwrap());
    assert_eq!(ratelimit.limit(attacker, 1).await.unwrap().reason, Reason::Decided);
}
