//! Key layouts against real Redis through the real bridge: the per-identifier layout (for Redis Cluster) decides
//! exactly as the default per-limiter one, keeps one identifier's limits in one slot, and shares one Redis with the
//! default layout without either reading the other's keys.

use std::time::Duration;

use edgelimit::limit::{self, hash_slot, Algorithm, KeyLayout, Limiter, Quota};
use edgelimit::ratelimit::{Limit, Options, Ratelimit};
use edgelimit::{Command, Identifier};
use edgelimit_tests::{Stack, LIMITER_TOKEN};
use proptest::prelude::*;

const T0: u64 = 1_700_000_000_000;

fn quotas() -> Vec<Quota> {
    let second = Duration::from_secs(1);
    vec![
        Quota::token_bucket(5, 3, second).unwrap(),
        Quota::fixed_window(5, second).unwrap(),
        Quota::sliding_window(5, second).unwrap(),
        Quota::gcra(5, 5, second).unwrap(),
        Quota::sliding_log(5, second).unwrap(),
        Quota::concurrency(5, second).unwrap(),
    ]
}

#[tokio::test]
async fn the_per_identifier_layout_decides_every_algorithm_exactly_as_the_default_one() {
    let stack = Stack::start().await;
    for quota in quotas() {
        let name = quota.algorithm().script_name();
        let default = Limiter::new(stack.client(), name, quota).unwrap();
        let spread = default.clone().with_layout(KeyLayout::PerIdentifier).unwrap();
        // The same schedule on each layout, at explicit times: weighted grants, denials, refills.
        for (step, (at, permits)) in
            [(0, 2), (0, 3), (0, 1), (400, 2), (999, 1), (1000, 4), (1700, 5)].into_iter().enumerate()
        {
            let on = |limiter: &Limiter| limiter.clone().at(T0 + at);
            let mut a = on(&default).limit("user-1", permits).await.unwrap();
            let mut b = on(&spread).limit("user-1", permits).await.unwrap();
            // Receipts name the grant (a random id for logged grants): compare whether there is one.
            assert_eq!(a.receipt.is_some(), b.receipt.is_some());
            (a.receipt, b.receipt) = (None, None);
            assert_eq!(a, b, "{name}, step {step}");
        }
        // Each wrote its own key, and only it.
        let exists = |key: String| Command::new("EXISTS").arg(key);
        let client = stack.client();
        let default_key = default.state_key("user-1");
        let spread_key = spread.state_key("user-1");
        assert_eq!(spread_key, format!("edgelimit:v2{{user-1}}:{name}"));
        assert_eq!(client.command(&exists(default_key)).await.unwrap().into_int().unwrap(), 1);
        assert_eq!(client.command(&exists(spread_key)).await.unwrap().into_int().unwrap(), 1);
    }
}

#[tokio::test]
async fn the_two_layouts_on_one_redis_count_apart_and_never_misread_each_other() {
    let stack = Stack::start().await;
    let quota = Quota::fixed_window(3, Duration::from_secs(60)).unwrap();
    let default = Limiter::new(stack.client(), "api", quota).unwrap().at(T0);
    let spread = default.clone().with_layout(KeyLayout::PerIdentifier).unwrap();
    // A default-layout limiter named like the identifier, counting an identifier named like the limiter: the
    // closest a key of one layout comes to a key of the other.
    let mirrored = Limiter::new(stack.client(), "user-1", quota).unwrap().at(T0);
    for _ in 0..3 {
        assert!(default.limit("user-1", 1).await.unwrap().success);
    }
    assert!(!default.limit("user-1", 1).await.unwrap().success);
    for _ in 0..3 {
        assert!(spread.limit("user-1", 1).await.unwrap().success);
        assert!(mirrored.limit("api", 1).await.unwrap().success);
    }
    assert!(!spread.limit("user-1", 1).await.unwrap().success);
    assert!(!mirrored.limit("api", 1).await.unwrap().success);
    let keys = stack.client().command(&Command::new("KEYS").arg("*")).await.unwrap().into_array().unwrap();
    assert_eq!(keys.len(), 3, "{keys:?}");
}

#[tokio::test]
async fn all_limits_of_one_identifier_are_one_script_in_one_slot() {
    let stack = Stack::start().await;
    let second = Duration::from_secs(1);
    let limits = [
        Limit::new(Quota::sliding_log(2, second).unwrap()),
        Limit::new(Quota::fixed_window(100, Duration::from_secs(3600)).unwrap()),
    ];
    let options = Options { layout: KeyLayout::PerIdentifier, ..Options::default() };
    let ratelimit = Ratelimit::new(stack.client(), &limits, options).unwrap();
    for id in ["203.0.113.7", "a}b{", "", &"x".repeat(1000)] {
        let slots: Vec<u16> = (ratelimit.limiters().iter()).map(|limiter| hash_slot(limiter.state_key(id))).collect();
        assert!(slots.windows(2).all(|pair| pair[0] == pair[1]), "{id:?}: {slots:?}");
        let decided = [
            ratelimit.limit(id, 1).await.unwrap(),
            ratelimit.limit(id, 1).await.unwrap(),
            ratelimit.limit(id, 1).await.unwrap(),
        ];
        let granted: Vec<bool> = decided.iter().map(|outcome| outcome.decision.success).collect();
        assert_eq!(granted, [true, true, false], "{id:?}");
        // The denial by the log consumed nothing from the window: 2 of its 100 are taken.
        let windows = &decided[2].limits;
        assert_eq!((windows[0].success, windows[1].remaining), (false, 98), "{id:?}");
    }
    // The state keys are the per-identifier ones (the braced identifier hashed).
    let keys = stack.client().command(&Command::new("KEYS").arg("*")).await.unwrap().into_array().unwrap();
    assert_eq!(keys.len(), 8);
    for key in keys {
        let key = key.into_string().unwrap();
        assert!(key.starts_with("edgelimit:v2{") && !key["edgelimit:v2{".len()..].starts_with('}'), "{key}");
    }
}

/// A Worker decides with a `limiter` token. In the per-identifier layout a stored quota's config is read beside each
/// decision (`HMGET`), which the bridge's fence refused (NOPERM: a limiter token ran scripts, PING and TIME only),
/// so stored quotas worked with that token in the default layout only (review). A key outside `--limiter-keys` stays
/// out of its reach.
#[tokio::test]
async fn a_stored_quota_in_the_per_identifier_layout_is_read_with_a_limiter_token() {
    let stack = Stack::start().await;
    let minute = Duration::from_secs(60);
    (Limiter::stored(stack.client(), "worker").unwrap())
        .store_quota(Quota::fixed_window(2, minute).unwrap())
        .await
        .unwrap();
    let limiter_client = stack.client_with(LIMITER_TOKEN);
    let worker =
        (Limiter::stored(limiter_client.clone(), "worker").unwrap()).with_layout(KeyLayout::PerIdentifier).unwrap();
    let mut taken = Vec::new();
    for _ in 0..3 {
        taken.push(worker.limit("u", 1).await.unwrap().success);
    }
    assert_eq!(taken, [true, true, false]);
    let outside = Command::new("HMGET").args(["user:1", "rate"]);
    let refused = limiter_client.command(&outside).await.unwrap_err();
    assert_eq!(refused.code(), "EDGELIMIT_AUTH", "{refused}");
    assert!(refused.to_string().contains("--limiter-keys"), "{refused}");
    // Nor any other field of a hash under its patterns (another program's secret there).
    let secret = Command::new("HMGET").args(["edgelimit:secret", "apikey"]);
    let refused = limiter_client.command(&secret).await.unwrap_err();
    assert!(refused.to_string().contains("fields of a stored quota's config"), "{refused}");
}

#[tokio::test]
async fn a_stored_quota_in_the_per_identifier_layout_is_copied_and_a_change_reaches_the_client_one_decision_late() {
    let stack = Stack::start().await;
    let admin = Limiter::stored(stack.client(), "ops").unwrap();
    let spread = admin.clone().with_layout(KeyLayout::PerIdentifier).unwrap().at(T0);
    // No config yet: not initialized, nothing decided.
    assert_eq!(spread.limit("u", 1).await.unwrap_err().code(), "EDGELIMIT_NOT_INITIALIZED");
    let minute = Duration::from_secs(60);
    admin.store_quota(Quota::fixed_window(3, minute).unwrap()).await.unwrap();
    let granted = |decisions: &[bool]| decisions.iter().filter(|&&granted| granted).count();
    let mut taken = Vec::new();
    for _ in 0..4 {
        taken.push(spread.limit("u", 1).await.unwrap().success);
    }
    assert_eq!(taken, [true, true, true, false]);
    assert_eq!(spread.state_key("u"), "edgelimit:v2{u}:ops", "the state is in the identifier's slot");
    // Raised to 5: the next decision still used the copy of 3 (and saw the change), the one after uses 5.
    admin.store_quota(Quota::fixed_window(5, minute).unwrap()).await.unwrap();
    let late = spread.limit("u", 1).await.unwrap();
    assert_eq!((late.success, late.limit), (false, 3));
    let now = [spread.limit("u", 1).await.unwrap(), spread.limit("u", 1).await.unwrap()];
    assert_eq!(granted(&now.iter().map(|d| d.success).collect::<Vec<_>>()), 2);
    assert_eq!(now[1].limit, 5);
    // Deleted: one decision late as well, then not initialized.
    assert!(admin.delete_stored_quota().await.unwrap());
    assert!(!spread.limit("u", 1).await.unwrap().success);
    assert_eq!(spread.limit("u", 1).await.unwrap_err().code(), "EDGELIMIT_NOT_INITIALIZED");
    // Several limits of one identifier, one of them stored: still one script (the copy is a quota in code).
    admin.store_quota(Quota::sliding_log(1, minute).unwrap()).await.unwrap();
    let inline = Limiter::new(stack.client(), "inline", Quota::fixed_window(10, minute).unwrap())
        .unwrap()
        .with_layout(KeyLayout::PerIdentifier)
        .unwrap()
        .at(T0);
    let both = [spread.request("w", 1), inline.request("w", 1)];
    assert!(limit::limit_all(&both).await.unwrap().success);
    let second = limit::limit_all(&both).await.unwrap();
    assert!(!second.success);
    assert_eq!(inline.peek("w", 1).await.unwrap().remaining, 9, "the denial consumed nothing");
}

#[tokio::test]
async fn several_identifiers_across_slots_are_decided_with_exact_give_back() {
    let stack = Stack::start().await;
    let quota = Quota::sliding_log(1, Duration::from_secs(60)).unwrap();
    let limiter = Limiter::new(stack.client(), "pair", quota).unwrap().with_layout(KeyLayout::PerIdentifier).unwrap();
    let (a, b) = (Identifier::from("alice"), Identifier::from("bob"));
    assert_ne!(hash_slot(limiter.state_key(&a)), hash_slot(limiter.state_key(&b)));
    // Bob's permit is taken: a request counting both is denied, and Alice's grant is given back.
    assert!(limiter.limit(&b, 1).await.unwrap().success);
    let both = limit::limit_all_across_slots(&[limiter.request(&a, 1), limiter.request(&b, 1)]).await.unwrap();
    assert!(!both.success);
    assert_eq!(limiter.peek(&a, 1).await.unwrap().remaining, 1);
    assert_eq!(limiter.quota().unwrap().algorithm(), Algorithm::SlidingLog);
}

/// Text with the characters that matter to keys: separators, braces, the hash mark, and anything else.
fn part() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![Just(':'), Just('{'), Just('}'), Just('#'), Just('v'), Just('2'), any::<char>()],
        0..8,
    )
    .prop_map(|chars| chars.into_iter().collect())
}

proptest! {
    /// No key of one layout is ever a key of the other, whatever the prefixes, names and identifiers (names and
    /// prefixes as limiters accept them: brace-free, non-empty).
    #[test]
    fn no_key_is_a_key_of_both_layouts(
        prefixes in (part(), part()), names in (part(), part()), ids in (part(), part()),
    ) {
        let client = edgelimit::RestClient::new("http://127.0.0.1:1", "t").unwrap();
        let quota = Quota::fixed_window(1, Duration::from_secs(1)).unwrap();
        let build = |prefix: &str, name: &str| {
            Limiter::new(client.clone(), name, quota).and_then(|limiter| limiter.with_prefix(prefix))
        };
        let (Ok(one), Ok(two)) = (build(&prefixes.0, &names.0), build(&prefixes.1, &names.1)) else {
            return Ok(());
        };
        let two = two.with_layout(KeyLayout::PerIdentifier).unwrap();
        prop_assert_ne!(one.state_key(ids.0.as_str()), two.state_key(ids.1.as_str()));
        prop_assert_ne!(one.config_key(), two.state_key(ids.1.as_str()));
    }
}
