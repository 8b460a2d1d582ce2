//! Errors and the failure policy (points 1 and 2): only an unavailable store may be absorbed by a fail-open limit.
//! Foreign state in a limit's key, a script's refusal, a request too large for the endpoint and an error edgelimit
//! does not know are reported every time, with their code, and never turned into "allowed"; a read-only replica and
//! a stopped Redis are absorbed, READONLY with its own code to alert on. See `tests/tests/adversarial/main.rs`.

use std::time::Duration;

use edgelimit::limit::{Algorithm, Quota};
use edgelimit::ratelimit::{Limit, OnError, Options, Ratelimit, Reason};
use edgelimit::{Command, Error};
use edgelimit_cli::redis_server::RedisServer;
use edgelimit_tests::Stack;

const SECOND: Duration = Duration::from_secs(1);

fn fail_open(stack: &Stack, quota: Quota) -> Ratelimit {
    let options = Options { on_error: OnError::Allow, ..Options::default() };
    Ratelimit::new(stack.client(), &[Limit::new(quota)], options).unwrap()
}

#[tokio::test]
async fn foreign_state_in_a_limits_key_is_reported_every_time_never_allowed() {
    let stack = Stack::start().await;
    // Another program's value, of a type the limit's algorithm does not keep, under the limit's key.
    let cases = [
        (Quota::token_bucket(5, 5, SECOND).unwrap(), ["HSET", "f", "v"]),
        (Quota::sliding_log(5, SECOND).unwrap(), ["SET", "v", "NX"]),
        (Quota::gcra(5, 5, SECOND).unwrap(), ["LPUSH", "v", "w"]),
        (Quota::fixed_window(5, SECOND).unwrap(), ["SADD", "v", "w"]),
    ];
    for (quota, [verb, first, second]) in cases {
        let ratelimit = fail_open(&stack, quota);
        let key = ratelimit.limiters()[0].state_key("victim");
        let write = Command::new(verb).arg(&key).args([first, second]);
        stack.client().command(&write).await.unwrap();
        for _ in 0..3 {
            let error = ratelimit.limit("victim", 1).await.unwrap_err();
            assert_eq!(error.code(), "EDGELIMIT_FOREIGN_STATE", "{}: {error}", quota.algorithm());
            assert!(!error.is_store_unavailable());
            let text = error.to_string();
            assert!(text.contains("WRONGTYPE") && !text.contains("user_script"), "{text}");
        }
        // The key was left as it was: nothing of the limit was written over it.
        let kind = stack.client().command(&Command::new("TYPE").arg(&key)).await.unwrap();
        assert_ne!(kind.into_string().unwrap(), "none");
    }
}

#[tokio::test]
async fn a_scripts_refusal_is_an_argument_error_without_lua_locations() {
    let stack = Stack::start().await;
    let script = Algorithm::Gcra.script();
    // Permits 0, as no edgelimit client sends them.
    let error = script.run(&stack.client(), &["k"], &["0:5:1000:5"]).await.unwrap_err();
    assert_eq!(error.code(), "EDGELIMIT_INVALID_ARGUMENT");
    assert_eq!(
        error.to_string(),
        "invalid argument: the script refused the call: invalid request (<permits>:<limit>:<interval ms>[:<rate>], \
         whole numbers from 1, permits, limit and rate below 2^32, limit × interval at most 2^52): 0:5:1000:5"
    );
    assert!(!error.to_string().contains(script.sha1()));
}

#[tokio::test]
async fn a_request_too_large_for_the_endpoint_is_reported_not_absorbed() {
    let stack = Stack::start_with(|config| config.max_request_bytes = 64 * 1024).await;
    let big = Command::new("SET").args(["k".to_owned(), "x".repeat(100 * 1024)]);
    let error = stack.client().command(&big).await.unwrap_err();
    assert_eq!(error.code(), "EDGELIMIT_TOO_LARGE", "{error}");
    assert!(!error.is_store_unavailable());
    assert!(error.to_string().contains("too large"), "{error}");
}

#[tokio::test]
async fn a_read_only_replica_is_absorbed_with_its_own_code() {
    let stack = Stack::start().await;
    let master = RedisServer::start().await.unwrap();
    let client = stack.client();
    let quota = Quota::sliding_window(1, SECOND).unwrap();
    let open = fail_open(&stack, quota);
    let closed = Ratelimit::new(
        stack.client(),
        &[Limit::new(quota)],
        Options { on_error: OnError::Deny, cache_entries: 0, ..Options::default() },
    )
    .unwrap();
    let replicaof = Command::new("REPLICAOF").args(["127.0.0.1".to_owned(), master.port().to_string()]);
    client.command(&replicaof).await.unwrap();
    for _ in 0..2 {
        let allowed = open.limit("ip", 1).await.unwrap();
        assert!(allowed.decision.success);
        assert_eq!(allowed.reason, Reason::Error);
        assert_eq!(allowed.error.as_ref().map(Error::code), Some("EDGELIMIT_READONLY"));
        let denied = closed.limit("ip", 1).await.unwrap();
        assert!(!denied.decision.success);
        assert_eq!(denied.error.as_ref().map(Error::code), Some("EDGELIMIT_READONLY"));
    }
    client.command(&Command::new("REPLICAOF").args(["NO", "ONE"])).await.unwrap();
    let decided = open.limit("ip", 1).await.unwrap();
    assert_eq!((decided.decision.success, decided.reason), (true, Reason::Decided));
}

#[tokio::test]
async fn a_stopped_redis_is_absorbed_by_the_policy() {
    let mut stack = Stack::start().await;
    let open = fail_open(&stack, Quota::gcra(1, 1, SECOND).unwrap());
    stack.stop_redis().await;
    let outcome = open.limit("ip", 1).await.unwrap();
    assert!(outcome.decision.success);
    assert_eq!(outcome.reason, Reason::Error);
    assert!(outcome.error.unwrap().is_store_unavailable());
}
