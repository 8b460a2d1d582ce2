//! The bridge as an attacker holding a token would use it, on real Redis: what each profile may run, the Redis ACL
//! users behind them, token rotation, and a script that runs forever.

use std::time::{Duration, Instant};

use edgelimit::limit::{Limiter, Quota, StateDetail};
use edgelimit::{Command, Error, RestClient, Script, Value};
use edgelimit_cli::bridge::{BridgeConfig, InProcessBridge, Profile, RedisAcl};
use edgelimit_cli::redis_server::RedisServer;
use edgelimit_tests::{Stack, LIMITER_TOKEN, READONLY_TOKEN, TOKEN};

fn cmd(words: &[&str]) -> Command {
    Command::new(words[0]).args(&words[1..])
}

/// The bridge's refusal of a command for the token's profile: HTTP 403 and a NOPERM message saying why.
fn assert_forbidden(result: Result<Value, Error>, why: &str) {
    match result {
        Err(Error::Unauthorized { status: 403, message }) => {
            assert!(message.starts_with("NOPERM"), "{message}");
            assert!(message.contains(why), "{message}");
        }
        other => panic!("expected a 403 refusal ({why}), got {other:?}"),
    }
}

#[tokio::test]
async fn a_limiter_token_gets_a_clear_refusal_for_everything_but_the_limiters_scripts() {
    let stack = Stack::start().await;
    let admin = stack.client();
    admin.command(&cmd(&["SET", "precious", "1"])).await.unwrap();
    let limiter = stack.client_with(LIMITER_TOKEN);
    for words in [
        &["SHUTDOWN", "NOSAVE"][..],
        &["FLUSHALL"],
        &["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"],
        &["REPLICAOF", "127.0.0.1", "1"],
        &["KEYS", "*"],
        &["GET", "precious"],
        &["SETRANGE", "edgelimit:amp", "199999999", "x"],
        &["SCRIPT", "FLUSH"],
        &["ACL", "LIST"],
    ] {
        assert_forbidden(limiter.command(&cmd(words)).await, "may not run");
    }
    for body in ["while true do end", "return redis.call('FLUSHALL')"] {
        let script = Script::new(body);
        assert_forbidden(script.run::<&str, &str>(&limiter, &[], &[]).await, "only edgelimit's own scripts");
    }
    // Nothing of it reached Redis.
    assert_eq!(admin.command(&cmd(&["GET", "precious"])).await.unwrap(), Value::Bytes(b"1".to_vec()));
    assert_eq!(
        admin.command(&cmd(&["CONFIG", "GET", "maxmemory-policy"])).await.unwrap(),
        Value::Array(vec![Value::Bytes(b"maxmemory-policy".to_vec()), Value::Bytes(b"noeviction".to_vec())])
    );
    assert_eq!(limiter.command(&cmd(&["PING"])).await.unwrap(), Value::Bytes(b"PONG".to_vec()));
}

#[tokio::test]
async fn a_limiter_token_decides_at_server_time_and_refunds_only_grants_a_member_names() {
    let stack = Stack::start().await;
    let client = stack.client_with(LIMITER_TOKEN);

    let bucket =
        Limiter::new(client.clone(), "api", Quota::token_bucket(2, 2, Duration::from_secs(60)).unwrap()).unwrap();
    let granted = bucket.limit("alice", 1).await.unwrap();
    assert!(granted.success);
    assert_eq!(bucket.peek("alice", 1).await.unwrap().remaining, 1);
    assert!(bucket.state("alice").await.unwrap().stored.is_some());
    // A receipt of a time can be made up, and a refund gives back each time it is made.
    let refund = bucket.refund("alice", granted.receipt.as_ref().unwrap()).await;
    assert!(
        matches!(&refund, Err(Error::Unauthorized { status: 403, message }) if message.contains("concurrency and sliding-log")),
        "{refund:?}"
    );
    let at_a_time = bucket.clone().at(4_000_000_000_000).limit("alice", 1).await;
    assert!(
        matches!(&at_a_time, Err(Error::Unauthorized { status: 403, message }) if message.contains("server's clock")),
        "{at_a_time:?}"
    );
    // Stored quotas are written with plain commands: an admin's job.
    assert!(matches!(
        bucket.store_quota(Quota::fixed_window(1, Duration::from_secs(1)).unwrap()).await,
        Err(Error::Unauthorized { status: 403, .. })
    ));

    let slots = Limiter::new(client, "jobs", Quota::concurrency(1, Duration::from_secs(60)).unwrap()).unwrap();
    let lease = slots.limit("bob", 1).await.unwrap().receipt.unwrap();
    assert!(!slots.limit("bob", 1).await.unwrap().success);
    assert!(slots.release("bob", &lease).await.unwrap());
    // A receipt used twice gives nothing back the second time.
    assert!(!slots.release("bob", &lease).await.unwrap());
    assert!(slots.limit("bob", 1).await.unwrap().success);
}

/// Every string of a reply, joined by blanks.
fn text_of(value: &Value) -> String {
    match value {
        Value::Bytes(bytes) => String::from_utf8_lossy(bytes).into_owned(),
        Value::Array(items) => items.iter().map(text_of).collect::<Vec<_>>().join(" "),
        other => format!("{other:?}"),
    }
}

#[tokio::test]
async fn keys_outside_the_limiter_patterns_are_refused_by_the_fence_and_its_redis_user_holds_the_same() {
    let stack = Stack::start().await;
    let client = stack.client_with(LIMITER_TOKEN);
    let outside = Limiter::new(client.clone(), "api", Quota::fixed_window(5, Duration::from_secs(1)).unwrap())
        .unwrap()
        .with_prefix("elsewhere")
        .unwrap();
    match outside.limit("alice", 1).await {
        Err(Error::Unauthorized { status: 403, message }) => assert!(message.contains("--limiter-keys"), "{message}"),
        other => panic!("expected the fence's refusal, got {other:?}"),
    }
    // A call the fence lets through makes sure the limiter's Redis user exists (the fence refused the one above
    // before the bridge connected for it, and the start-up check runs in the background).
    let inside = Limiter::new(client, "api", Quota::fixed_window(5, Duration::from_secs(1)).unwrap()).unwrap();
    assert!(inside.limit("alice", 1).await.unwrap().success);
    let admin = stack.client();
    let user = admin.command(&cmd(&["ACL", "GETUSER", "edgelimit-limiter"])).await.unwrap();
    let text = text_of(&user);
    assert!(text.contains("~edgelimit:*"), "{text}");
    assert!(!text.contains("flushall"), "{text}");
}

/// The bridge's refusal, whole: HTTP 403 and a message that begins with `prefix`.
fn assert_refused_with(result: Result<Value, Error>, prefix: &str) {
    match result {
        Err(Error::Unauthorized { status: 403, message }) => {
            assert!(message.starts_with(prefix), "expected {prefix:?}…, got {message:?}")
        }
        other => panic!("expected a 403 refusal ({prefix}), got {other:?}"),
    }
}

/// What Redis's ACL says of `user` running `words` (`ACL DRYRUN`, which checks without running): `OK`, or why not.
async fn dry_run(stack: &Stack, user: &str, words: &[&str]) -> String {
    let mut command = vec!["ACL", "DRYRUN", user];
    command.extend(words);
    text_of(&stack.client().command(&cmd(&command)).await.unwrap())
}

/// A readonly token reads keys of `--limiter-keys` only, with the limiter's bounds, and each refusal says what to do
/// instead; its Redis user holds the same keys, so a bug in the fence could not reach other keys either.
#[tokio::test]
async fn a_readonly_token_reads_edgelimits_keys_only_and_its_redis_user_holds_the_same() {
    let stack = Stack::start().await;
    let admin = stack.client();
    for words in
        [&["SET", "user:2:apikey", "sk_live_SECRET"][..], &["SET", "edgelimit:k", "v"], &["SADD", "edgelimit:{s}", "a"]]
    {
        admin.command(&cmd(words)).await.unwrap();
    }
    let reader = stack.client_with(READONLY_TOKEN);
    assert_eq!(reader.command(&cmd(&["GET", "edgelimit:k"])).await.unwrap(), Value::Bytes(b"v".to_vec()));
    let readonly = "NOPERM this token's profile (readonly) ";
    let outside = format!(
        "{readonly}may read keys matching edgelimit:* or {{edgelimit:* only (the bridge's --limiter-keys), not \
         \"user:2:apikey\"; use an admin token for other keys"
    );
    for words in [
        &["GET", "user:2:apikey"][..],
        &["MGET", "edgelimit:k", "user:2:apikey"],
        &["HGETALL", "user:2:apikey"],
        &["MEMORY", "USAGE", "user:2:apikey"],
    ] {
        assert_refused_with(reader.command(&cmd(words)).await, &outside);
    }
    let inspect_outside = edgelimit::lua::INSPECT.run(&reader, &["user:2:apikey"], &["", "10", "value"]).await;
    assert_refused_with(
        inspect_outside,
        &format!("{readonly}may give scripts keys matching edgelimit:* or {{edgelimit:* only"),
    );
    let scan = format!(
        "{readonly}may SCAN only with MATCH and a pattern inside the bridge's --limiter-keys (edgelimit:* or \
         {{edgelimit:*), e.g. SCAN 0 MATCH edgelimit:* COUNT 1000; use an admin token to list other keys"
    );
    for words in [&["SCAN", "0"][..], &["SCAN", "0", "MATCH", "*"], &["SCAN", "0", "MATCH", "user:*"]] {
        assert_refused_with(reader.command(&cmd(words)).await, &scan);
    }
    for (words, prefix) in [
        (&["KEYS", "*"][..], "may not run KEYS: "),
        (&["SET", "edgelimit:k", "w"], "may not run SET: "),
        (&["FLUSHALL"], "may not run FLUSHALL: "),
        (&["LRANGE", "edgelimit:k", "0", "-1"], "may not run LRANGE: "),
        // The limiter's bounds: replies and work a request's words would multiply.
        (&["PING", "hello"], "may run PING without arguments only"),
        (&["ECHO", "hello"], "may not run ECHO: "),
        (
            &["HMGET", "edgelimit:{ops}", "rate", "rate"],
            "may HMGET only the fields of a stored quota's config (algorithm, limit, interval, rate), each once",
        ),
        (&["MEMORY", "USAGE", "edgelimit:{s}", "SAMPLES", "0"], "may run MEMORY with SAMPLES from 1 to 1000 only"),
        (&["SRANDMEMBER", "edgelimit:{s}", "-100000000"], "may run SRANDMEMBER with a count of at most 1000 only"),
        (&["SCAN", "0", "MATCH", "edgelimit:*", "COUNT", "1000000"], "may run SCAN with a count of at most 1000 only"),
    ] {
        assert_refused_with(reader.command(&cmd(words)).await, &format!("{readonly}{prefix}"));
    }
    assert_refused_with(
        Script::new("return 1").run::<&str, &str>(&reader, &[], &[]).await,
        &format!("{readonly}may run only the read-only inspect script of edgelimit's scripts"),
    );
    assert_eq!(admin.command(&cmd(&["GET", "edgelimit:k"])).await.unwrap(), Value::Bytes(b"v".to_vec()));

    // The second fence: the Redis user itself, as the bridge made it.
    let user = "edgelimit-readonly";
    let inspect_sha = edgelimit::lua::INSPECT.sha1();
    for words in [
        &["GET", "edgelimit:k"][..],
        &["EVALSHA", inspect_sha, "1", "{edgelimit:x}:value", "", "10", "value"],
        &["MEMORY", "USAGE", "edgelimit:{s}"],
    ] {
        assert_eq!(dry_run(&stack, user, words).await, "OK", "{words:?}");
    }
    for words in [
        &["GET", "user:2:apikey"][..],
        &["EVALSHA", inspect_sha, "1", "user:2:apikey", "", "10", "value"],
        &["SET", "edgelimit:k", "w"],
        &["KEYS", "*"],
        &["LRANGE", "edgelimit:k", "0", "-1"],
    ] {
        let why = dry_run(&stack, user, words).await;
        assert!(why.starts_with("This user has no permissions"), "{words:?}: {why}");
    }
    let rules = text_of(&admin.command(&cmd(&["ACL", "GETUSER", user])).await.unwrap());
    assert!(rules.contains("~edgelimit:* ~{edgelimit:*"), "{rules}");
    assert!(!rules.contains("~* ") && !rules.contains("+@read"), "{rules}");
}

/// What dashboards and `state()` read still works with a readonly token: each limit's state (a stored quota's too),
/// listing edgelimit's keys with SCAN, and reading what it found, one by one, in a pipeline and in a transaction.
#[tokio::test]
async fn a_readonly_token_still_reads_what_dashboards_need() {
    let stack = Stack::start().await;
    let limiter = stack.client_with(LIMITER_TOKEN);
    let log_quota = Quota::sliding_log(3, Duration::from_secs(60)).unwrap();
    let log = Limiter::new(limiter.clone(), "api", log_quota).unwrap();
    assert!(log.limit("alice", 2).await.unwrap().success);
    Limiter::stored(stack.client(), "ops")
        .unwrap()
        .store_quota(Quota::fixed_window(5, Duration::from_secs(60)).unwrap())
        .await
        .unwrap();
    let ops = Limiter::stored(limiter, "ops").unwrap();
    assert!(ops.limit("bob", 1).await.unwrap().success);

    let reader = stack.client_with(READONLY_TOKEN);
    let state = Limiter::new(reader.clone(), "api", log_quota).unwrap().state("alice").await.unwrap();
    assert!(matches!(state.detail, StateDetail::Log { held: 2, ref grants } if grants.len() == 1), "{state:?}");
    let stored = Limiter::stored(reader.clone(), "ops").unwrap();
    let state = stored.state("bob").await.unwrap();
    assert!(matches!(state.detail, StateDetail::FixedWindow { count: 1, .. }), "{state:?}");

    let mut listed = Vec::new();
    let mut cursor = "0".to_owned();
    loop {
        let page = reader
            .command(&cmd(&["SCAN", &cursor, "MATCH", "edgelimit:*", "COUNT", "1000"]))
            .await
            .unwrap()
            .into_array()
            .unwrap();
        let [next, keys] = <[Value; 2]>::try_from(page).unwrap();
        cursor = next.into_string().unwrap();
        listed.extend(keys.into_array().unwrap().into_iter().map(|key| key.into_string().unwrap()));
        if cursor == "0" {
            break;
        }
    }
    let (log_key, config_key) = (log.state_key("alice"), ops.config_key());
    for key in [&log_key, &config_key, &ops.state_key("bob")] {
        assert!(listed.contains(key), "{key} not in {listed:?}");
    }
    let reads = [
        cmd(&["TYPE", &log_key]),
        cmd(&["PTTL", &log_key]),
        cmd(&["ZCARD", &log_key]),
        cmd(&["ZRANGE", &log_key, "0", "-1", "WITHSCORES"]),
        cmd(&["MEMORY", "USAGE", &log_key, "SAMPLES", "5"]),
        cmd(&["HGETALL", &config_key]),
        cmd(&["HMGET", &config_key, "algorithm", "limit", "interval", "rate"]),
        cmd(&["EXISTS", &log_key, &config_key]),
        cmd(&["PING"]),
        cmd(&["TIME"]),
    ];
    let replies = reader.pipeline(&reads).await.unwrap();
    assert!(replies.iter().all(Result::is_ok), "{replies:?}");
    assert_eq!(replies[0].as_ref().unwrap(), &Value::Bytes(b"zset".to_vec()));
    assert_eq!(replies[7].as_ref().unwrap(), &Value::Int(2));
    let replies = reader.multi_exec(&reads).await.unwrap();
    assert!(replies.iter().all(Result::is_ok), "{replies:?}");
}

#[tokio::test]
async fn tokens_rotate_through_the_tokens_file_without_a_restart() {
    let dir = std::env::temp_dir().join(format!("edgelimit-tokens-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("tokens");
    std::fs::write(&file, "limiter:old-token-0001 # before rotation\n").unwrap();
    let stack = Stack::start_with(|config| config.tokens_file = Some(file.clone())).await;
    let old = stack.client_with("old-token-0001");
    let new = stack.client_with("new-token-0002");
    assert!(old.command(&cmd(&["PING"])).await.is_ok());
    assert!(matches!(new.command(&cmd(&["PING"])).await, Err(Error::Unauthorized { status: 401, .. })));

    // A file that does not parse keeps the tokens in force.
    std::fs::write(&file, "limiter:old-token-0001\nlimiter new-token-0002\n").unwrap();
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert!(old.command(&cmd(&["PING"])).await.is_ok());

    std::fs::write(&file, "limiter:new-token-0002\n").unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while new.command(&cmd(&["PING"])).await.is_err() {
        assert!(Instant::now() < deadline, "the new token was never accepted");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(matches!(old.command(&cmd(&["PING"])).await, Err(Error::Unauthorized { status: 401, .. })));
    // The inline admin token stays whatever the file says.
    assert!(stack.client().command(&cmd(&["PING"])).await.is_ok());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn the_limiter_user_comes_back_after_redis_restarts_without_it() {
    let mut stack = Stack::start().await;
    let limiter =
        Limiter::new(stack.client_with(LIMITER_TOKEN), "api", Quota::fixed_window(5, Duration::from_secs(1)).unwrap())
            .unwrap();
    assert!(limiter.limit("a", 1).await.unwrap().success);
    stack.stop_redis().await;
    stack.restart_redis().await;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match limiter.limit("a", 1).await {
            Ok(decision) => break assert!(decision.success),
            Err(e) => assert!(e.is_store_unavailable(), "{e}"),
        }
        assert!(Instant::now() < deadline, "never recovered");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A rolling upgrade: the bridge resets its Redis users to its own rules when it connects, so the readonly user an
/// older bridge made, which read every key (`~*`), keeps nothing of them once a new bridge serves a readonly token.
#[tokio::test]
async fn a_new_bridge_resets_the_readonly_user_an_older_bridge_made() {
    let redis = RedisServer::start().await.unwrap();
    let user = "edgelimit-readonly";
    let password = edgelimit_cli::bridge::profile::password(&redis.url(), user);
    let older = format!("reset on >{password} ~* -@all +@read -@dangerous +evalsha +eval +ping +echo +time");
    let mut admin = redis::Client::open(redis.url()).unwrap().get_multiplexed_async_connection().await.unwrap();
    let mut set_user = redis::cmd("ACL");
    set_user.arg("SETUSER").arg(user).arg(older.split(' ').collect::<Vec<_>>());
    let () = set_user.query_async(&mut admin).await.unwrap();
    let dry_run = |words: &[&str]| {
        let mut command = redis::cmd("ACL");
        command.arg("DRYRUN").arg(user).arg(words);
        command
    };
    let secret = dry_run(&["GET", "user:2:apikey"]);
    let before: String = secret.query_async(&mut admin).await.unwrap();
    assert_eq!(before, "OK", "the older bridge's user reads every key");

    let mut config = BridgeConfig::new(redis.url(), "admin-token-0001");
    config.tokens = vec![(Profile::Readonly, READONLY_TOKEN.to_owned())];
    let bridge = InProcessBridge::start(config).await.unwrap();
    let reader = RestClient::new(bridge.url(), READONLY_TOKEN).unwrap();
    assert_eq!(reader.command(&cmd(&["EXISTS", "edgelimit:k"])).await.unwrap(), Value::Int(0));
    let after: String = secret.query_async(&mut admin).await.unwrap();
    assert!(after.starts_with("This user has no permissions to access the 'user:2:apikey' key"), "{after}");
    let own: String = dry_run(&["GET", "edgelimit:k"]).query_async(&mut admin).await.unwrap();
    assert_eq!(own, "OK");
    bridge.stop().await.unwrap();
}

#[tokio::test]
async fn with_the_acl_off_the_bridge_still_fences_limiter_tokens_and_refuses_readonly_ones() {
    let redis = RedisServer::start().await.unwrap();
    let mut config = BridgeConfig::new(redis.url(), "admin-token-0001");
    config.redis_acl = RedisAcl::Off;
    config.tokens = vec![(Profile::Readonly, READONLY_TOKEN.to_owned())];
    let refused = InProcessBridge::start(config.clone()).await.unwrap().stop().await.unwrap_err();
    assert!(refused.to_string().contains("--redis-acl"), "{refused}");

    config.tokens = vec![(Profile::Limiter, LIMITER_TOKEN.to_owned())];
    let bridge = InProcessBridge::start(config).await.unwrap();
    let client = RestClient::new(bridge.url(), LIMITER_TOKEN).unwrap();
    assert_forbidden(client.command(&cmd(&["FLUSHALL"])).await, "may not run");
    // Its scripts are given keys of its patterns only (--limiter-keys): with the ACL off, nothing else keeps them
    // from reading another program's key (the inspect script reads a string back) or overwriting it.
    let admin = RestClient::new(bridge.url(), "admin-token-0001").unwrap();
    admin.command(&cmd(&["SET", "user:2:apikey", "sk_live_SECRET"])).await.unwrap();
    for script in [&edgelimit::lua::FIXED_WINDOW, &edgelimit::lua::INSPECT] {
        let outside = script.run(&client, &["user:2:apikey".to_owned()], &["1:5:60000"]).await;
        assert_forbidden(outside, "--limiter-keys");
    }
    let kept = admin.command(&cmd(&["GET", "user:2:apikey"])).await.unwrap();
    assert_eq!(kept.into_string().unwrap(), "sk_live_SECRET");
    let limiter = Limiter::new(client, "api", Quota::gcra(5, 5, Duration::from_secs(1)).unwrap()).unwrap();
    assert!(limiter.limit("a", 1).await.unwrap().success);
    bridge.stop().await.unwrap();
}

/// A connection that sends the start of a request and then nothing is closed once the head is overdue
/// (`serving::HEADER_READ_TIMEOUT`), so that such connections (slowloris) cannot hold the bridge's file descriptors
/// and lock every other client out; other clients are served meanwhile.
#[tokio::test]
async fn a_request_head_that_never_ends_is_closed_and_others_are_served() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let stack = Stack::start().await;
    let address = stack.url().trim_start_matches("http://").to_owned();
    let mut stalled = Vec::new();
    for _ in 0..50 {
        let mut connection = tokio::net::TcpStream::connect(&address).await.unwrap();
        connection.write_all(b"POST / HTTP/1.1\r\nHost: bridge\r\n").await.unwrap();
        stalled.push(connection);
    }
    let pong = stack.client().command(&cmd(&["PING"])).await.unwrap();
    assert_eq!(pong.into_string().unwrap(), "PONG");
    let timeout = edgelimit_cli::bridge::serving::HEADER_READ_TIMEOUT;
    for mut connection in stalled {
        let mut buffer = [0u8; 512];
        // Generous: only "eventually" is asserted; hyper may answer 408 before it closes.
        let read = tokio::time::timeout(timeout * 3, async {
            loop {
                match connection.read(&mut buffer).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => continue,
                }
            }
        })
        .await;
        assert!(read.is_ok(), "a stalled connection stayed open");
    }
}

/// Sends `request` on a fresh connection and reads until the bridge closes it (within `wait`): what it answered.
async fn answer_to(address: &str, request: &[u8], wait: std::time::Duration) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut connection = tokio::net::TcpStream::connect(address).await.unwrap();
    connection.write_all(request).await.unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(wait, connection.read_to_end(&mut answer)).await;
    String::from_utf8_lossy(&answer).into_owned()
}

/// A body announced above the cap is refused before any of it arrives; a body that trickles is cut off at
/// `BODY_READ_TIMEOUT`, so token holders cannot hold connections (and their share of memory) by sending slowly.
#[tokio::test]
async fn bodies_announced_too_large_or_sent_too_slowly_are_refused_and_the_connection_closed() {
    let stack = Stack::start().await;
    let address = stack.url().trim_start_matches("http://").to_owned();
    let head = format!("POST / HTTP/1.1\r\nHost: b\r\nAuthorization: Bearer {TOKEN}\r\n");
    let huge = format!("{head}Content-Length: 10000000000\r\n\r\n");
    let answer = answer_to(&address, huge.as_bytes(), Duration::from_secs(5)).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("announces 10000000000 bytes"), "{answer}");
    let trickle = format!("{head}Content-Length: 8\r\n\r\n[\"PI");
    let started = Instant::now();
    let timeout = edgelimit_cli::bridge::BODY_READ_TIMEOUT;
    let answer = answer_to(&address, trickle.as_bytes(), timeout * 3).await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(started.elapsed() >= timeout, "answered after {:?}", started.elapsed());
}

/// Past `max_connections` a new connection waits in the backlog, unserved, until one closes.
#[tokio::test]
async fn connections_past_the_bound_wait_until_one_closes() {
    use tokio::io::AsyncWriteExt;
    let stack = Stack::start_with(|config| config.max_connections = 2).await;
    let address = stack.url().trim_start_matches("http://").to_owned();
    let mut idle = Vec::new();
    for _ in 0..2 {
        idle.push(tokio::net::TcpStream::connect(&address).await.unwrap());
    }
    let ping = format!(
        "POST / HTTP/1.1\r\nHost: b\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: 8\r\nConnection: close\r\n\r\n[\"PING\"]"
    );
    let waiting = tokio::spawn(async move { answer_to(&address, ping.as_bytes(), Duration::from_secs(20)).await });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!waiting.is_finished(), "a third connection was served past a bound of 2");
    let mut first = idle.remove(0);
    first.shutdown().await.unwrap();
    drop(first);
    let answer = waiting.await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 200") && answer.ends_with(r#"{"result":"PONG"}"#), "{answer}");
}

/// A fixed window's decision for `id` as a limiter token sends it (EVALSHA), its script loaded by a first decision.
async fn loaded_decision_script(stack: &Stack, id: &str) -> Command {
    let limiter =
        Limiter::new(stack.client_with(LIMITER_TOKEN), "api", Quota::fixed_window(5, Duration::from_secs(60)).unwrap())
            .unwrap();
    assert!(limiter.limit(id, 1).await.unwrap().success, "the script is loaded");
    edgelimit::lua::FIXED_WINDOW.evalsha_command(&[limiter.state_key(id)], &["1:5:60000"])
}

/// A limiter or readonly token's `/multi-exec` is one transaction, as an admin's: its ACL user may run MULTI and
/// EXEC. (Refused, Redis ran the commands one by one, outside any transaction, and the request answered an error.)
#[tokio::test]
async fn a_scoped_tokens_multi_exec_is_one_transaction() {
    let stack = Stack::start().await;
    let script = loaded_decision_script(&stack, "mx").await;
    let replies = stack.client_with(LIMITER_TOKEN).multi_exec(&[script.clone(), script.clone(), script]).await.unwrap();
    assert_eq!(replies.len(), 3);
    assert!(replies.iter().all(Result::is_ok), "{replies:?}");
    let readonly = stack.client_with(READONLY_TOKEN);
    let reads = readonly.multi_exec(&[cmd(&["GET", "edgelimit:k"]), cmd(&["EXISTS", "edgelimit:k"])]).await.unwrap();
    assert_eq!(reads.len(), 2, "{reads:?}");
}

/// Every profile's pipelines are announced to the reply cap (`cli/src/bridge/shared_budget.rs`): each profile's
/// Redis user may run the `ECHO` that announces them. (Refused, its replies would be held to their budget only once
/// all had arrived: nothing else would show it.)
#[tokio::test]
async fn every_profiles_pipeline_is_announced_with_an_echo_its_redis_user_may_run() {
    let stack = Stack::start().await;
    let script = loaded_decision_script(&stack, "p").await;
    let pipelines = [
        (LIMITER_TOKEN, vec![script.clone(), script]),
        (READONLY_TOKEN, vec![cmd(&["GET", "edgelimit:k"]), cmd(&["EXISTS", "edgelimit:k"])]),
        (edgelimit_tests::TOKEN, vec![cmd(&["PING"]), cmd(&["GET", "k"])]),
    ];
    for (token, commands) in pipelines {
        let replies = stack.client_with(token).pipeline(&commands).await.unwrap();
        assert_eq!(replies.len(), 2, "{replies:?}");
        assert!(replies.iter().all(Result::is_ok), "{replies:?}");
    }
    let stats = stack.client().command(&cmd(&["INFO", "commandstats"])).await.unwrap();
    let Value::Bytes(stats) = stats else { panic!("INFO answered {stats:?}") };
    let stats = String::from_utf8(stats).unwrap();
    let echo =
        stats.lines().find(|line| line.starts_with("cmdstat_echo:")).unwrap_or_else(|| panic!("no ECHO ran: {stats}"));
    assert!(echo.starts_with("cmdstat_echo:calls=3,"), "{echo}");
    assert!(echo.contains(",rejected_calls=0,failed_calls=0"), "{echo}");
}

/// A Redis that refuses the bridge (its login, or creating its ACL users) is a set-up error that no retry fixes: the
/// client reports it, and it is never taken for an outage, which a failure policy failing open would let through.
#[tokio::test]
async fn a_bridge_that_redis_refuses_is_a_store_set_up_error_never_an_outage() {
    let stack = Stack::start().await;
    let limited = |client: RestClient| {
        Limiter::new(client, "api", Quota::fixed_window(1, Duration::from_secs(60)).unwrap()).unwrap()
    };
    let refused = |error: Error, code: &str| {
        assert!(!error.is_store_unavailable(), "{error}");
        match &error {
            Error::StoreConfig { code: got, message } if got == code => message.clone(),
            other => panic!("expected Redis's {code}, got {other:?}"),
        }
    };
    // The Redis ACL users of a bridge's limiter tokens cannot be made: its --redis user may not run ACL SETUSER.
    // (The harness bridge keeps its connections, made before.)
    let admin = stack.client();
    admin.command(&cmd(&["ACL", "SETUSER", "default", "-acl"])).await.unwrap();
    let mut config = BridgeConfig::new(stack.redis_url(), "admin-token-0001");
    config.tokens = vec![(Profile::Limiter, LIMITER_TOKEN.to_owned())];
    let bridge = InProcessBridge::start(config).await.unwrap();
    let error = limited(RestClient::new(bridge.url(), LIMITER_TOKEN).unwrap()).limit("a", 1).await.unwrap_err();
    let message = refused(error, "NOPERM");
    assert!(message.contains("--redis-acl off"), "{message}");
    bridge.stop().await.unwrap();

    // A wrong password in the bridge's --redis URL.
    admin.command(&cmd(&["CONFIG", "SET", "requirepass", "the-right-one"])).await.unwrap();
    let url = stack.redis_url().replace("redis://", "redis://:a-wrong-one@");
    let mut config = BridgeConfig::new(url, "admin-token-0001");
    config.redis_acl = RedisAcl::Off;
    let bridge = InProcessBridge::start(config).await.unwrap();
    let error = limited(RestClient::new(bridge.url(), "admin-token-0001").unwrap()).limit("a", 1).await.unwrap_err();
    let message = refused(error, "WRONGPASS");
    assert!(message.contains("--redis URL"), "{message}");
    bridge.stop().await.unwrap();
}

/// Sends `["EVAL", body, "0"]` with the admin token; the answer does not matter (it times out).
async fn run_forever(stack: &Stack, body: &str) {
    let client = stack.client();
    let result = client.command(&cmd(&["EVAL", body, "0"])).await;
    assert!(result.is_err(), "{result:?}");
}

#[tokio::test]
async fn an_endless_script_is_killed_and_every_client_recovers_within_the_busy_threshold() {
    let stack = Stack::start().await;
    let started = Instant::now();
    run_forever(&stack, "while true do end").await;
    let limiter =
        Limiter::new(stack.client_with(LIMITER_TOKEN), "api", Quota::fixed_window(5, Duration::from_secs(1)).unwrap())
            .unwrap();
    // Redis reads SCRIPT KILL once the script has run busy-reply-threshold (5 s); the bound here is generous for a
    // loaded machine, and a test of recovery, not of speed.
    loop {
        match limiter.limit("a", 1).await {
            Ok(decision) => break assert!(decision.success),
            Err(e) => assert!(e.is_store_unavailable(), "{e}"),
        }
        assert!(started.elapsed() < Duration::from_secs(40), "never recovered");
    }
    eprintln!("recovered {:.1} s after the endless script was sent", started.elapsed().as_secs_f64());
}

/// A Redis function that loops is stopped as a script is: Redis answers SCRIPT KILL with BUSY for a function, and the
/// bridge sends FUNCTION KILL. (Before, every client got BUSY until someone killed it by hand.)
#[tokio::test]
async fn an_endless_function_is_killed_and_every_client_recovers() {
    let stack = Stack::start().await;
    let admin = stack.client();
    let library = "#!lua name=spin\nredis.register_function('spin', function() while true do end end)";
    admin.command(&cmd(&["FUNCTION", "LOAD", "REPLACE", library])).await.unwrap();
    let started = Instant::now();
    assert!(admin.command(&cmd(&["FCALL", "spin", "0"])).await.is_err());
    loop {
        match admin.command(&cmd(&["PING"])).await {
            Ok(pong) => break assert_eq!(pong.into_string().unwrap(), "PONG"),
            Err(e) => assert!(e.is_store_unavailable(), "{e}"),
        }
        assert!(started.elapsed() < Duration::from_secs(40), "never recovered");
    }
}

#[tokio::test]
async fn a_script_that_wrote_cannot_be_killed_and_the_bridge_says_so() {
    let mut stack = Stack::start().await;
    run_forever(&stack, "redis.call('SET', 'x', '1') while true do end").await;
    let client = stack.client();
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        match client.command(&cmd(&["PING"])).await {
            Err(Error::Endpoint { status: 503, message }) if message.contains("cannot be killed") => break,
            Err(e) => assert!(e.is_store_unavailable(), "{e}"),
            Ok(reply) => panic!("Redis answered {reply:?} while the script ran"),
        }
        assert!(Instant::now() < deadline, "the bridge never said the script cannot be killed");
    }
    // Only SHUTDOWN NOSAVE (or a kill of the process, here) ends it.
    stack.stop_redis().await;
}

#[tokio::test]
async fn an_unusable_token_or_key_pattern_is_refused_at_start_with_what_to_do() {
    for configure in [
        (|config: &mut BridgeConfig| config.limiter_keys = vec![String::new()]) as fn(&mut BridgeConfig),
        |config| config.limiter_keys = vec!["a b".to_owned()],
        |config| config.tokens = vec![(Profile::Limiter, "short".to_owned())],
        |config| config.tokens = vec![(Profile::Limiter, "x".repeat(1 << 20))],
        |config| config.tokens = vec![(Profile::Limiter, "nul\0token-0001".to_owned())],
        |config| config.token = String::new(),
    ] {
        let mut config = BridgeConfig::new("redis://127.0.0.1:1", "admin-token-0001");
        configure(&mut config);
        let refused = edgelimit_cli::bridge::check(&config).unwrap_err().to_string();
        assert!(refused.contains("--limiter-keys") || refused.contains("token"), "{refused}");
        assert!(!refused.contains(&"x".repeat(100)), "the error repeats the token");
    }
}
