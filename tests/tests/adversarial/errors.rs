//! Error replies, foreign state and oversized requests against a fail-open limiter (issue 18, point 2 and point 1's
//! 413): only an unavailable store may be absorbed by `onError`; everything else is reported with its code, every
//! time, and never becomes an allow. See `tests/tests/adversarial/main.rs`.

use std::time::Duration;

use edgelimit::limit::scripts;
use edgelimit::ratelimit::{Limit, OnError, Options, Outcome, Ratelimit, Reason};
use edgelimit::{Algorithm, Command, Error, ErrorClass, Quota, RestClient, Value};
use edgelimit_tests::Stack;

const SECOND: Duration = Duration::from_secs(1);

fn ratelimit(client: RestClient, quota: Quota, on_error: OnError) -> Ratelimit {
    let options = Options {
        on_error,
        // The block cache must not answer for Redis: every call below goes to the store.
        cache_entries: 0,
        ..Options::default()
    };
    Ratelimit::new(client, &[Limit::new(quota)], options).expect("a valid limit")
}

async fn run(client: &RestClient, words: &[&str]) -> edgelimit::Result<Value> {
    client.command(&Command::new(words[0]).args(&words[1..])).await
}

/// The keys Redis holds for an identifier (whatever layout the limit uses for its state).
async fn keys_of(client: &RestClient, id: &str) -> Vec<String> {
    let Value::Array(keys) = run(client, &["KEYS", &format!("*{id}*")]).await.unwrap() else {
        panic!("KEYS answers an array");
    };
    keys.into_iter()
        .map(|key| match key {
            Value::Bytes(bytes) => String::from_utf8(bytes).unwrap(),
            other => panic!("a key name, got {other:?}"),
        })
        .collect()
}

/// An error the policy did not absorb, with its code; panics on an outcome (an allow or a deny).
fn reported(result: edgelimit::Result<Outcome>) -> Error {
    match result {
        Err(error) => error,
        Ok(outcome) => panic!("expected an error, got an outcome: {outcome:?}"),
    }
}

fn assert_no_lua_internals(message: &str) {
    assert!(!message.contains("user_script"), "{message}");
    assert!(!message.contains("script: "), "{message}");
    assert!(
        !message
            .split(|c: char| !c.is_ascii_hexdigit())
            .any(|word| word.len() == 40),
        "a SHA1 in {message}"
    );
}

#[tokio::test]
async fn foreign_state_in_a_limiter_key_is_reported_every_time_never_allowed() {
    let stack = Stack::start().await;
    let client = stack.client();
    type Foreign = fn(&str) -> Vec<String>;
    let cases: [(Quota, &str, Foreign); 3] = [
        (Quota::token_bucket(5, 5, SECOND).unwrap(), "bucket-victim", |key| {
            vec!["HSET".into(), key.into(), "field".into(), "value".into()]
        }),
        (Quota::sliding_log(5, SECOND).unwrap(), "log-victim", |key| {
            vec!["SET".into(), key.into(), "foreign".into()]
        }),
        (Quota::gcra(5, 5, SECOND).unwrap(), "gcra-victim", |key| {
            vec!["LPUSH".into(), key.into(), "foreign".into()]
        }),
    ];
    for (quota, id, foreign) in cases {
        let limiter = ratelimit(client.clone(), quota, OnError::Allow);
        // A first decision writes the limit's state; then another program takes its keys over.
        assert!(limiter.limit(id, 1).await.unwrap().decision.success);
        let keys = keys_of(&client, id).await;
        assert!(!keys.is_empty(), "{quota:?} wrote no key for {id}");
        for key in &keys {
            run(&client, &["DEL", key]).await.unwrap();
            let words = foreign(key);
            client
                .command(&Command::new(&words[0]).args(&words[1..]))
                .await
                .unwrap();
        }
        for attempt in 0..5 {
            let error = reported(limiter.limit(id, 1).await);
            assert_eq!(
                error.code(),
                "EDGELIMIT_FOREIGN_STATE",
                "{quota:?} attempt {attempt}: {error}"
            );
            assert_eq!(error.class(), ErrorClass::ForeignState);
            assert!(!error.is_absorbable());
            let message = error.to_string();
            assert!(message.contains("WRONGTYPE"), "{message}");
            assert_no_lua_internals(&message);
        }
        // Failing closed does not change it either: the error is the answer, not a policy's deny.
        let closed = ratelimit(client.clone(), quota, OnError::Deny);
        assert_eq!(reported(closed.limit(id, 1).await).code(), "EDGELIMIT_FOREIGN_STATE");
    }
}

#[tokio::test]
async fn a_scripts_argument_error_is_reported_with_its_own_words_and_no_lua_location() {
    let stack = Stack::start().await;
    let client = stack.client();
    // A hand-made call of the real token-bucket script: operation, time, permits, limit, interval, rate, lease.
    let script = scripts::for_one(Algorithm::TokenBucket);
    let error = script
        .run(
            &client,
            &["edgelimit:{hand}:made"],
            &["limit", "", "1", "-5", "1000", "1", ""],
        )
        .await
        .unwrap_err();
    assert_eq!(error.code(), "EDGELIMIT_SCRIPT_ARGUMENT", "{error}");
    assert_eq!(error.class(), ErrorClass::Request);
    assert!(!error.is_absorbable());
    let Error::ScriptArgument(reply) = &error else {
        panic!("{error:?}")
    };
    assert!(reply.text().starts_with("ERR edgelimit: invalid "), "{reply}");
    assert!(reply.text().ends_with(": -5"), "{reply}");
    assert_no_lua_internals(&error.to_string());
}

#[tokio::test]
async fn a_read_only_replica_is_absorbed_with_a_health_signal_and_nothing_is_granted() {
    let stack = Stack::start().await;
    let client = stack.client();
    let quota = Quota::sliding_log(1, Duration::from_secs(3600)).unwrap();
    // Port 1: no primary listens there, so the replica never syncs (which would wipe it) and stays read-only.
    run(&client, &["REPLICAOF", "127.0.0.1", "1"]).await.unwrap();
    run(&client, &["CONFIG", "SET", "replica-read-only", "yes"])
        .await
        .unwrap();
    for (policy, allowed) in [(OnError::Allow, true), (OnError::Deny, false)] {
        let limiter = ratelimit(client.clone(), quota, policy);
        for _ in 0..3 {
            let outcome = limiter.limit("replica-victim", 1).await.unwrap();
            assert_eq!(outcome.decision.success, allowed, "{policy:?}");
            assert_eq!(outcome.reason, Reason::Error);
            assert_eq!((outcome.decision.remaining, outcome.decision.lease), (0, None));
            let error = outcome.error.expect("the absorbed error is kept");
            assert_eq!(error.code(), "EDGELIMIT_STORE_READONLY", "{error}");
            assert_eq!(error.class(), ErrorClass::StoreDegraded, "the health signal");
            assert!(error.to_string().contains("read-only replica"), "{error}");
        }
        let thrown = ratelimit(client.clone(), quota, OnError::Throw);
        assert_eq!(
            reported(thrown.limit("replica-victim", 1).await).code(),
            "EDGELIMIT_STORE_READONLY"
        );
    }
    // Nothing was written: back on a primary, the limit of 1 is whole.
    run(&client, &["REPLICAOF", "NO", "ONE"]).await.unwrap();
    assert_eq!(keys_of(&client, "replica-victim").await, Vec::<String>::new());
    let limiter = ratelimit(client.clone(), quota, OnError::Allow);
    let first = limiter.limit("replica-victim", 1).await.unwrap();
    assert_eq!((first.reason, first.decision.success), (Reason::Decided, true));
    let second = limiter.limit("replica-victim", 1).await.unwrap();
    assert_eq!((second.reason, second.decision.success), (Reason::Decided, false));
}

#[tokio::test]
async fn a_request_the_endpoint_refuses_as_too_large_is_reported_not_absorbed() {
    // A body limit below any decision's request: the bridge answers 413 to every one, as it would to a 1 MiB
    // identifier under the default limit.
    let stack = Stack::start_with(|config| config.max_request_bytes = 64).await;
    let client = stack.client();
    for policy in [OnError::Allow, OnError::Deny] {
        let limiter = ratelimit(client.clone(), Quota::sliding_log(1, SECOND).unwrap(), policy);
        for _ in 0..3 {
            let error = reported(limiter.limit("large", 1).await);
            assert!(matches!(error, Error::RequestTooLarge { .. }), "{error:?}");
            assert_eq!(error.code(), "EDGELIMIT_REQUEST_TOO_LARGE");
            assert_eq!(error.class(), ErrorClass::Request);
        }
    }
}

#[tokio::test]
async fn redis_stopped_is_absorbed_by_the_policy() {
    let mut stack = Stack::start().await;
    let client = stack.client();
    stack.stop_redis().await;
    for (policy, allowed) in [(OnError::Allow, true), (OnError::Deny, false)] {
        let limiter = ratelimit(client.clone(), Quota::sliding_log(1, SECOND).unwrap(), policy);
        let outcome = limiter.limit("outage", 1).await.unwrap();
        assert_eq!((outcome.decision.success, outcome.reason), (allowed, Reason::Error));
        assert_eq!((outcome.decision.remaining, outcome.decision.lease), (0, None));
        let error = outcome.error.expect("the absorbed error is kept");
        assert_eq!(error.code(), "EDGELIMIT_STORE_UNAVAILABLE", "{error}");
        assert_eq!(error.class(), ErrorClass::StoreUnavailable);
        assert!(matches!(error, Error::Endpoint { status: 503, .. }), "{error:?}");
    }
}

#[tokio::test]
async fn doctor_fails_an_evicting_redis_and_passes_a_noeviction_one() {
    use edgelimit_cli::doctor::{self, Status};
    let stack = Stack::start().await;
    let client = stack.client();
    let statuses = |checks: &[doctor::Check]| checks.iter().map(|c| (c.name, c.status)).collect::<Vec<_>>();
    let healthy = doctor::checks(&client).await;
    assert_eq!(
        statuses(&healthy),
        [
            ("endpoint reachable", Status::Ok),
            ("token accepted", Status::Ok),
            ("maxmemory-policy", Status::Ok),
            ("script cache", Status::Ok),
            ("server time", Status::Ok),
        ]
    );
    assert_eq!(doctor::report(&healthy).1, 0);
    run(&client, &["CONFIG", "SET", "maxmemory-policy", "volatile-lru"])
        .await
        .unwrap();
    let evicting = doctor::checks(&client).await;
    assert_eq!(evicting[2].status, Status::Fail);
    assert!(
        evicting[2].detail.contains("CONFIG SET maxmemory-policy noeviction"),
        "{}",
        evicting[2].detail
    );
    assert_eq!(doctor::report(&evicting).1, 1);
    let wrong_token = RestClient::new(stack.url(), "wrong").unwrap();
    let refused = doctor::checks(&wrong_token).await;
    assert_eq!(
        statuses(&refused)[..2],
        [("endpoint reachable", Status::Ok), ("token accepted", Status::Fail)]
    );
    assert!(refused[2..].iter().all(|check| check.status == Status::Unknown));
}
