//! A rolling upgrade: clients of the previous release and of this one share one Redis and one limit's state. The
//! previous release's single-limit scripts are kept as they were in `tests/fixtures/scripts-before-lean/` (they
//! took the operation, the time, the permits, the quota and the lease as seven arguments and replied with six
//! fields); this release's take one packed argument and reply more cheaply, but the state they keep is the same, in
//! the same keys. So each counts the other's grants: interleaved on one identifier, they grant exactly the limit,
//! never a permit more (and never fewer: neither overlooks the other's grants).

use std::time::Duration;

use edgelimit::limit::{Algorithm, Limiter, Quota};
use edgelimit::rest::Script;
use edgelimit::RestClient;
use edgelimit_tests::Stack;

const T0: u64 = 1_700_000_000_000;
const LIMIT: u32 = 5;

/// The previous release's script for `algorithm`, as it shipped.
fn previous_script(algorithm: Algorithm) -> Script {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/scripts-before-lean")
        .join(format!("{}.lua", algorithm.script_name()));
    Script::new(std::fs::read_to_string(path).unwrap())
}

/// A decision of the previous release's script on `key` at `at`: whether it granted.
async fn previous_limit(client: &RestClient, script: &Script, quota: Quota, key: &str, at: u64, permits: u32) -> bool {
    let lease = if quota.algorithm().names_grants() { format!("previous-{at}") } else { String::new() };
    let args = [
        "limit".to_owned(),
        at.to_string(),
        permits.to_string(),
        quota.limit().to_string(),
        quota.interval_ms().to_string(),
        quota.rate().to_string(),
        lease,
    ];
    let reply = script.run(client, &[key], &args).await.unwrap();
    let [status, ..] = reply.into_tuple::<6>().unwrap();
    match status.into_string().unwrap().as_str() {
        "granted" => true,
        "denied" => false,
        other => panic!("{}: the previous script answered {other}", quota.algorithm()),
    }
}

#[tokio::test]
async fn previous_and_current_clients_on_one_state_grant_the_limit_and_never_more() {
    let stack = Stack::start().await;
    let client = stack.client();
    for algorithm in Algorithm::ALL {
        // 5 per hour (a token bucket refilling 5 per hour): the few ms the calls span refill nothing.
        let quota = Quota::new(algorithm, LIMIT, Duration::from_secs(3600), LIMIT).unwrap();
        let limiter = Limiter::new(client.clone(), &format!("upgrade-{algorithm}"), quota).unwrap();
        let key = limiter.state_key("id");
        let previous = previous_script(algorithm);
        let mut granted = 0;
        for step in 0..14u64 {
            let at = T0 + step;
            let permits = if step % 3 == 2 { 2 } else { 1 };
            let ok = if step % 2 == 0 {
                previous_limit(&client, &previous, quota, &key, at, permits).await
            } else {
                let decision = limiter.clone().at(at).limit("id", permits).await.unwrap();
                // The current client sees every grant so far, the previous client's too.
                let counted = granted + if decision.success { permits } else { 0 };
                assert_eq!(decision.remaining, u64::from(LIMIT - counted), "{algorithm} at step {step}");
                decision.success
            };
            granted += if ok { permits } else { 0 };
            assert!(granted <= LIMIT, "{algorithm}: {granted} permits granted of {LIMIT}");
        }
        assert_eq!(granted, LIMIT, "{algorithm}: each client counts the other's grants");
        // And two hours on (the bucket full again, the windows fresh, the logs' grants freed), both again.
        let later = T0 + 2 * 3_600_000 + 1;
        assert!(previous_limit(&client, &previous, quota, &key, later, 1).await, "{algorithm}");
        let decision = limiter.clone().at(later + 1).limit("id", 1).await.unwrap();
        assert!(decision.success, "{algorithm}");
        assert_eq!(decision.remaining, u64::from(LIMIT - 2), "{algorithm}: the previous client's grant counted");
    }
}
