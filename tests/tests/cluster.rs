//! edgelimit on a real Redis Cluster: 3 masters and 3 replicas started by the test on free loopback ports, and the
//! bridge in front of them (`redis+cluster://`), driven by the Rust client.
//!
//! The fault tests run decisions under load while the cluster moves slots (`redis-cli --cluster reshard`: the ASK
//! path), fails over by hand (`CLUSTER FAILOVER`), or loses a master (killed; its replica takes over). They count every
//! grant per limit against its limit: a reshard or a manual failover must never admit one request too many; a master
//! killed may forget grants that its replica had not received yet (Redis replicates asynchronously): that is
//! measured and printed, not asserted.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use edgelimit::limit::{hash_slot, Limiter, Quota};
use edgelimit::{Command, Error, Mode, Rate, RedissonLimiter, Value};
use edgelimit_cli::redis_cluster::{command, RedisCluster, Role};
use edgelimit_tests::{Stack, LIMITER_TOKEN};

#[tokio::test]
async fn the_harness_forms_a_six_node_cluster_that_serves_every_slot() {
    let cluster = RedisCluster::start(3, 1).await.expect("start a 6-node cluster");
    let roles = cluster.roles().await;
    let count = |role| roles.iter().filter(|(_, r)| *r == role).count();
    assert_eq!((count(Role::Master), count(Role::Replica)), (3, 3), "{roles:?}");
    let info = command(cluster.ports()[0], &["CLUSTER", "INFO"]).await.unwrap();
    let redis::Value::BulkString(info) = info else { panic!("CLUSTER INFO: {info:?}") };
    assert!(String::from_utf8_lossy(&info).contains("cluster_slots_ok:16384"));
    let shards = cluster.shards().await.unwrap();
    assert_eq!(shards.len(), 3, "{shards:?}");
    assert!(shards.iter().all(|(_, replicas)| replicas.len() == 1), "{shards:?}");
}

/// Now, in ms: decisions at one explicit time never refill, so every grant counts against the limit.
fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

/// One key for each of the 16384 slots.
fn a_key_per_slot() -> Vec<String> {
    let mut keys: Vec<Option<String>> = vec![None; 16384];
    let mut missing = keys.len();
    let mut i = 0u64;
    while missing > 0 {
        let key = format!("k{i}");
        let slot = &mut keys[usize::from(hash_slot(&key))];
        if slot.is_none() {
            *slot = Some(key);
            missing -= 1;
        }
        i += 1;
    }
    keys.into_iter().flatten().collect()
}

fn bytes(value: &Value) -> Vec<u8> {
    match value {
        Value::Bytes(bytes) => bytes.clone(),
        other => panic!("expected a string, got {other:?}"),
    }
}

#[tokio::test]
async fn plain_commands_on_every_slot_pipelines_and_transactions_route_through_one_bridge() {
    let stack = Stack::start_cluster().await;
    let client = stack.client();
    let keys = a_key_per_slot();
    // /pipeline: every slot, so every node, in one request; the replies in the request's order.
    for chunk in keys.chunks(2048) {
        let sets: Vec<Command> = chunk.iter().map(|key| Command::new("SET").arg(key).arg(format!("v-{key}"))).collect();
        for reply in client.pipeline(&sets).await.unwrap() {
            assert_eq!(reply.unwrap(), Value::Bytes(b"OK".to_vec()));
        }
        let gets: Vec<Command> = chunk.iter().map(|key| Command::new("GET").arg(key)).collect();
        let replies = client.pipeline(&gets).await.unwrap();
        for (key, reply) in chunk.iter().zip(replies) {
            assert_eq!(bytes(&reply.unwrap()), format!("v-{key}").into_bytes(), "{key}");
        }
    }
    // POST /: a sample over every slot range; no MOVED ever reaches the client.
    for key in keys.iter().step_by(97) {
        let value = client.command(&Command::new("GET").arg(key)).await.unwrap();
        assert_eq!(bytes(&value), format!("v-{key}").into_bytes());
    }
    // Key-less commands go to any master; counting ones sum over all masters.
    assert_eq!(client.command(&Command::new("PING")).await.unwrap(), Value::Bytes(b"PONG".to_vec()));
    assert_eq!(client.command(&Command::new("DBSIZE")).await.unwrap(), Value::Int(16384));
    // Mixed items, errors per item, in order.
    let mixed = client
        .pipeline(&[
            Command::new("INCR").arg("k0"),
            Command::new("SET").arg("{n}a").arg("1"),
            Command::new("MGET").arg("{n}a").arg("other"),
            Command::new("GET").arg("{n}a"),
            Command::new("PING"),
        ])
        .await
        .unwrap();
    assert!(mixed[0].is_err(), "{:?}", mixed[0]);
    assert_eq!(mixed[1].as_ref().unwrap(), &Value::Bytes(b"OK".to_vec()));
    let crossslot = format!("{:?}", mixed[2]);
    assert!(crossslot.contains("CROSSSLOT"), "{crossslot}");
    assert_eq!(mixed[3].as_ref().unwrap(), &Value::Bytes(b"1".to_vec()));
    assert_eq!(mixed[4].as_ref().unwrap(), &Value::Bytes(b"PONG".to_vec()));
    // /multi-exec: one slot runs; keys in several slots are refused before anything runs.
    let same_slot =
        client.multi_exec(&[Command::new("SET").arg("{t}a").arg("1"), Command::new("INCR").arg("{t}a")]).await.unwrap();
    assert_eq!(same_slot[1].as_ref().unwrap(), &Value::Int(2));
    let refused = client
        .multi_exec(&[Command::new("SET").arg("a").arg("1"), Command::new("SET").arg("b").arg("1")])
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("CROSSSLOT"), "{refused}");
    assert!(refused.to_string().contains("per-identifier layout"), "{refused}");
    assert_eq!(client.command(&Command::new("EXISTS").arg("a")).await.unwrap(), Value::Int(0));
}

#[tokio::test]
async fn limiters_scripts_and_acl_users_work_on_every_master() {
    let mut stack = Stack::start_cluster().await;
    let shards = stack.cluster().shards().await.unwrap();
    let masters: Vec<u16> = shards.iter().map(|(master, _)| *master).collect();
    assert_eq!(masters.len(), 3);
    run_limiters_scripts_and_acl(&stack, &masters).await;
}

async fn run_limiters_scripts_and_acl(stack: &Stack, masters: &[u16]) {
    let at = now_ms();
    // 40 limiter names: their hash tags spread over all three masters. Each admits exactly its limit.
    let names: Vec<String> = (0..40).map(|i| format!("cluster-{i}")).collect();
    let slots: HashSet<u16> = names.iter().map(|name| hash_slot(name) / 5462).collect();
    assert_eq!(slots.len(), 3, "the names reach every master");
    for (client, token) in [(stack.client(), "admin"), (stack.client_with(LIMITER_TOKEN), "limiter")] {
        for name in &names {
            let name = format!("{name}-{token}");
            let limiter =
                Limiter::new(client.clone(), &name, Quota::gcra(3, 3, Duration::from_secs(3600)).unwrap()).unwrap();
            // The limiter token decides at the server's time only; the quota refills one permit per 20 minutes.
            let limiter = if token == "admin" { limiter.at(at) } else { limiter };
            let mut granted = 0;
            for _ in 0..5 {
                if limiter.limit("user", 1).await.unwrap().success {
                    granted += 1;
                }
            }
            assert_eq!(granted, 3, "{name}");
        }
    }
    // The Redisson layout: its own keys ({edgelimit:name}:…), exact as well.
    for i in 0..12 {
        let limiter = RedissonLimiter::new(stack.client(), &format!("edgelimit:redisson-{i}")).unwrap();
        let rate = Rate::new(4, Duration::from_secs(3600)).unwrap();
        assert!(limiter.try_set_rate(rate, Mode::Overall).await.unwrap());
        let limiter = limiter.at(at);
        let mut granted = 0;
        for _ in 0..6 {
            if limiter.try_acquire(1).await.unwrap().success {
                granted += 1;
            }
        }
        assert_eq!(granted, 4, "redisson-{i}");
        assert_eq!(limiter.available_permits().await.unwrap(), 0);
    }
    // The limiter profile's ACL user exists on every master (Redis does not pass ACL SETUSER between nodes).
    for &port in masters {
        let user = command(port, &["ACL", "GETUSER", "edgelimit-limiter"]).await.unwrap();
        assert!(matches!(user, redis::Value::Array(_) | redis::Value::Map(_)), "{port}: {user:?}");
    }
    // SCRIPT LOAD reaches every master, and answers the SHA1.
    let client = stack.client();
    let loaded = client.command(&Command::new("SCRIPT").arg("LOAD").arg("return 'seven'")).await.unwrap();
    let sha = String::from_utf8(bytes(&loaded)).unwrap();
    for &port in masters {
        let exists = command(port, &["SCRIPT", "EXISTS", &sha]).await.unwrap();
        assert_eq!(exists, redis::Value::Array(vec![redis::Value::Int(1)]), "{port}");
    }
    // A master that lost its scripts (a replica promoted after SCRIPT LOAD): the bridge loads the body it knows and
    // sends the EVALSHA again; NOSCRIPT proves it did not run.
    for &port in masters {
        command(port, &["SCRIPT", "FLUSH"]).await.unwrap();
    }
    for key in a_key_per_slot().iter().step_by(1500) {
        let reply = client.command(&Command::new("EVALSHA").arg(&sha).arg(1).arg(key)).await.unwrap();
        assert_eq!(bytes(&reply), b"seven");
    }
    let unknown = client.command(&Command::new("EVALSHA").arg("0".repeat(40)).arg(1).arg("k")).await.unwrap_err();
    assert!(unknown.to_string().contains("NOSCRIPT"), "{unknown}");
    // A script with Upstash's shebang flags: loaded under the SHA1 of the text the client sent (the bridge strips
    // the flag stock Redis does not know), and found again by that SHA1 after the masters lost it.
    let flagged = "#!lua flags=allow-key-locking\nreturn 'flagged'";
    let loaded = client.command(&Command::new("SCRIPT").arg("LOAD").arg(flagged)).await.unwrap();
    let flagged_sha = String::from_utf8(bytes(&loaded)).unwrap();
    assert_eq!(flagged_sha, edgelimit::Script::new(flagged).sha1());
    for &port in masters {
        command(port, &["SCRIPT", "FLUSH"]).await.unwrap();
    }
    for key in a_key_per_slot().iter().step_by(2000) {
        let reply = client.command(&Command::new("EVALSHA").arg(&flagged_sha).arg(1).arg(key)).await.unwrap();
        assert_eq!(bytes(&reply), b"flagged");
    }
    // ... and edgelimit's own scripts, which the bridge always knows: decisions go on.
    for &port in masters {
        command(port, &["SCRIPT", "FLUSH"]).await.unwrap();
    }
    let limiter = Limiter::new(
        stack.client_with(LIMITER_TOKEN),
        "after-flush",
        Quota::gcra(2, 2, Duration::from_secs(3600)).unwrap(),
    )
    .unwrap();
    assert!(limiter.limit("user", 1).await.unwrap().success);
}

/// Decisions under load while `fault` runs: how many were granted per limit, what failed and when.
struct Load {
    /// Grants the client saw, per (limiter, identifier).
    granted: BTreeMap<(usize, usize), u64>,
    /// Errors: when (since the load started) and what.
    errors: Vec<(Duration, String)>,
    decisions: u64,
}

/// `limiters` × `ids` limits of `limit` permits each, refilling one permit an hour (none while the test runs),
/// decided with the `limiter` token as a Worker would (at the server's time, as the profile's ACL user, which the
/// bridge must create on every node it meets: a promoted replica too); 8 tasks decide round the pairs while `fault`
/// runs, and for half a second after it.
async fn under_load<F, Fut>(stack: &Stack, names: &[String], ids: usize, limit: u32, fault: F) -> (Load, Vec<Limiter>)
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let limiters: Vec<Limiter> = names
        .iter()
        .map(|name| {
            let quota = Quota::token_bucket(limit, 1, Duration::from_secs(3600)).unwrap();
            Limiter::new(stack.client_with(LIMITER_TOKEN), name, quota).unwrap()
        })
        .collect();
    let pairs: Vec<(usize, usize)> = (0..limiters.len()).flat_map(|l| (0..ids).map(move |i| (l, i))).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let load = Arc::new(Mutex::new(Load { granted: BTreeMap::new(), errors: Vec::new(), decisions: 0 }));
    let started = Instant::now();
    // The workers take the pairs in turn, round and round: every pair is decided as often as any other.
    let next = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..8)
        .map(|_| {
            let (limiters, pairs, stop, load) = (limiters.clone(), pairs.clone(), stop.clone(), load.clone());
            let next = next.clone();
            tokio::spawn(async move {
                while !stop.load(Ordering::Acquire) {
                    let (l, i) = pairs[next.fetch_add(1, Ordering::Relaxed) % pairs.len()];
                    let decision = limiters[l].limit(format!("id{i}").as_str(), 1).await;
                    let mut load = load.lock().unwrap();
                    load.decisions += 1;
                    match decision {
                        Ok(decision) if decision.success => *load.granted.entry((l, i)).or_default() += 1,
                        Ok(_) => {}
                        Err(e) => load.errors.push((started.elapsed(), short(&e))),
                    }
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    fault().await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Release);
    for worker in workers {
        worker.await.unwrap();
    }
    let load = Arc::try_unwrap(load).ok().unwrap().into_inner().unwrap();
    (load, limiters)
}

fn short(error: &Error) -> String {
    error.to_string().chars().take(160).collect()
}

/// Prints what the load saw, and returns the grants above each limit (0 when exact), summed.
async fn report(what: &str, load: &Load, limiters: &[Limiter], ids: usize, limit: u32) -> u64 {
    let mut over = 0;
    let mut consumed_total = 0;
    // Grants the client saw that Redis no longer holds (a master's writes its replica never got).
    let mut forgotten = 0;
    for (l, limiter) in limiters.iter().enumerate() {
        for i in 0..ids {
            let granted = load.granted.get(&(l, i)).copied().unwrap_or(0);
            over += granted.saturating_sub(u64::from(limit));
            let left = limiter.peek(format!("id{i}").as_str(), 1).await.unwrap().remaining;
            let consumed = u64::from(limit) - left.min(u64::from(limit));
            consumed_total += consumed;
            forgotten += granted.saturating_sub(consumed);
        }
    }
    let granted_total: u64 = load.granted.values().sum();
    let window = match (load.errors.first(), load.errors.last()) {
        (Some((first, _)), Some((last, _))) => {
            format!("from {} ms to {} ms after the load started", first.as_millis(), last.as_millis())
        }
        _ => "none".to_owned(),
    };
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    for (_, error) in &load.errors {
        *kinds.entry(error.chars().take(90).collect()).or_default() += 1;
    }
    println!(
        "{what}: {} decisions, {granted_total} granted (Redis holds {consumed_total} spent: {} ran though their \
         reply was lost) of {} permits; grants over a limit: {over}; grants Redis forgot: {forgotten}; {} errors \
         ({window}): {kinds:#?}",
        load.decisions,
        consumed_total.saturating_sub(granted_total),
        limiters.len() as u64 * ids as u64 * u64::from(limit),
        load.errors.len()
    );
    over
}

/// Limiter names whose keys hash to `slots` (a range a master serves).
fn names_in(slots: std::ops::Range<u16>, count: usize) -> Vec<String> {
    (0..).map(|i| format!("fault-{i}")).filter(|name| slots.contains(&hash_slot(name))).take(count).collect()
}

#[tokio::test]
async fn a_reshard_under_load_admits_no_request_too_many() {
    let mut stack = Stack::start_cluster().await;
    let shards = stack.cluster().shards().await.unwrap();
    let (from, to) = (shards[0].0, shards[1].0);
    // redis-cli moves the source's lowest slots first: the limits live in the first 200 of them, each slot with
    // 150 more keys, moved one per MIGRATE, so that a slot is migrating long enough for decisions to meet ASK (for
    // their keys already moved) and be sent with ASKING to the importing node.
    let first_slot = first_slot_of(from).await;
    let names = names_in(first_slot..first_slot + 200, 30);
    let fill: Vec<Command> = names
        .iter()
        .flat_map(|name| (0..150).map(move |i| Command::new("SET").arg(format!("{{{name}}}:fill:{i}")).arg(i)))
        .collect();
    for reply in stack.client().pipeline(&fill).await.unwrap() {
        reply.unwrap();
    }
    // Permits for about as long as the load runs: grants and denials both happen while the slots move.
    let (limit, ids) = (5, 10);
    let cluster = stack.take_cluster();
    let started = Instant::now();
    // Alongside the decisions: pipelines of INCR over every moving slot (split by node, each item resent on its own
    // after MOVED or ASK), and transactions of two INCRs in one slot (sent again whole after MOVED, or after a pause
    // while their slot migrates).
    let stop_side = Arc::new(AtomicBool::new(false));
    let side = tokio::spawn(incr_alongside(stack.client(), names.clone(), stop_side.clone()));
    let (load, limiters) = under_load(&stack, &names, ids, limit, || async {
        cluster.reshard(from, to, 200, 1).await.expect("reshard");
    })
    .await;
    stop_side.store(true, Ordering::Release);
    println!("reshard of 200 slots took {:?} in all", started.elapsed());
    let over = report("reshard", &load, &limiters, ids, limit).await;
    assert_eq!(over, 0, "a reshard must not admit a request too many");
    assert!(load.errors.is_empty(), "a reshard is invisible to clients: {:?}", load.errors);
    // The slots did move, and the bridge followed ASK redirections while they did (ASKING is sent only then).
    assert_eq!(first_slot_of(from).await, first_slot + 200);
    let asking = command_calls(to, "asking").await;
    println!("reshard: ASKING sent to the importing node {asking} times");
    assert!(asking > 0, "the decisions met ASK while the slots moved");
    // Each INCR of the pipelines and transactions ran exactly once: a command is sent again only when a reply
    // proved it did not run.
    let (counted, side_errors) = side.await.unwrap();
    println!("reshard: {} pipelines and transactions of INCR alongside, {side_errors:?} errors", counted.len());
    assert!(side_errors.is_empty(), "{side_errors:?}");
    let client = stack.client();
    for (key, count) in counted_per_key(&counted) {
        let value = client.command(&Command::new("GET").arg(&key)).await.unwrap();
        assert_eq!(bytes(&value), count.to_string().into_bytes(), "{key}");
    }
    drop(cluster);
}

/// INCRs through `/pipeline` (one key per name) and `/multi-exec` (two per transaction, on one name's key) until
/// `stop`: the keys each request incremented, and every error met.
async fn incr_alongside(
    client: edgelimit::RestClient,
    names: Vec<String>,
    stop: Arc<AtomicBool>,
) -> (Vec<Vec<String>>, Vec<String>) {
    let mut counted = Vec::new();
    let mut errors = Vec::new();
    let mut round = 0;
    while !stop.load(Ordering::Acquire) {
        let keys: Vec<String> = names.iter().map(|name| format!("{{{name}}}:count")).collect();
        let incrs: Vec<Command> = keys.iter().map(|key| Command::new("INCR").arg(key)).collect();
        match client.pipeline(&incrs).await {
            Ok(replies) => {
                let mut done = Vec::new();
                for (key, reply) in keys.iter().zip(replies) {
                    match reply {
                        Ok(_) => done.push(key.clone()),
                        Err(e) => errors.push(short(&e)),
                    }
                }
                counted.push(done);
            }
            Err(e) => errors.push(short(&e)),
        }
        let key = format!("{{{}}}:tx", names[round % names.len()]);
        round += 1;
        let tx = [Command::new("INCR").arg(&key), Command::new("INCR").arg(&key)];
        match client.multi_exec(&tx).await {
            Ok(replies) if replies.iter().all(Result::is_ok) => counted.push(vec![key.clone(), key]),
            Ok(replies) => errors.push(format!("{replies:?}")),
            Err(e) => errors.push(short(&e)),
        }
    }
    (counted, errors)
}

fn counted_per_key(counted: &[Vec<String>]) -> BTreeMap<String, u64> {
    let mut per_key = BTreeMap::new();
    for key in counted.iter().flatten() {
        *per_key.entry(key.clone()).or_default() += 1;
    }
    per_key
}

/// How often the node on `port` ran `command` (`INFO commandstats`).
async fn command_calls(port: u16, command_name: &str) -> u64 {
    let redis::Value::BulkString(stats) = command(port, &["INFO", "commandstats"]).await.unwrap() else {
        panic!("INFO commandstats")
    };
    let stats = String::from_utf8_lossy(&stats).into_owned();
    let prefix = format!("cmdstat_{command_name}:calls=");
    stats
        .lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .and_then(|rest| rest.split(',').next())
        .and_then(|calls| calls.parse().ok())
        .unwrap_or(0)
}

async fn first_slot_of(port: u16) -> u16 {
    slots_of(port).await.iter().map(|range| range.start).min().unwrap()
}

/// The slot ranges the master on `port` serves (`CLUSTER SLOTS`).
async fn slots_of(port: u16) -> Vec<std::ops::Range<u16>> {
    let redis::Value::Array(ranges) = command(port, &["CLUSTER", "SLOTS"]).await.unwrap() else {
        panic!("CLUSTER SLOTS")
    };
    let myid = command(port, &["CLUSTER", "MYID"]).await.unwrap();
    ranges
        .iter()
        .filter_map(|range| {
            let redis::Value::Array(fields) = range else {
                return None;
            };
            let (redis::Value::Int(start), redis::Value::Int(end), redis::Value::Array(master)) =
                (&fields[0], &fields[1], &fields[2])
            else {
                return None;
            };
            (master.get(2) == Some(&myid)).then_some(*start as u16..*end as u16 + 1)
        })
        .collect()
}

/// A limiter's decisions made at once go to Redis as one call of several keys. While their slot migrates and holds
/// only some of those keys, Redis refuses such a call (`TRYAGAIN`) for as long as the move lasts (in the per-limiter
/// layout, a limiter's whole slot): each decision then goes alone, which Redis serves at any point of the move, with
/// `ASK` for the keys already moved or not there. Before, every decision failed "store unavailable", which the
/// default policy admits (review: 5 grants on a limit of 3 during a reshard of a slot of 100,000 keys). The slot is
/// held half-migrated by hand, so the refusal outlasts the client's timeout whatever the machine's speed.
#[tokio::test]
async fn decisions_merged_in_a_slot_being_migrated_are_decided_one_by_one() {
    let mut stack = Stack::start_cluster().await;
    let shards = stack.cluster().shards().await.unwrap();
    let (from, to) = (shards[0].0, shards[1].0);
    let slot = first_slot_of(from).await;
    let client = stack.client_with(LIMITER_TOKEN).with_timeout(Duration::from_millis(300)).unwrap();
    let quota = Quota::fixed_window(2, Duration::from_secs(3600)).unwrap();
    let limiter = (0..)
        .map(|i| Limiter::new(client.clone(), &format!("moving-{i}"), quota).unwrap())
        .find(|limiter| hash_slot(limiter.state_key("id0")) == slot)
        .unwrap();
    for i in 0..4 {
        assert!(limiter.limit(format!("id{i}").as_str(), 1).await.unwrap().success);
    }
    let (from_id, to_id) = {
        let cluster = stack.cluster();
        (cluster.node_id(from).await.unwrap(), cluster.node_id(to).await.unwrap())
    };
    let slot_text = slot.to_string();
    command(to, &["CLUSTER", "SETSLOT", &slot_text, "IMPORTING", &from_id]).await.unwrap();
    command(from, &["CLUSTER", "SETSLOT", &slot_text, "MIGRATING", &to_id]).await.unwrap();
    let moved = limiter.state_key("id0");
    command(from, &["MIGRATE", "127.0.0.1", &to.to_string(), &moved, "0", "5000"]).await.unwrap();
    // id0 has moved, id1..id3 are still on the source, id4..id7 are nowhere yet: 8 decisions at once, twice.
    let round = || async {
        let decisions: Vec<_> = (0..8)
            .map(|i| {
                let limiter = limiter.clone();
                tokio::spawn(async move { limiter.limit(format!("id{i}").as_str(), 1).await })
            })
            .collect();
        let mut granted = Vec::new();
        for decision in decisions {
            granted.push(decision.await.unwrap().map(|decision| decision.success));
        }
        granted
    };
    let first: Vec<bool> = round().await.into_iter().collect::<Result<_, _>>().unwrap();
    assert_eq!(first, [true; 8], "each id's second grant, or its first");
    let second: Vec<bool> = round().await.into_iter().collect::<Result<_, _>>().unwrap();
    assert_eq!(second, [false, false, false, false, true, true, true, true]);
    let calls = command_calls(to, "asking").await;
    assert!(calls > 0, "the decisions on moved and new keys went to the importing node");
}

#[tokio::test]
async fn a_manual_failover_under_load_admits_no_request_too_many() {
    let mut stack = Stack::start_cluster().await;
    let shards = stack.cluster().shards().await.unwrap();
    let (master, replica) = (shards[0].0, shards[0].1[0]);
    let first_slot = first_slot_of(master).await;
    let names = names_in(first_slot..first_slot + 5000, 40);
    let (limit, ids) = (2, 10);
    let cluster = stack.take_cluster();
    let started = Instant::now();
    let (load, limiters) = under_load(&stack, &names, ids, limit, || async {
        cluster.failover(replica).await.expect("failover");
    })
    .await;
    println!("manual failover: {:?} in all", started.elapsed());
    let over = report("manual failover", &load, &limiters, ids, limit).await;
    assert_eq!(over, 0, "a manual failover must not admit a request too many");
    assert_eq!(cluster.roles().await.iter().find(|(p, _)| *p == replica).unwrap().1, Role::Master);
    drop(cluster);
}

#[tokio::test]
async fn a_master_killed_under_load_fails_over_and_the_lost_grants_are_measured() {
    let mut stack = Stack::start_cluster().await;
    let shards = stack.cluster().shards().await.unwrap();
    let (master, replica) = (shards[0].0, shards[0].1[0]);
    let first_slot = first_slot_of(master).await;
    let names = names_in(first_slot..first_slot + 5000, 40);
    let dead_slots = slots_of(master).await;
    let (limit, ids) = (2, 10);
    let mut cluster = stack.take_cluster();
    let started = Instant::now();
    let killed = Mutex::new(None);
    let (load, limiters) = under_load(&stack, &names, ids, limit, || async {
        cluster.kill(master).await.expect("kill");
        let kill_at = started.elapsed();
        // Meanwhile a pipeline over every master: the live masters' items answer, the dead one's fail on their own.
        let keys: Vec<String> = a_key_per_slot().into_iter().step_by(1024).collect();
        let gets: Vec<Command> = keys.iter().map(|key| Command::new("GET").arg(key)).collect();
        let replies = stack.client().pipeline(&gets).await.unwrap();
        let dead: Vec<bool> =
            keys.iter().map(|key| dead_slots.iter().any(|range| range.contains(&hash_slot(key)))).collect();
        for ((key, reply), dead) in keys.iter().zip(&replies).zip(&dead) {
            match (reply, dead) {
                (Ok(Value::Nil), false) => {}
                (Err(e), true) => assert!(e.to_string().contains("127.0.0.1"), "{key}: {e}"),
                other => panic!("{key}: {other:?}"),
            }
        }
        println!(
            "master killed: a pipeline over every master meanwhile: {} items answered, {} failed on their own",
            dead.iter().filter(|dead| !**dead).count(),
            dead.iter().filter(|dead| **dead).count()
        );
        cluster.wait_until_formed().await.expect("the replica takes over");
        *killed.lock().unwrap() = Some((kill_at, started.elapsed()));
    })
    .await;
    let (kill_at, formed_at) = killed.into_inner().unwrap().unwrap();
    println!(
        "master killed at {} ms, replica serving at {} ms (cluster-node-timeout 2000 ms)",
        kill_at.as_millis(),
        formed_at.as_millis()
    );
    let over = report("master killed", &load, &limiters, ids, limit).await;
    println!("master killed: grants forgotten by the promoted replica (admitted over a limit): {over}");
    assert_eq!(cluster.roles().await.iter().find(|(p, _)| *p == replica).unwrap().1, Role::Master);
    // Every error is one the client can act on, and the limits work again.
    let after =
        Limiter::new(stack.client(), "after-kill", Quota::gcra(1, 1, Duration::from_secs(3600)).unwrap()).unwrap();
    assert!(after.limit("x", 1).await.unwrap().success);
    drop(cluster);
}

#[tokio::test]
async fn an_endless_script_on_one_node_is_killed_there_and_decisions_recover() {
    let mut stack = Stack::start_cluster().await;
    let shards = stack.cluster().shards().await.unwrap();
    let master = shards[2].0;
    let first_slot = first_slot_of(master).await;
    let name = &names_in(first_slot..first_slot + 5000, 1)[0];
    // A node held by a script does not answer the cluster bus either: past cluster-node-timeout (2 s in the harness)
    // the others fail it over. Production's default (15 s) is well above busy-reply-threshold (5 s), when Redis
    // starts reading SCRIPT KILL: so here too.
    for port in stack.cluster().ports() {
        command(port, &["CONFIG", "SET", "cluster-node-timeout", "15000"]).await.unwrap();
    }
    let started = Instant::now();
    // The script names a key of that master's, so it runs there; the request times out.
    let endless = stack
        .client()
        .command(&Command::new("EVAL").arg("while true do end").arg(1).arg(format!("{{{name}}}:x")))
        .await;
    assert!(endless.is_err(), "{endless:?}");
    // The other masters serve meanwhile.
    let elsewhere = names_in(first_slot_of(shards[0].0).await..first_slot_of(shards[0].0).await + 5000, 1);
    let other = Limiter::new(
        stack.client_with(LIMITER_TOKEN),
        &elsewhere[0],
        Quota::gcra(5, 5, Duration::from_secs(1)).unwrap(),
    )
    .unwrap();
    assert!(other.limit("a", 1).await.unwrap().success);
    // The bridge sends SCRIPT KILL to the node that timed out; Redis reads it once the script has run
    // busy-reply-threshold (5 s), and decisions on that node go on.
    let limiter =
        Limiter::new(stack.client_with(LIMITER_TOKEN), name, Quota::gcra(5, 5, Duration::from_secs(1)).unwrap())
            .unwrap();
    loop {
        match limiter.limit("a", 1).await {
            Ok(decision) => break assert!(decision.success),
            Err(e) => assert!(e.is_store_unavailable(), "{e}"),
        }
        assert!(started.elapsed() < Duration::from_secs(40), "never recovered");
    }
    println!(
        "endless script on node {master}: decisions there recovered {:.1} s after it was sent",
        started.elapsed().as_secs_f64()
    );
    assert!(command_calls(master, "script|kill").await >= 1);
    let roles = stack.cluster().roles().await;
    assert!(
        roles.contains(&(master, Role::Master)),
        "the script was killed before the cluster failed the node over: {roles:?}"
    );
}

#[tokio::test]
async fn subscribe_hears_what_is_published_through_any_master() {
    let stack = Stack::start_cluster().await;
    let mut response = reqwest::Client::new()
        .post(format!("{}/subscribe/news", stack.url()))
        .bearer_auth(edgelimit_tests::TOKEN)
        .body("[]")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut text = String::new();
    let mut read_until = async |tail: &str| {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !text.ends_with(tail) {
            let chunk = tokio::time::timeout(Duration::from_secs(10), response.chunk()).await;
            match chunk.unwrap().unwrap() {
                Some(chunk) => text.push_str(std::str::from_utf8(&chunk).unwrap()),
                None => panic!("the stream ended: {text:?}"),
            }
            assert!(Instant::now() < deadline, "{text:?}");
        }
    };
    read_until("data: subscribe,news,1\n\n").await;
    // PUBLISH names no key: each goes to the next master, and the cluster bus carries it to the subscriber's node.
    let client = stack.client();
    for i in 0..3 {
        client.command(&Command::new("PUBLISH").arg("news").arg(format!("m{i}"))).await.unwrap();
    }
    read_until("data: message,news,m0\n\ndata: message,news,m1\n\ndata: message,news,m2\n\n").await;
}

#[tokio::test]
async fn the_bridge_stops_sending_again_once_the_clients_deadline_has_passed() {
    let mut stack = Stack::start_cluster_with(|config| config.redis_timeout = Duration::from_secs(20)).await;
    let shards = stack.cluster().shards().await.unwrap();
    let master = shards[0].0;
    let dead_slots = slots_of(master).await;
    let key = a_key_per_slot()
        .into_iter()
        .find(|key| dead_slots.iter().any(|range| range.contains(&hash_slot(key))))
        .unwrap();
    let mut cluster = stack.take_cluster();
    cluster.kill(master).await.expect("kill");
    // Raw HTTP, to see what the bridge answers whatever the client would have done by then.
    let http = reqwest::Client::new();
    let get = |deadline: Option<&str>| {
        let mut request = http
            .post(stack.url())
            .bearer_auth(edgelimit_tests::TOKEN)
            .body(serde_json::json!(["GET", key]).to_string());
        if let Some(deadline) = deadline {
            request = request.header(edgelimit::rest::DEADLINE_HEADER, deadline);
        }
        request.send()
    };
    // The client waits 300 ms: the bridge gives up then, long before the replica can take over (the node timeout
    // alone is 2 s), instead of trying for its own 20 s and answering 200 after the failover.
    let answered = get(Some("300")).await.unwrap();
    let status = answered.status().as_u16();
    let body = answered.text().await.unwrap();
    assert_eq!(status, 503, "{body}");
    // A deadline that is not whole ms is the client's mistake.
    for bad in ["", "-1", "1.5", "12345678901", "soon"] {
        let answered = get(Some(bad)).await.unwrap();
        assert_eq!(answered.status().as_u16(), 400, "{bad:?}");
        assert!(answered.text().await.unwrap().contains("whole ms"), "{bad:?}");
    }
    // Without one, the bridge keeps trying within its own timeout, and the promoted replica answers.
    let answered = get(None).await.unwrap();
    assert_eq!(answered.status().as_u16(), 200, "{}", answered.text().await.unwrap());
    drop(cluster);
}

/// A reply combined from every master (`KEYS`) is held to the reply cap as a whole on `POST /`, as one Redis's
/// reply and a `/pipeline`'s replies together are: each master's part alone may be within the cap.
#[tokio::test]
async fn a_reply_combined_from_every_master_is_held_to_the_cap() {
    let stack = Stack::start_cluster_with(|config| config.max_reply_bytes = 1000).await;
    let client = stack.client();
    let sets: Vec<Command> =
        (0..60).map(|i| Command::new("SET").arg(format!("combined-reply-key-number-{i:04}")).arg("v")).collect();
    for reply in client.pipeline(&sets).await.unwrap() {
        reply.unwrap();
    }
    let error = client.command(&Command::new("KEYS").arg("combined-*")).await.unwrap_err();
    assert_eq!(error.code(), "EDGELIMIT_TOO_LARGE", "{error}");
    assert!(!error.is_store_unavailable());
    let few = client.command(&Command::new("KEYS").arg("combined-reply-key-number-000*")).await.unwrap();
    assert_eq!(few.into_array().unwrap().len(), 10);
}
