//! The REST client against endpoints that misbehave: stalls, garbage, wrong shapes. Each is a real TCP server on
//! loopback that answers with fixed bytes, so the client's own decoding is what is tested.

use std::time::{Duration, Instant};

use edgelimit::{Command, Error, RestClient};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Serves every connection with `response` (or never answers when it is `None`); returns the base URL.
async fn endpoint(response: Option<&'static str>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        loop {
            let (mut socket, _) = listener.accept().await.unwrap();
            tokio::spawn(async move {
                let mut buffer = [0u8; 4096];
                let _ = socket.read(&mut buffer).await;
                match response {
                    Some(body) => {
                        let _ = socket.write_all(body.as_bytes()).await;
                        let _ = socket.shutdown().await;
                    }
                    // Hold the connection open and say nothing: a stalled store.
                    None => tokio::time::sleep(Duration::from_secs(60)).await,
                }
            });
        }
    });
    url
}

fn http(status: &str, body: &str) -> &'static str {
    let text = format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    Box::leak(text.into_boxed_str())
}

async fn ping(url: &str) -> Error {
    let client = RestClient::new(url, "t").unwrap().with_timeout(Duration::from_millis(300)).unwrap();
    client.command(&Command::new("PING")).await.unwrap_err()
}

#[tokio::test]
async fn a_stalled_endpoint_times_out_at_the_configured_timeout() {
    let url = endpoint(None).await;
    let started = Instant::now();
    let err = ping(&url).await;
    assert!(matches!(err, Error::Timeout { after } if after == Duration::from_millis(300)), "{err}");
    assert_eq!(err.code(), "EDGELIMIT_TIMEOUT");
    // Only a lower bound: the client must not give up early. Upper bounds are for benchmarks, not tests.
    assert!(started.elapsed() >= Duration::from_millis(300));
}

#[tokio::test]
async fn malformed_replies_are_errors_not_panics() {
    for (status, body, expected) in [
        ("200 OK", "not json", "a JSON body"),
        ("200 OK", r#"{"result": 1.5}"#, "an integer that fits"),
        ("200 OK", r#"{"result": "%%%"}"#, "a base64 string"),
        ("200 OK", r#"{"unexpected": 1}"#, "\"result\" or \"error\""),
        ("200 OK", r#"{"result": {"a": 1}}"#, "a Redis reply"),
    ] {
        let err = ping(&endpoint(Some(http(status, body))).await).await;
        assert!(matches!(&err, Error::MalformedReply { what, .. } if what.contains(expected)), "{body}: {err}");
    }
}

#[tokio::test]
async fn pipeline_replies_must_hold_one_result_per_command() {
    let url = endpoint(Some(http("200 OK", r#"[{"result": "T0s="}]"#))).await;
    let client = RestClient::new(&url, "t").unwrap();
    let err = client.pipeline(&[Command::new("PING"), Command::new("PING")]).await.unwrap_err();
    assert!(matches!(&err, Error::MalformedReply { what, .. } if what.contains("2 results")), "{err}");
}

#[tokio::test]
async fn http_failures_say_what_happened() {
    let err = ping(&endpoint(Some(http("502 Bad Gateway", "upstream down"))).await).await;
    assert!(matches!(&err, Error::Endpoint { status: 502, message } if message == "upstream down"), "{err}");
    let err = ping(&endpoint(Some(http("403 Forbidden", r#"{"error":"read-only token"}"#))).await).await;
    assert!(matches!(&err, Error::Unauthorized { status: 403, message } if message == "read-only token"));

    // Nothing listens on a port that was just freed.
    let port = edgelimit_cli::redis_server::free_port().unwrap();
    let err = ping(&format!("http://127.0.0.1:{port}")).await;
    assert!(matches!(&err, Error::Transport { .. }), "{err}");
    assert!(std::error::Error::source(&err).is_some(), "a transport error keeps its cause");
}

/// Credentials in the URL are refused when the client is made, on every target: fetch refuses such a URL on every
/// call (as a transport error, which a fail-open policy absorbs), and reqwest would send them as Basic auth beside
/// the token. The message does not repeat them.
#[tokio::test]
async fn a_url_with_credentials_is_refused_when_the_client_is_made() {
    let url = endpoint(Some(http("200 OK", r#"{"result": "UE9ORw=="}"#))).await;
    let with_credentials = url.replace("http://", "http://user:secret@");
    let err = RestClient::new(&with_credentials, "t").unwrap_err();
    assert!(matches!(&err, Error::InvalidConfig(_)), "{err}");
    assert!(err.to_string().contains("holds credentials"), "{err}");
    assert!(!err.to_string().contains("secret"), "{err}");
    let client = RestClient::new(&url, "t").unwrap();
    assert_eq!(client.command(&Command::new("PING")).await.unwrap(), edgelimit::Value::Bytes(b"PONG".to_vec()));
}

/// A redirect is never followed: followed, the call would go elsewhere (as a GET, without the token) and whatever
/// answered there would be read as the store's. It is reported with what to do, and never taken for an outage.
#[tokio::test]
async fn a_redirect_is_reported_never_followed() {
    // Where the redirect points: an endpoint that would answer PONG, had the client gone there.
    let elsewhere = endpoint(Some(http("200 OK", r#"{"result": "UE9ORw=="}"#))).await;
    let text =
        format!("HTTP/1.1 302 Found\r\nlocation: {elsewhere}/\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
    let err = ping(&endpoint(Some(Box::leak(text.into_boxed_str()))).await).await;
    assert!(matches!(err, Error::Endpoint { status: 302, .. }), "{err}");
    assert!(!err.is_store_unavailable(), "{err}");
    assert!(err.to_string().contains("give its final URL"), "{err}");
}
