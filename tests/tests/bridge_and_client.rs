//! The Rust REST client against the real bridge over a real Redis: exact replies, errors, recovery.

use std::time::Duration;

use edgelimit::{Command, Error, RestClient, Script, Value};
use edgelimit_tests::{Stack, TOKEN};

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
    assert!(
        matches!(&err, Error::ForeignState(m) if m.starts_with("WRONGTYPE")),
        "{err}"
    );
    let err = client.command(&cmd("NOSUCHCOMMAND")).await.unwrap_err();
    assert!(
        matches!(&err, Error::Redis { code, message } if code == "ERR" && message.starts_with("ERR unknown command")),
        "{err}"
    );
    let err = client.command(&cmd("MULTI")).await.unwrap_err();
    assert!(err.to_string().contains("/multi-exec"), "{err}");
    let err = Script::new("error('boom')")
        .run::<&str, &str>(&client, &[], &[])
        .await
        .unwrap_err();
    // A Lua runtime error: reported as it is, without the script's location.
    assert!(
        matches!(&err, Error::Redis { message, .. } if message == "ERR boom"),
        "{err}"
    );
}

#[tokio::test]
async fn pipeline_reports_each_command_and_multi_exec_is_atomic() {
    let stack = Stack::start().await;
    let client = stack.client();
    let results = client
        .pipeline(&[cmd("SET p 1"), cmd("HSET p f v"), cmd("INCR p")])
        .await
        .unwrap();
    assert_eq!(results[0].as_ref().unwrap(), &bytes("OK"));
    assert!(matches!(&results[1], Err(Error::ForeignState(m)) if m.starts_with("WRONGTYPE")));
    assert_eq!(results[2].as_ref().unwrap(), &Value::Int(2));

    let results = client
        .multi_exec(&[cmd("INCR m"), cmd("INCR m"), cmd("GET m")])
        .await
        .unwrap();
    let values: Vec<Value> = results.into_iter().map(Result::unwrap).collect();
    assert_eq!(values, vec![Value::Int(1), Value::Int(2), bytes("2")]);

    // A transaction Redis refuses as a whole runs nothing.
    let err = client
        .multi_exec(&[cmd("INCR m"), cmd("NOSUCHCOMMAND")])
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Redis { code, .. } if code == "EXECABORT"),
        "{err}"
    );
    assert_eq!(client.command(&cmd("GET m")).await.unwrap(), bytes("2"));
}

#[tokio::test]
async fn evalsha_falls_back_to_eval_once_after_a_script_flush() {
    let stack = Stack::start().await;
    let client = stack.client();
    let script = Script::new("return redis.call('INCR', KEYS[1])");
    assert_eq!(
        script.run(&client, &["{c}:n"], &[] as &[&str]).await.unwrap(),
        Value::Int(1)
    );
    client.command(&cmd("SCRIPT FLUSH")).await.unwrap();
    // EVALSHA misses (NOSCRIPT, nothing ran), EVAL runs it exactly once.
    assert_eq!(
        script.run(&client, &["{c}:n"], &[] as &[&str]).await.unwrap(),
        Value::Int(2)
    );
    let exists = client.command(&cmd("SCRIPT EXISTS").arg(script.sha1())).await.unwrap();
    assert_eq!(exists, Value::Array(vec![Value::Int(1)]));
}

#[tokio::test]
async fn upstash_shebang_scripts_run_and_keep_their_original_sha1() {
    let stack = Stack::start().await;
    let client = stack.client();
    let script = Script::new("#!lua flags=allow-key-locking\nreturn redis.call('INCR', KEYS[1])");
    let loaded = client.command(&cmd("SCRIPT LOAD").arg(script.source())).await.unwrap();
    assert_eq!(loaded.into_string().unwrap(), script.sha1());
    assert_eq!(
        script.run(&client, &["{s}:n"], &[] as &[&str]).await.unwrap(),
        Value::Int(1)
    );
    assert_eq!(
        script.run(&client, &["{s}:n"], &[] as &[&str]).await.unwrap(),
        Value::Int(2)
    );
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
        assert!(
            matches!(&err, Error::Endpoint { status: 503, message } if message.contains("unavailable")),
            "{err}"
        );
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
    assert_eq!(
        script.run::<&str, &str>(&client, &[], &[]).await.unwrap(),
        Value::Int(7)
    );
}

#[tokio::test]
async fn an_oversized_or_unparsable_body_gets_a_json_error() {
    let stack = Stack::start().await;
    let client = stack.client();
    let huge = "x".repeat(2 << 20);
    let err = client.command(&cmd("SET big").arg(huge)).await.unwrap_err();
    assert!(
        matches!(&err, Error::Endpoint { status: 413, message } if message.contains("body")),
        "{err}"
    );
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
        response
            .headers()
            .get(name)
            .map(|value| value.to_str().unwrap().to_owned())
    };
    assert_eq!(
        header(&allowed, "access-control-allow-origin").as_deref(),
        Some("http://127.0.0.1:8080")
    );
    assert_eq!(
        header(&allowed, "access-control-allow-headers").as_deref(),
        Some("authorization, content-type, upstash-encoding")
    );
    let refused = preflight("http://evil.example").await.unwrap();
    assert_eq!(refused.status(), 403);
    assert_eq!(
        refused.text().await.unwrap(),
        r#"{"error":"origin http://evil.example may not call this bridge: start it with --cors-origin http://evil.example"}"#
    );

    let call = |token: &'static str| {
        http.post(stack.url())
            .header("origin", "http://127.0.0.1:8080")
            .bearer_auth(token)
            .body(r#"["PING"]"#)
            .send()
    };
    let pong = call(TOKEN).await.unwrap();
    assert_eq!(
        header(&pong, "access-control-allow-origin").as_deref(),
        Some("http://127.0.0.1:8080")
    );
    assert_eq!(pong.text().await.unwrap(), r#"{"result":"PONG"}"#);
    let unauthorized = call("wrong").await.unwrap();
    assert_eq!(unauthorized.status(), 401);
    assert!(
        header(&unauthorized, "access-control-allow-origin").is_some(),
        "a page can read why it failed"
    );

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
        assert!(
            matches!(&results[0], Err(Error::Redis { code, .. }) if code == "ERR"),
            "{verb}"
        );
        assert_eq!(results[1].as_ref().unwrap(), &bytes("PONG"));
    }
    let err = client.command(&cmd("SCRIPT EXISTS")).await.unwrap_err();
    assert!(matches!(&err, Error::Redis { code, .. } if code == "ERR"), "{err}");
    assert_eq!(client.command(&cmd("PING")).await.unwrap(), bytes("PONG"));
}

/// POSTs `body` to `path` on the stack's bridge with the token (and `Upstash-Encoding: base64` when asked); the
/// status and the body as JSON.
async fn post_json(stack: &Stack, path: &str, body: &str, base64: bool) -> (u16, serde_json::Value) {
    let mut request = reqwest::Client::new()
        .post(format!("{}{path}", stack.url()))
        .bearer_auth(TOKEN)
        .body(body.to_owned());
    if base64 {
        request = request.header("upstash-encoding", "base64");
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}")),
    )
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
        (
            r#"return {'a', {2, redis.error_reply('ERR deep')}}"#,
            json!(["a", [2, "ERR deep"]]),
        ),
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
    for (script, text) in [
        ("return redis.error_reply('E1 x')", "E1 x"),
        ("return {err='E2'}", "E2"),
    ] {
        let command = json!(["EVAL", script, "0"]);
        let (status, body) = post_json(&stack, "/", &command.to_string(), false).await;
        assert_eq!((status, body), (400, json!({ "error": text })), "POST / {script}");
        for route in ["/pipeline", "/multi-exec"] {
            let (status, body) = post_json(&stack, route, &json!([command, ["PING"]]).to_string(), false).await;
            assert_eq!(
                (status, body),
                (200, json!([{ "error": text }, { "result": "PONG" }])),
                "{route} {script}"
            );
        }
    }
}
