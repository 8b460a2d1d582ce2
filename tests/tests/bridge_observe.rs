//! What an operator watches on a bridge in front of real Redis: `GET /healthz` and `GET /metrics`.

use edgelimit::limit::{Limiter, Quota};
use edgelimit_cli::bridge::{check, BridgeConfig};
use edgelimit_tests::{Stack, LIMITER_TOKEN, TOKEN};

const METRICS_TOKEN: &str = "test-metrics-token";

/// GETs `path` from the bridge with `token` (if any): the status and the body.
async fn get(stack: &Stack, path: &str, token: Option<&str>) -> (u16, String) {
    let mut request = reqwest::Client::new().get(format!("{}{path}", stack.url()));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

/// The value of the metric line that starts with `series` (its name and labels), if there is one.
fn sample(metrics: &str, series: &str) -> Option<f64> {
    metrics.lines().find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')).map(|value| value.parse().unwrap())
}

/// `/healthz` until it answers `status` (it checks Redis once a second at most), within 10 s.
async fn health_until(stack: &Stack, status: u16) -> String {
    for _ in 0..50 {
        let (answered, body) = get(stack, "/healthz", None).await;
        if answered == status {
            return body;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    panic!("/healthz never answered {status}");
}

#[tokio::test]
async fn healthz_needs_no_token_and_says_whether_redis_answers() {
    let mut stack = Stack::start().await;
    assert_eq!(get(&stack, "/healthz", None).await, (200, r#"{"status":"ok"}"#.to_owned()));
    stack.stop_redis().await;
    let body = health_until(&stack, 503).await;
    assert!(body.contains(r#""status":"unavailable""#) && body.contains("is unavailable"), "{body}");
    stack.restart_redis().await;
    assert_eq!(health_until(&stack, 200).await, r#"{"status":"ok"}"#);
}

#[tokio::test]
async fn metrics_count_requests_by_route_profile_and_status_for_admins_and_the_metrics_token() {
    let stack = Stack::start_with(|config| config.metrics_token = Some(METRICS_TOKEN.to_owned())).await;
    let limiter = Limiter::new(
        stack.client_with(LIMITER_TOKEN),
        "observed",
        Quota::fixed_window(1, std::time::Duration::from_secs(60)).unwrap(),
    )
    .unwrap();
    assert!(limiter.limit("a", 1).await.unwrap().success);
    assert!(!limiter.limit("a", 1).await.unwrap().success);
    for _ in 0..3 {
        assert_eq!(get(&stack, "/", Some("not-a-token-at-all")).await.0, 401);
    }

    for refused in [None, Some(LIMITER_TOKEN), Some("not-a-token-at-all")] {
        let (status, body) = get(&stack, "/metrics", refused).await;
        assert_eq!(status, 401, "{body}");
        assert!(body.contains("--metrics-token"), "{body}");
    }
    let (status, metrics) = get(&stack, "/metrics", Some(METRICS_TOKEN)).await;
    assert_eq!(status, 200, "{metrics}");
    let requests = |labels: &str| sample(&metrics, &format!("edgelimit_bridge_requests_total{{{labels}}}"));
    assert_eq!(requests(r#"route="/",profile="limiter",status="200""#), Some(2.0), "{metrics}");
    assert_eq!(requests(r#"route="/",profile="none",status="401""#), Some(3.0), "{metrics}");
    assert_eq!(requests(r#"route="/metrics",profile="none",status="401""#), Some(3.0), "{metrics}");
    let round_trips = sample(&metrics, "edgelimit_bridge_redis_round_trip_seconds_count").unwrap();
    assert!(round_trips >= 2.0, "{metrics}");
    for series in [
        "edgelimit_bridge_connections",
        "edgelimit_bridge_memory_in_flight_bytes",
        "edgelimit_bridge_scripts_killed_total",
    ] {
        assert!(sample(&metrics, series).is_some(), "{series} in\n{metrics}");
    }
    assert!(metrics.ends_with("# EOF\n"), "{metrics}");
    assert_eq!(get(&stack, "/metrics", Some(TOKEN)).await.0, 200);
}

#[test]
fn a_metrics_token_that_could_not_be_a_token_is_refused_at_start() {
    let mut config = BridgeConfig::new("redis://127.0.0.1:1", TOKEN);
    config.metrics_token = Some("short".into());
    let refusal = check(&config).unwrap_err().to_string();
    assert!(refusal.starts_with("--metrics-token: "), "{refusal}");
}
