//! Reading limits' state (`lua/limits/inspect.lua`, `edgelimit::limit::state`) against real Redis through the real
//! bridge: every algorithm's state after known decisions, several limits at one moment, what Redis itself holds,
//! and state in no known layout.

use std::time::Duration;

use edgelimit::limit::{state_all, Algorithm, HeldGrant, Limiter, Quota, StateDetail};
use edgelimit::ratelimit::{Limit, Options, Ratelimit};
use edgelimit::{Command, Error};
use edgelimit_tests::Stack;

const T0: u64 = 1_700_000_000_000;
const SECOND: Duration = Duration::from_secs(1);

fn limiter(stack: &Stack, name: &str, quota: Quota) -> Limiter {
    Limiter::new(stack.client(), name, quota).unwrap()
}

async fn take(limiter: &Limiter, at: u64, permits: u32) -> bool {
    limiter.clone().at(at).limit("id", permits).await.unwrap().success
}

#[tokio::test]
async fn every_algorithms_state_is_read_as_the_next_decision_would_see_it() {
    let stack = Stack::start().await;
    let fixed = limiter(&stack, "fw", Quota::fixed_window(10, SECOND).unwrap());
    let sliding = limiter(&stack, "sw", Quota::sliding_window(10, SECOND).unwrap());
    let bucket = limiter(&stack, "tb", Quota::token_bucket(10, 5, SECOND).unwrap());
    let gcra = limiter(&stack, "gcra", Quota::gcra(10, 5, SECOND).unwrap());
    for limiter in [&fixed, &sliding, &bucket, &gcra] {
        assert!(take(limiter, T0 + 100, 4).await);
    }
    assert!(take(&sliding, T0 + 1_200, 3).await);

    let at = T0 + 1_400;
    let explicit: Vec<Limiter> =
        [&fixed, &sliding, &bucket, &gcra].into_iter().map(|limiter| limiter.clone().at(at)).collect();
    let states = state_all(&explicit.iter().map(|limiter| (limiter, "id")).collect::<Vec<_>>()).await.unwrap();
    assert!(states.iter().all(|state| state.now == at));
    assert_eq!(
        states.iter().map(|state| state.key.as_str()).collect::<Vec<_>>(),
        ["edgelimit:{fw}:id", "edgelimit:{sw}:id", "edgelimit:{tb}:id", "edgelimit:{gcra}:id"]
    );
    // The fixed window counted 4 in [T0, T0 + 1 s); at T0 + 1.4 s a new window counts nothing.
    assert_eq!(states[0].stored.as_deref(), Some("fw:1700000000:4"));
    assert_eq!(states[0].detail, StateDetail::FixedWindow { window_start: T0 + 1_000, count: 0 });
    // The sliding window weighs the previous window's 4 by the 60% it still covers.
    let expected = StateDetail::SlidingWindow { window_start: T0 + 1_000, current: 3, previous: 4 };
    assert_eq!(states[1].detail, expected);
    assert_eq!(expected.weighted_count(&sliding.quota().unwrap(), at), Some(3.0 + 2.4));
    // 6 tokens left at T0 + 100 ms, 5 per second for 1.3 s: 12.5, capped at 10.
    assert_eq!(states[2].detail, StateDetail::TokenBucket { tokens: 10.0 });
    // GCRA: 4 permits at 200 ms each put TAT at T0 + 900 ms; at T0 + 1.4 s the burst is whole again.
    assert_eq!(states[3].detail, StateDetail::Gcra { tat: at as f64, tokens: 10.0 });

    let before = T0 + 500;
    let states = state_all(&[(&bucket.clone().at(before), "id"), (&gcra.clone().at(before), "id")]).await.unwrap();
    assert_eq!(states[0].detail, StateDetail::TokenBucket { tokens: 8.0 });
    assert_eq!(states[1].detail, StateDetail::Gcra { tat: (T0 + 900) as f64, tokens: 8.0 });
}

/// A receipt is all a refund needs, so the log must not hold one: a reader of the state (a read-only token, the
/// state view) could otherwise release others' leases. (Review: 3 forged releases, 6 leases held at once on a limit
/// of 3.)
#[tokio::test]
async fn the_state_holds_no_receipt_so_reading_it_releases_nothing() {
    let stack = Stack::start().await;
    let leases = limiter(&stack, "leases", Quota::concurrency(3, Duration::from_secs(60)).unwrap());
    let mut receipts = Vec::new();
    for _ in 0..3 {
        receipts.push(leases.limit("id", 1).await.unwrap().receipt.unwrap());
    }
    assert!(!leases.limit("id", 1).await.unwrap().success);
    let StateDetail::Log { grants, .. } = leases.state("id").await.unwrap().detail else { panic!("a log") };
    for grant in &grants {
        assert!(receipts.iter().all(|receipt| !receipt.mark().contains(&grant.id)), "{grant:?} is a receipt's id");
        let forged: edgelimit::limit::Receipt =
            format!("{}:{}-{}", grant.permits, grant.frees_at, grant.id).parse().unwrap();
        assert!(!leases.release("id", &forged).await.unwrap(), "{forged} released a lease");
    }
    assert!(!leases.limit("id", 1).await.unwrap().success, "all three leases still held");
    // The holders' own receipts still release them.
    for receipt in &receipts {
        assert!(leases.release("id", receipt).await.unwrap());
    }
    assert!(leases.limit("id", 3).await.unwrap().success);
}

#[tokio::test]
async fn a_sliding_log_lists_its_grants_with_when_they_free_on_the_servers_clock() {
    let stack = Stack::start().await;
    // A minute: the grants must still be held when they are read, however slow the machine.
    let log = limiter(&stack, "log", Quota::sliding_log(10, Duration::from_secs(60)).unwrap());
    for permits in [3, 1, 2] {
        assert!(log.limit("id", permits).await.unwrap().success);
    }
    let state = log.state("id").await.unwrap();
    let StateDetail::Log { held, grants } = &state.detail else { panic!("{state:?}") };
    assert_eq!(*held, 6);
    assert_eq!(grants.iter().map(|grant| grant.permits).collect::<Vec<_>>(), [3, 1, 2]);
    // Exactly what Redis holds: one member per grant, `<position>:<permits>:<run>:<id>`, scored with the ms it frees
    // at. Grants made in the same ms keep their order: the zero-padded position orders equal scores.
    let members = stack
        .client()
        .command(&Command::new("ZRANGE").arg(&state.key).args(["0", "-1", "WITHSCORES"]))
        .await
        .unwrap()
        .into_array()
        .unwrap();
    let mut expected = Vec::new();
    let mut next_position = 0;
    for pair in members.chunks(2) {
        let member = pair[0].clone().into_string().unwrap();
        let fields: Vec<&str> = member.splitn(4, ':').collect();
        let [position, permits, _, id] = fields[..] else { panic!("{member}") };
        assert_eq!((position.len(), position.parse::<u64>().unwrap()), (13, next_position), "{member}");
        let permits: u32 = permits.parse().unwrap();
        next_position += u64::from(permits);
        expected.push(HeldGrant {
            id: id.to_owned(),
            permits,
            frees_at: pair[1].clone().into_number("score").unwrap(),
        });
    }
    assert_eq!(grants, &expected);
    for grant in grants {
        assert!(grant.frees_at > state.now && grant.frees_at <= state.now + 60_000, "{grant:?} at {}", state.now);
    }
    // The key expires with the last grant (PTTL counts from Redis's command clock, which may be a ms off TIME's).
    let last = grants.iter().map(|grant| grant.frees_at).max().unwrap();
    assert!(state.expires_at.unwrap().abs_diff(last) <= 1, "{:?} vs {last}", state.expires_at);
    assert_eq!(state.stored, None);

    // At the moment the first grants free they are gone, though Redis drops them only at the next decision.
    let first = grants[0].frees_at;
    let later = log.clone().at(first).state("id").await.unwrap();
    let StateDetail::Log { held, grants: left } = later.detail else { unreachable!() };
    // Every grant made in the first grant's millisecond frees with it (two of the three may share it on a fast run).
    let freed: u64 = grants.iter().filter(|grant| grant.frees_at == first).map(|grant| u64::from(grant.permits)).sum();
    assert!(freed >= 3, "the first grant's 3 at least");
    assert_eq!(held, 6 - freed);
    assert!(left.iter().all(|grant| grant.frees_at > first));
}

#[tokio::test]
async fn a_weighted_log_holds_one_member_per_grant() {
    let stack = Stack::start().await;
    let log = limiter(&stack, "big", Quota::sliding_log(5_000, SECOND).unwrap()).at(T0);
    assert!(log.limit("id", 1_500).await.unwrap().success);
    assert!(log.limit("id", 10).await.unwrap().success);
    let state = log.state("id").await.unwrap();
    let StateDetail::Log { held, grants } = &state.detail else { unreachable!() };
    assert_eq!(*held, 1_510);
    assert_eq!(grants.iter().map(|grant| grant.permits).collect::<Vec<_>>(), [1_500, 10]);
    let members = Command::new("ZCARD").arg(&state.key);
    assert_eq!(stack.client().command(&members).await.unwrap().into_int().unwrap(), 2);
}

#[tokio::test]
async fn a_long_log_is_counted_whole_and_listed_in_part() {
    let stack = Stack::start().await;
    let listed = edgelimit::limit::state::LISTED_GRANTS;
    let log = limiter(&stack, "long", Quota::sliding_log(5_000, SECOND).unwrap()).at(T0);
    for _ in 0..listed + 1 {
        assert!(log.limit("id", 2).await.unwrap().success);
    }
    let StateDetail::Log { held, grants } = log.state("id").await.unwrap().detail else { unreachable!() };
    assert_eq!(held, 2 * u64::from(listed + 1));
    assert_eq!(grants.len(), listed as usize);
}

#[tokio::test]
async fn a_fresh_identifier_has_no_key_and_a_whole_limit() {
    let stack = Stack::start().await;
    let limits = [
        Limit::new(Quota::sliding_log(10, SECOND).unwrap()),
        Limit::new(Quota::token_bucket(10, 10, SECOND).unwrap()),
        Limit::new(Quota::new(Algorithm::Concurrency, 3, SECOND, 1).unwrap()),
    ];
    let ratelimit = Ratelimit::new(stack.client(), &limits, Options::default()).unwrap();
    let states = ratelimit.state("nobody").await.unwrap();
    assert_eq!(states.len(), 3);
    assert!(states.iter().all(|state| state.expires_at.is_none() && state.stored.is_none()));
    assert_eq!(states[0].detail, StateDetail::Log { held: 0, grants: vec![] });
    assert_eq!(states[1].detail, StateDetail::TokenBucket { tokens: 10.0 });
    assert_eq!(states[0].name, "sliding_log-1000ms");
}

#[tokio::test]
async fn state_in_no_known_layout_and_a_missing_stored_quota_are_clear_errors() {
    let stack = Stack::start().await;
    let bucket = limiter(&stack, "tb", Quota::token_bucket(10, 5, SECOND).unwrap());
    let set = Command::new("SET").arg(bucket.state_key("id")).arg("not-a-bucket");
    stack.client().command(&set).await.unwrap();
    let error = bucket.state("id").await.unwrap_err();
    assert!(matches!(error, Error::MalformedReply { .. }), "{error:?}");
    assert!(error.to_string().contains("<units>:<at>"), "{error}");
    assert!(error.to_string().contains("not-a-bucket"), "{error}");

    let stored = Limiter::stored(stack.client(), "unset").unwrap();
    let error = stored.state("id").await.unwrap_err();
    assert!(matches!(error, Error::NotInitialized { ref name } if name == "unset"), "{error:?}");
    stored.store_quota(Quota::fixed_window(3, SECOND).unwrap()).await.unwrap();
    let state = stored.state("id").await.unwrap();
    assert_eq!(state.quota, Quota::fixed_window(3, SECOND).unwrap());
    assert!(matches!(state.detail, StateDetail::FixedWindow { count: 0, .. }));
}

#[tokio::test]
async fn the_script_refuses_hand_made_calls_cleanly() {
    let stack = Stack::start().await;
    let script = &edgelimit::lua::INSPECT;
    let error = script.run(&stack.client(), &["k"], &["", "10", "zset"]).await.unwrap_err();
    assert!(error.to_string().contains("invalid kind of state (log or value): zset"), "{error}");
    let error = script.run(&stack.client(), &["k"], &["", "10"]).await.unwrap_err();
    assert!(error.to_string().contains("invalid number of arguments"), "{error}");
}
