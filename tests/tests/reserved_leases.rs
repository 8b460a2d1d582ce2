//! Reserved concurrency permits (`lua/reserve/concurrency.lua`, `src/limit/reserved.rs`) against real Redis through
//! the real bridge: the script's rule to the ms at explicit times (only the permits free now are reserved; a return
//! keeps the leases still out), a client lending leases from its block and taking them back, and concurrent clients
//! checked against the ground truth: the leases really held at once, counted as the tasks hold them.

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use edgelimit::limit::{Limiter, Quota, Reserved};
use edgelimit::lua::RESERVE_CONCURRENCY;
use edgelimit_tests::{grants_until_denied, script_numbers, Stack};

const T0: u64 = 1_700_000_000_000;

/// A concurrency limiter "c" of 10 leases of 1 s, as `reserve_leases` calls it.
fn ten_leases(stack: &Stack) -> Limiter {
    Limiter::new(stack.client(), "c", Quota::concurrency(10, Duration::from_secs(1)).unwrap()).unwrap()
}

/// The concurrency reserve script on `key` at T0 + `offset`: a lease of 1 permit of 10 (1 s each), `block` more lent
/// within 200 ms, logged under `id`, with `returns`; the reply's numbers.
async fn reserve_leases(stack: &Stack, key: &str, offset: u64, block: u32, id: &str, returns: &[String]) -> Vec<i64> {
    let mut arguments =
        vec!["1:10:1000".to_owned(), format!("{block}:50:200"), id.to_owned(), (T0 + offset).to_string()];
    arguments.extend_from_slice(returns);
    script_numbers(stack, &RESERVE_CONCURRENCY, key, &arguments).await
}

/// Plain leases granted at T0 + `offset` until one is denied.
async fn plain_leases_at(leases: &Limiter, offset: u64) -> u32 {
    grants_until_denied(leases, "id", T0 + offset).await
}

#[tokio::test]
async fn a_concurrency_block_holds_only_the_permits_free_now_until_an_interval_after_its_span() {
    let stack = Stack::start().await;
    let t = T0 as i64;
    let leases = ten_leases(&stack);
    let key = leases.state_key("id");
    // The request's lease expires at T0 + 1000; the 5 reserved are lent within 200 ms, each for 1 s at most: held
    // until T0 + 1200.
    assert_eq!(reserve_leases(&stack, &key, 0, 5, "a", &[]).await, [1, t, 5, 0, 4, t + 1200, 0]);
    // 9 asked, 3 free: the 3 (a sliding log would book the others ahead, as the grants before them free).
    assert_eq!(reserve_leases(&stack, &key, 10, 9, "b", &[]).await, [1, t + 10, 3, 0, 0, t + 1210, 0]);
    // Full at T0 + 900: denied until the first lease expires (T0 + 1000), and nothing reserved, although that lease
    // frees within the block's 200 ms (a sliding log would take it from then).
    assert_eq!(reserve_leases(&stack, &key, 900, 5, "c", &[]).await, [0, t + 900, 0, 0, 0, t + 1210, 100]);
    // The state is lua/concurrency.lua's: at T0 + 1000 the first lease has expired, at T0 + 1010 the second; the
    // blocks hold theirs until T0 + 1200 and T0 + 1210.
    assert_eq!(plain_leases_at(&leases, 1000).await, 1);
    assert_eq!(plain_leases_at(&leases, 1010).await, 1);
    assert_eq!(plain_leases_at(&leases, 1200).await, 5);
    assert_eq!(plain_leases_at(&leases, 1210).await, 3);
}

#[tokio::test]
async fn no_refund_can_name_a_block_not_even_one_worked_out_from_the_request_s_receipt() {
    let stack = Stack::start().await;
    let t = T0 as i64;
    let leases = ten_leases(&stack);
    let key = leases.state_key("id");
    // The request's lease has the receipt 1:<T0 + 1000>-a; the block of 3 frees at T0 + 1200 under the same id.
    assert_eq!(reserve_leases(&stack, &key, 0, 3, "a", &[]).await, [1, t, 3, 0, 6, t + 1200, 0]);
    // A caller holding that receipt can work out the block's name; released as a lease, it must free nothing (the
    // client still lends those 3): the block is logged under a name no receipt can give.
    let forged: edgelimit::Receipt = format!("3:{}-a", T0 + 1200).parse().unwrap();
    assert!(!leases.clone().at(T0 + 10).release("id", &forged).await.unwrap());
    assert_eq!(plain_leases_at(&leases, 10).await, 6);
    // The request's own lease is released as ever.
    let own: edgelimit::Receipt = format!("1:{}-a", T0 + 1000).parse().unwrap();
    assert!(leases.clone().at(T0 + 20).release("id", &own).await.unwrap());
}

#[tokio::test]
async fn a_returned_concurrency_block_frees_at_once_what_is_not_lent_and_keeps_the_leases_still_out() {
    let stack = Stack::start().await;
    let t = T0 as i64;
    let leases = ten_leases(&stack);
    let key = leases.state_key("id");
    // The request and 9 reserved: full.
    assert_eq!(reserve_leases(&stack, &key, 0, 9, "a", &[]).await, [1, t, 9, 0, 0, t + 1200, 0]);
    // At T0 + 100 the client returns the block with 2 leases still out, lent by T0 + 30: the 7 others (never lent, or
    // lent and given back) free now, the 2 at T0 + 1030. The request fits, with 6 left.
    let returned = format!("{}-a:9:2:{}", T0 + 1200, T0 + 30);
    assert_eq!(
        reserve_leases(&stack, &key, 100, 0, "b", std::slice::from_ref(&returned)).await,
        [1, t + 100, 0, 0, 6, t + 1100, 0]
    );
    // Again: no block is found, nothing changes.
    assert_eq!(reserve_leases(&stack, &key, 110, 0, "c", &[returned]).await, [1, t + 110, 0, 0, 5, t + 1110, 0]);
    // At T0 + 1000 the first lease has expired: held are the 2 still out and b's and c's leases; at T0 + 1030 the 2
    // expire.
    assert_eq!(plain_leases_at(&leases, 1000).await, 6);
    assert_eq!(plain_leases_at(&leases, 1030).await, 2);
}

#[tokio::test]
async fn a_client_lends_its_reserved_leases_and_lends_each_again_once_it_is_released() {
    let stack = Stack::start().await;
    let limiter = Limiter::new(stack.client(), "c", Quota::concurrency(3, Duration::from_secs(10)).unwrap()).unwrap();
    let reserved = Reserved::new(limiter.clone(), Duration::from_secs(2)).unwrap();
    // The first lease is Redis's, with its usual receipt; the client held one at a time, so it reserves nothing.
    let first = reserved.limit("id", 1).await.unwrap();
    assert!(first.decision.success && !first.local);
    let first_lease = first.decision.receipt.unwrap();
    assert!(!first_lease.mark().starts_with("local-"), "{first_lease}");
    // The second (the first still held) is Redis's too, and reserves 1: the client held 2 at once.
    let second = reserved.limit("id", 1).await.unwrap();
    assert!(second.decision.success && !second.local);
    // The third is lent from the block, with a local receipt.
    let third = reserved.limit("id", 1).await.unwrap();
    assert!(third.decision.success && third.local);
    let lent_lease = third.decision.receipt.unwrap();
    assert!(lent_lease.mark().starts_with("local-"), "{lent_lease}");
    // Full (2 leases and the block's 1): denied by Redis, and the denial is not remembered (leases come back before
    // its wait).
    let denied = reserved.limit("id", 1).await.unwrap();
    assert!(!denied.decision.success && !denied.local);
    assert!(!limiter.peek("id", 1).await.unwrap().success);
    // The lent lease released: back in the block (no round trip), and lent again from it.
    assert!(reserved.release("id", &lent_lease).await.unwrap());
    assert!(!reserved.release("id", &lent_lease).await.unwrap());
    let again = reserved.limit("id", 1).await.unwrap();
    assert!(again.decision.success && again.local);
    // Redis's lease released in Redis: a plain client sees the permit free.
    assert!(reserved.release("id", &first_lease).await.unwrap());
    assert!(limiter.peek("id", 1).await.unwrap().success);
    // A local receipt another client lent is not this client's: nothing is released, nothing is sent.
    assert!(!reserved.fresh().release("id", &again.decision.receipt.unwrap()).await.unwrap());
    // And one sent to Redis by hand is refused there, never taken for a lease.
    let error = limiter.release("id", &again.decision.receipt.unwrap()).await.unwrap_err();
    assert!(error.to_string().contains("invalid receipt"), "{error}");
}

/// Tasks of several clients taking leases, holding each 1 to 19 ms and releasing it, for `run_for`: the most leases
/// held at once, as the tasks count them (a lease counts from when its grant came back to when its release is sent,
/// within the time Redis counts it), the leases taken, and how many of those were lent from reserved permits.
async fn hold_and_release(clients: &[Reserved], tasks_per_client: usize, run_for: Duration) -> (u32, usize, usize) {
    let holding = Arc::new(AtomicU32::new(0));
    let most = Arc::new(AtomicU32::new(0));
    let (taken, lent) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let deadline = tokio::time::Instant::now() + run_for;
    let mut tasks = Vec::new();
    for (index, client) in clients.iter().enumerate() {
        for task in 0..tasks_per_client {
            let (client, holding, most) = (client.clone(), holding.clone(), most.clone());
            let (taken, lent) = (taken.clone(), lent.clone());
            tasks.push(tokio::spawn(async move {
                let mut round = index + task;
                while tokio::time::Instant::now() < deadline {
                    round += 1;
                    let outcome = client.limit("hot", 1).await.unwrap();
                    if !outcome.decision.success {
                        tokio::time::sleep(Duration::from_millis(1)).await;
                        continue;
                    }
                    let now_held = holding.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now_held, Ordering::SeqCst);
                    taken.fetch_add(1, Ordering::SeqCst);
                    if outcome.local {
                        lent.fetch_add(1, Ordering::SeqCst);
                    }
                    tokio::time::sleep(Duration::from_millis(1 + (round % 7) as u64 * 3)).await;
                    holding.fetch_sub(1, Ordering::SeqCst);
                    client.release("hot", &outcome.decision.receipt.unwrap()).await.unwrap();
                }
            }));
        }
    }
    for task in tasks {
        task.await.unwrap();
    }
    (most.load(Ordering::SeqCst), taken.load(Ordering::SeqCst), lent.load(Ordering::SeqCst))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_clients_lending_reserved_leases_never_hold_more_than_the_limit_at_once() {
    let stack = Stack::start().await;
    let limiter = Limiter::new(stack.client(), "c", Quota::concurrency(5, Duration::from_secs(10)).unwrap()).unwrap();
    let first = Reserved::new(limiter, Duration::from_millis(300)).unwrap();
    let clients: Vec<Reserved> = (0..4).map(|_| first.fresh()).collect();
    // 4 clients × 3 tasks want up to 12 leases at once, of a limit of 5.
    let (most, taken, lent) = hold_and_release(&clients, 3, Duration::from_secs(2)).await;
    assert!(most <= 5, "{most} leases held at once, of a limit of 5");
    assert!(taken > 0 && lent > 0, "{taken} leases taken, {lent} of them lent from reserved permits");
}
