//! The Rust REST client against the real bridge over a real Redis: exact replies, errors, recovery.

use std::time::Duration;

use edgelimit::rest::ScriptCall;
use edgelimit::{Command, Error, RestClient, Script, Value};
use edgelimit_tests::{relay_stalling_on, Stack, TOKEN};

fn cmd(words: &str) -> Command {
    let mut parts = words.split(' ');
    Command::new(parts.next().unwrap()).args(parts)
}

fn bytes(text: &str) -> Value {
    Value::Bytes(text.as_bytes().to_vec())
}

#[tokio::test]
async fn every_reply_type_round_trips_exactly() {
    let stack = Stack::start().await;
    let client = stack.client();
    assert_eq!(client.command(&cmd("PING")).await.unwrap(), bytes("PONG"));
    assert_eq!(client.command(&cmd("SET greeting héllo")).await.unwrap(), bytes("OK"));
    assert_eq!(client.command(&cmd("GET greeting")).await.unwrap(), bytes("héllo"));
    assert_eq!(client.command(&cmd("GET missing")).await.unwrap(), Value::Nil);
    assert_eq!(client.command(&cmd("INCRBY n -42")).await.unwrap(), Value::Int(-42));
    client.command(&cmd("RPUSH list a b c")).await.unwrap();
    assert_eq!(
        client.command(&cmd("LRANGE list 0 -1")).await.unwrap(),
        Value::Array(vec![bytes("a"), bytes("b"), bytes("c")])
    );
    // A Lua reply mixing every type, including binary bytes that are not UTF-8 and a Lua false (nil).
    let script = Script::new("return {1, 'two', {3}, false, struct.pack('>I2', 65535)}");
    assert_eq!(
        script.run::<&str, &str>(&client, &[], &[]).await.unwrap(),
        Value::Array(vec![
            Value::Int(1),
            bytes("two"),
            Value::Array(vec![Value::Int(3)]),
            Value::Nil,
            Value::Bytes(vec![0xff, 0xff]),
        ])
    );
}

#[tokio::test]
async fn command_errors_are_classified_with_redis_text() {
    let stack = Stack::start().await;
    let client = stack.client();
    client.command(&cmd("SET s x")).await.unwrap();
    let err = client.command(&cmd("LPUSH s y")).await.unwrap_err();
    assert!(matches!(&err, Error::ForeignState(m) if m.starts_with("WRONGTYPE")), "{err}");
    let err = client.command(&cmd("NOSUCHCOMMAND")).await.unwrap_err();
    assert!(
        matches!(&err, Error::Redis { code, message } if code == "ERR" && message.starts_with("ERR unknown command")),
        "{err}"
    );
    let err = client.command(&cmd("MULTI")).await.unwrap_err();
    assert!(err.to_string().contains("/multi-exec"), "{err}");
    let err = Script::new("error('boom')").run::<&str, &str>(&client, &[], &[]).await.unwrap_err();
    // A Lua runtime error: reported as it is, without the script's location.
    assert!(matches!(&err, Error::Redis { message, .. } if message == "ERR boom"), "{err}");
}

#[tokio::test]
async fn pipeline_reports_each_command_and_multi_exec_is_atomic() {
    let stack = Stack::start().await;
    let client = stack.client();
    let results = client.pipeline(&[cmd("SET p 1"), cmd("HSET p f v"), cmd("INCR p")]).await.unwrap();
    assert_eq!(results[0].as_ref().unwrap(), &bytes("OK"));
    assert!(matches!(&results[1], Err(Error::ForeignState(m)) if m.starts_with("WRONGTYPE")));
    assert_eq!(results[2].as_ref().unwrap(), &Value::Int(2));

    let results = client.multi_exec(&[cmd("INCR m"), cmd("INCR m"), cmd("GET m")]).await.unwrap();
    let values: Vec<Value> = results.into_iter().map(Result::unwrap).collect();
    assert_eq!(values, vec![Value::Int(1), Value::Int(2), bytes("2")]);

    // A transaction Redis refuses as a whole runs nothing.
    let err = client.multi_exec(&[cmd("INCR m"), cmd("NOSUCHCOMMAND")]).await.unwrap_err();
    assert!(matches!(&err, Error::Redis { code, .. } if code == "EXECABORT"), "{err}");
    assert_eq!(client.command(&cmd("GET m")).await.unwrap(), bytes("2"));
}

#[tokio::test]
async fn evalsha_falls_back_to_eval_once_after_a_script_flush() {
    let stack = Stack::start().await;
    let client = stack.client();
    let script = Script::new("return redis.call('INCR', KEYS[1])");
    assert_eq!(script.run(&client, &["{c}:n"], &[] as &[&str]).await.unwrap(), Value::Int(1));
    client.command(&cmd("SCRIPT FLUSH")).await.unwrap();
    // EVALSHA misses (NOSCRIPT, nothing ran), EVAL runs it exactly once.
    assert_eq!(script.run(&client, &["{c}:n"], &[] as &[&str]).await.unwrap(), Value::Int(2));
    let exists = client.command(&cmd("SCRIPT EXISTS").arg(script.sha1())).await.unwrap();
    assert_eq!(exists, Value::Array(vec![Value::Int(1)]));
}

#[tokio::test]
async fn a_resend_after_noscript_that_fails_is_the_error_of_the_calls_it_carried_only() {
    // Two calls in one pipeline: the first script is in Redis's cache, the second is not, and its resend (an EVAL,
    // which carries the script's text) never gets an answer. The first call's reply came with the first round trip
    // and is known: a caller may act on it (src/limit/reserved/several.rs keeps a decision whose reservation failed).
    let stack = Stack::start().await;
    let cached = Script::new("return redis.call('INCR', KEYS[1])");
    let uncached = Script::new("return 'never answered' -- stall-marker");
    assert_eq!(cached.run(&stack.client(), &["{r}:n"], &[] as &[&str]).await.unwrap(), Value::Int(1));
    let relay = relay_stalling_on(stack.url(), b"stall-marker").await;
    let client =
        RestClient::new(&relay, TOKEN).and_then(|client| client.with_timeout(Duration::from_millis(300))).unwrap();
    let call = |script| ScriptCall { script, keys: vec!["{r}:n".into()], args: Vec::new() };
    let replies = Script::run_many(&client, &[call(&cached), call(&uncached)]).await.unwrap();
    assert_eq!(replies[0].as_ref().unwrap(), &Value::Int(2));
    assert!(matches!(&replies[1], Err(Error::Timeout { .. })), "{:?}", replies[1]);
    // It never ran: the stalled EVAL did not reach Redis.
    let exists = stack.client().command(&cmd("SCRIPT EXISTS").arg(uncached.sha1())).await.unwrap();
    assert_eq!(exists, Value::Array(vec![Value::Int(0)]));
}

#[tokio::test]
async fn upstash_shebang_scripts_run_and_keep_their_original_sha1() {
    let stack = Stack::start().await;
    let client = stack.client();
    let script = Script::new("#!lua flags=allow-key-locking\nreturn redis.call('INCR', KEYS[1])");
    let loaded = client.command(&cmd("SCRIPT LOAD").arg(script.source())).await.unwrap();
    assert_eq!(loaded.into_string().unwrap(), script.sha1());
    assert_eq!(script.run(&client, &["{s}:n"], &[] as &[&str]).await.unwrap(), Value::Int(1));
    assert_eq!(script.run(&client, &["{s}:n"], &[] as &[&str]).await.unwrap(), Value::Int(2));
}

#[tokio::test]
async fn a_wrong_token_is_unauthorized() {
    let stack = Stack::start().await;
    let client = RestClient::new(stack.url(), "wrong").unwrap();
    let err = client.command(&cmd("PING")).await.unwrap_err();
    assert!(matches!(err, Error::Unauthorized { status: 401, .. }), "{err}");
    assert_eq!(err.code(), "EDGELIMIT_AUTH");
    assert_ne!(TOKEN, "wrong");
}

#[tokio::test]
async fn redis_down_gives_clean_errors_then_the_bridge_recovers_by_itself() {
    let mut stack = Stack::start().await;
    let client = stack.client();
    client.command(&cmd("SET before restart")).await.unwrap();
    stack.stop_redis().await;
    for _ in 0..3 {
        let err = client.command(&cmd("PING")).await.unwrap_err();
        assert!(matches!(&err, Error::Endpoint { status: 503, message } if message.contains("unavailable")), "{err}");
    }
    let err = client.pipeline(&[cmd("PING")]).await.unwrap_err();
    assert!(matches!(err, Error::Endpoint { status: 503, .. }), "{err}");
    stack.restart_redis().await;
    // The first request after the restart may still meet the old, broken socket; recovery must follow promptly.
    let mut recovered = false;
    for _ in 0..20 {
        if client.command(&cmd("PING")).await.is_ok() {
            recovered = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(recovered, "the bridge did not reconnect to the restarted Redis");
    // A restarted, disk-less Redis is empty: the script cache too, which EVALSHA's fallback handles.
    assert_eq!(client.command(&cmd("GET before")).await.unwrap(), Value::Nil);
    let script = Script::new("return 7");
    assert_eq!(script.run::<&str, &str>(&client, &[], &[]).await.unwrap(), Value::Int(7));
}

#[tokio::test]
async fn an_oversized_or_unparsable_body_gets_a_json_error() {
    let stack = Stack::start().await;
    let client = stack.client();
    let huge = "x".repeat(2 << 20);
    let err = client.command(&cmd("SET big").arg(huge)).await.unwrap_err();
    assert!(matches!(&err, Error::Endpoint { status: 413, message } if message.contains("body")), "{err}");
}

#[tokio::test]
async fn the_bridge_shuts_down_gracefully() {
    let mut stack = Stack::start().await;
    let client = stack.client();
    client.command(&cmd("PING")).await.unwrap();
    stack.stop_bridge().await;
    let err = client.command(&cmd("PING")).await.unwrap_err();
    assert_eq!(err.code(), "EDGELIMIT_TRANSPORT", "{err}");
}

#[tokio::test]
async fn browsers_may_call_only_from_the_listed_origins() {
    let stack = Stack::start_with(|config| {
        config.cors_origins = edgelimit_cli::bridge::CorsOrigins(vec!["http://127.0.0.1:8080".into()]);
    })
    .await;
    let http = reqwest::Client::new();
    let preflight = |origin: &'static str| {
        http.request(reqwest::Method::OPTIONS, stack.url())
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header("access-control-request-headers", "authorization, content-type")
            .send()
    };
    let allowed = preflight("http://127.0.0.1:8080").await.unwrap();
    assert_eq!(allowed.status(), 204);
    let header = |response: &reqwest::Response, name: &str| {
        response.headers().get(name).map(|value| value.to_str().unwrap().to_owned())
    };
    assert_eq!(header(&allowed, "access-control-allow-origin").as_deref(), Some("http://127.0.0.1:8080"));
    assert_eq!(
        header(&allowed, "access-control-allow-headers").as_deref(),
        Some("authorization, content-type, upstash-encoding, edgelimit-deadline-ms")
    );
    let refused = preflight("http://evil.example").await.unwrap();
    assert_eq!(refused.status(), 403);
    assert_eq!(
        refused.text().await.unwrap(),
        r#"{"error":"origin http://evil.example may not call this bridge: start it with --cors-origin http://evil.example"}"#
    );

    let call = |token: &'static str| {
        http.post(stack.url()).header("origin", "http://127.0.0.1:8080").bearer_auth(token).body(r#"["PING"]"#).send()
    };
    let pong = call(TOKEN).await.unwrap();
    assert_eq!(header(&pong, "access-control-allow-origin").as_deref(), Some("http://127.0.0.1:8080"));
    assert_eq!(pong.text().await.unwrap(), r#"{"result":"PONG"}"#);
    let unauthorized = call("wrong").await.unwrap();
    assert_eq!(unauthorized.status(), 401);
    assert!(header(&unauthorized, "access-control-allow-origin").is_some(), "a page can read why it failed");

    let no_cors = Stack::start().await;
    let plain = http
        .request(reqwest::Method::OPTIONS, no_cors.url())
        .header("origin", "http://127.0.0.1:8080")
        .send()
        .await
        .unwrap();
    assert_eq!(plain.status(), 403, "no origins listed: no browser may call");
}

#[tokio::test]
async fn a_script_command_without_its_script_is_refused_by_redis_not_a_crash() {
    // Each once indexed past the end of the command in the bridge: a panic, which aborts a release build.
    let stack = Stack::start().await;
    let client = stack.client();
    for verb in ["EVAL", "EVALSHA", "eval_ro", "evalsha_ro", "SCRIPT"] {
        let err = client.command(&Command::new(verb)).await.unwrap_err();
        assert!(
            matches!(&err, Error::Redis { code, message } if code == "ERR" && message.contains("wrong number")),
            "{verb}: {err}"
        );
        let results = client.pipeline(&[Command::new(verb), cmd("PING")]).await.unwrap();
        assert!(matches!(&results[0], Err(Error::Redis { code, .. }) if code == "ERR"), "{verb}");
        assert_eq!(results[1].as_ref().unwrap(), &bytes("PONG"));
    }
    let err = client.command(&cmd("SCRIPT EXISTS")).await.unwrap_err();
    assert!(matches!(&err, Error::Redis { code, .. } if code == "ERR"), "{err}");
    assert_eq!(client.command(&cmd("PING")).await.unwrap(), bytes("PONG"));
}

/// POSTs `body` to `path` on the stack's bridge with the token (and `Upstash-Encoding: base64` when asked); the
/// status and the body as JSON.
async fn post_json(stack: &Stack, path: &str, body: &str, base64: bool) -> (u16, serde_json::Value) {
    let mut request =
        reqwest::Client::new().post(format!("{}{path}", stack.url())).bearer_auth(TOKEN).body(body.to_owned());
    if base64 {
        request = request.header("upstash-encoding", "base64");
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}")))
}

#[tokio::test]
async fn an_error_nested_in_a_reply_is_its_text_in_place_on_every_route() {
    use serde_json::json;
    let stack = Stack::start().await;
    // Lua tables holding errors: redis.error_reply's (code and detail), a bare {err=…} (a code alone, once rendered
    // `E2 "E2"` by POST /), and one nested two levels deep. Redis fails only that element, not the command.
    let scripts = [
        (r#"return {1, redis.error_reply('E1 x')}"#, json!([1, "E1 x"])),
        (r#"return {1, {err='E2'}}"#, json!([1, "E2"])),
        (r#"return {'a', {2, redis.error_reply('ERR deep')}}"#, json!(["a", [2, "ERR deep"]])),
    ];
    for (script, expected) in scripts {
        let command = json!(["EVAL", script, "0"]);
        let (status, body) = post_json(&stack, "/", &command.to_string(), false).await;
        assert_eq!((status, body), (200, json!({ "result": expected })), "POST / {script}");
        let batch = json!([command, ["PING"]]).to_string();
        for route in ["/pipeline", "/multi-exec"] {
            let (status, body) = post_json(&stack, route, &batch, false).await;
            assert_eq!(
                (status, body),
                (200, json!([{ "result": expected }, { "result": "PONG" }])),
                "{route} {script}"
            );
        }
    }
    // With Upstash-Encoding: base64 the error's text is encoded like every other string ("E1 x" is "RTEgeA=="), so
    // that the clients' decoding gives it back; an unencoded "ERR x" would be decoded into garbage.
    let command = json!(["EVAL", "return {1, redis.error_reply('E1 x')}", "0"]);
    let (_, body) = post_json(&stack, "/", &command.to_string(), true).await;
    assert_eq!(body, json!({ "result": [1, "RTEgeA=="] }));
    for route in ["/pipeline", "/multi-exec"] {
        let (_, body) = post_json(&stack, route, &json!([command]).to_string(), true).await;
        assert_eq!(body, json!([{ "result": [1, "RTEgeA=="] }]), "{route}");
    }
    // An error that is the command's own reply is the command's error, with the same text on every route: on POST /
    // the request's (HTTP 400), in a batch that command's item (a transaction's failed command included).
    for (script, text) in [("return redis.error_reply('E1 x')", "E1 x"), ("return {err='E2'}", "E2")] {
        let command = json!(["EVAL", script, "0"]);
        let (status, body) = post_json(&stack, "/", &command.to_string(), false).await;
        assert_eq!((status, body), (400, json!({ "error": text })), "POST / {script}");
        for route in ["/pipeline", "/multi-exec"] {
            let (status, body) = post_json(&stack, route, &json!([command, ["PING"]]).to_string(), false).await;
            assert_eq!((status, body), (200, json!([{ "error": text }, { "result": "PONG" }])), "{route} {script}");
        }
    }
}

/// How many subscribers Redis counts on `channel` (`PUBSUB NUMSUB`).
async fn subscribers(client: &RestClient, channel: &str) -> i64 {
    match client.command(&cmd("PUBSUB NUMSUB").arg(channel)).await.unwrap() {
        Value::Array(reply) if reply.len() == 2 => match reply[1] {
            Value::Int(count) => count,
            ref other => panic!("PUBSUB NUMSUB count {other:?}"),
        },
        other => panic!("PUBSUB NUMSUB answered {other:?}"),
    }
}

/// Polls `subscribers` until it is `expected`, for at most 10 s.
async fn until_subscribers(client: &RestClient, channel: &str, expected: i64) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let count = subscribers(client, channel).await;
        if count == expected {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{channel} still has {count} subscribers, not {expected}, after 10 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// An open `POST /subscribe/…` or `/psubscribe/…` stream and the text read from it so far.
struct EventStream {
    response: reqwest::Response,
    text: String,
}

impl EventStream {
    async fn open(stack: &Stack, path: &str) -> EventStream {
        let response = reqwest::Client::new()
            .post(format!("{}{path}", stack.url()))
            .bearer_auth(TOKEN)
            .header("accept", "text/event-stream")
            .body("[]")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{path}");
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        EventStream { response, text: String::new() }
    }

    /// Reads until the text so far ends with `tail`; the text, or a failure after 10 s or at the stream's end.
    async fn until(&mut self, tail: &str) -> &str {
        let read = async {
            while !self.text.ends_with(tail) {
                match self.response.chunk().await.unwrap() {
                    Some(chunk) => self.text.push_str(std::str::from_utf8(&chunk).unwrap()),
                    None => panic!("the stream ended without {tail:?}; it said {:?}", self.text),
                }
            }
        };
        if tokio::time::timeout(Duration::from_secs(10), read).await.is_err() {
            panic!("no {tail:?} within 10 s; the stream said {:?}", self.text);
        }
        &self.text
    }

    /// Reads to the stream's end (at most 10 s); the whole text.
    async fn read_to_end(mut self) -> String {
        let read = async {
            while let Some(chunk) = self.response.chunk().await.unwrap() {
                self.text.push_str(std::str::from_utf8(&chunk).unwrap());
            }
        };
        tokio::time::timeout(Duration::from_secs(10), read)
            .await
            .unwrap_or_else(|_| panic!("the stream did not end within 10 s: {:?}", self.text));
        self.text
    }
}

#[tokio::test]
async fn subscribe_streams_upstash_events_and_a_client_that_leaves_leaves_no_subscription() {
    let stack = Stack::start().await;
    let client = stack.client();
    let mut channels = EventStream::open(&stack, "/subscribe/news/a%2Fb%2C%20c").await;
    channels.until("data: subscribe,news,1\n\ndata: subscribe,a/b, c,2\n\n").await;
    let mut patterns = EventStream::open(&stack, "/psubscribe/ne*").await;
    patterns.until("data: psubscribe,ne*,1\n\n").await;
    assert_eq!(subscribers(&client, "news").await, 1);
    assert_eq!(subscribers(&client, "a/b, c").await, 1);

    let publish = |channel: &str, payload: &str| {
        let command = cmd("PUBLISH").arg(channel).arg(payload);
        let client = &client;
        async move { client.command(&command).await }
    };
    assert_eq!(publish("news", "héllo, wörld").await.unwrap(), Value::Int(2));
    assert_eq!(publish("a/b, c", "{\"n\":[1,2]}").await.unwrap(), Value::Int(1));
    assert_eq!(publish("news", "two\nlines").await.unwrap(), Value::Int(2));
    channels
        .until("data: message,news,héllo, wörld\n\ndata: message,a/b, c,{\"n\":[1,2]}\n\ndata: message,news,two\ndata: lines\n\n")
        .await;
    patterns.until("data: pmessage,ne*,news,héllo, wörld\n\ndata: pmessage,ne*,news,two\ndata: lines\n\n").await;

    // The client goes away: the bridge closes that subscription's Redis connection, and only that one.
    drop(channels);
    until_subscribers(&client, "news", 0).await;
    assert_eq!(subscribers(&client, "a/b, c").await, 0);
    assert_eq!(publish("news", "still heard").await.unwrap(), Value::Int(1));
    patterns.until("data: pmessage,ne*,news,still heard\n\n").await;
    drop(patterns);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while client.command(&cmd("PUBSUB NUMPAT")).await.unwrap() != Value::Int(0) {
        assert!(tokio::time::Instant::now() < deadline, "the pattern subscription outlived its client");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn subscribe_refuses_what_it_cannot_serve_with_a_json_error() {
    let mut stack = Stack::start().await;
    let (status, body) = post_json(&stack, "/subscribe/a%zz", "[]", false).await;
    assert_eq!(status, 400);
    assert!(body["error"].as_str().unwrap().contains("%25"), "{body}");
    let (status, body) = post_json(&stack, "/psubscribe/a//b", "[]", false).await;
    assert_eq!(status, 400);
    assert!(body["error"].as_str().unwrap().contains("empty pattern"), "{body}");
    let unauthorized = reqwest::Client::new().post(format!("{}/subscribe/news", stack.url())).send().await.unwrap();
    assert_eq!(unauthorized.status(), 401);
    // Pub/sub needs an admin token: the other profiles' Redis users hold no channel, and limiter tokens run scripts.
    for (token, profile) in [(edgelimit_tests::LIMITER_TOKEN, "limiter"), (edgelimit_tests::READONLY_TOKEN, "readonly")]
    {
        for (route, verb) in [("/subscribe/news", "subscribe"), ("/psubscribe/n*", "psubscribe")] {
            let refused =
                reqwest::Client::new().post(format!("{}{route}", stack.url())).bearer_auth(token).send().await.unwrap();
            assert_eq!(refused.status(), 403, "{profile} {route}");
            assert_eq!(
                refused.text().await.unwrap(),
                format!(
                    r#"{{"error":"NOPERM this token's profile ({profile}) may not {verb}: pub/sub needs an admin token"}}"#
                )
            );
        }
    }
    stack.stop_redis().await;
    let (status, body) = post_json(&stack, "/subscribe/news", "[]", false).await;
    assert_eq!(status, 503, "{body}");
    assert!(body["error"].as_str().unwrap().contains("unavailable"), "{body}");
}

#[tokio::test]
async fn a_subscription_ends_with_an_error_event_when_redis_goes_away_or_the_bridge_stops() {
    let mut stack = Stack::start().await;
    let mut events = EventStream::open(&stack, "/subscribe/news").await;
    events.until("data: subscribe,news,1\n\n").await;
    stack.stop_redis().await;
    let text = events.read_to_end().await;
    assert!(
        text.ends_with("\n\nevent: error\ndata: ERR the subscription's connection to Redis ended (Redis went away, or sent a message above the bridge's reply cap, --max-reply-bytes): subscribe again\n\n"),
        "{text:?}"
    );

    // Open streams do not hold up a graceful shutdown: they end, saying why.
    stack.restart_redis().await;
    let client = stack.client();
    let mut reconnected = false;
    for _ in 0..100 {
        if client.command(&cmd("PING")).await.is_ok() {
            reconnected = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(reconnected, "the bridge did not reach the restarted Redis");
    let mut events = EventStream::open(&stack, "/subscribe/news").await;
    events.until("data: subscribe,news,1\n\n").await;
    tokio::time::timeout(Duration::from_secs(10), stack.stop_bridge())
        .await
        .expect("the bridge stops within 10 s with a stream open");
    let text = events.read_to_end().await;
    assert!(
        text.ends_with("\n\nevent: error\ndata: ERR the bridge is shutting down: subscribe again once it is back\n\n"),
        "{text:?}"
    );
}

#[tokio::test]
async fn a_message_above_the_reply_cap_ends_the_subscription_unbuffered() {
    let stack = Stack::start_with(|config| config.max_reply_bytes = 4096).await;
    let client = stack.client();
    let mut events = EventStream::open(&stack, "/subscribe/big").await;
    events.until("data: subscribe,big,1\n\n").await;
    client.command(&cmd("PUBLISH big small")).await.unwrap();
    events.until("data: message,big,small\n\n").await;
    client.command(&cmd("PUBLISH big").arg("x".repeat(5000))).await.unwrap();
    let text = events.read_to_end().await;
    assert!(!text.contains("xxx"), "the large message was not passed on");
    assert!(text.ends_with("reply cap, --max-reply-bytes): subscribe again\n\n"), "{text:?}");
    until_subscribers(&client, "big", 0).await;
}

#[tokio::test]
async fn a_subscriber_that_reads_too_slowly_is_dropped_not_buffered() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // The reply cap is also the most bytes of events that may wait for one subscriber.
    let stack = Stack::start_with(|config| config.max_reply_bytes = 16 * 1024).await;
    let client = stack.client();
    let address: std::net::SocketAddr = stack.url().trim_start_matches("http://").parse().unwrap();
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    // A small receive window, so that the kernel's buffers hold little of what the bridge sends.
    socket.set_recv_buffer_size(4096).unwrap();
    let mut stream = socket.connect(address).await.unwrap();
    let request = format!(
        "POST /subscribe/firehose HTTP/1.1\r\nHost: bridge\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: 0\r\n\
         Connection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    while !String::from_utf8_lossy(&head).contains("data: subscribe,firehose,1") {
        let mut byte = [0u8; 256];
        let n = stream.read(&mut byte).await.unwrap();
        assert!(n > 0, "the stream ended: {}", String::from_utf8_lossy(&head));
        head.extend_from_slice(&byte[..n]);
    }
    // The subscriber reads nothing more; the publisher goes on until the bridge gives up on it.
    let payload = "y".repeat(8 * 1024);
    let batch: Vec<Command> = (0..64).map(|_| cmd("PUBLISH firehose").arg(payload.as_str())).collect();
    let mut batches = 0;
    while subscribers(&client, "firehose").await == 1 {
        batches += 1;
        assert!(
            batches <= 200,
            "after 100 MB the slow subscriber was still subscribed: nothing bounds what waits for it"
        );
        client.pipeline(&batch).await.unwrap();
    }
    // What reached it ends with the reason it was dropped.
    let mut rest = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut rest))
        .await
        .expect("the stream ends once the subscriber is dropped")
        .unwrap();
    let text = String::from_utf8_lossy(&rest);
    assert!(
        text.contains("event: error\ndata: ERR this subscriber reads too slowly"),
        "{} bytes, ending {:?}",
        text.len(),
        &text[text.len().saturating_sub(300)..]
    );
}
