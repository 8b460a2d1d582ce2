//! What an operator watches: `GET /healthz` (no token), `GET /metrics` (Prometheus text, for an admin or the
//! `--metrics-token`), and one log line per refused request, itself rate-limited so a flood cannot fill a disk.

use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use serde_json::json;

use super::links::NodeLinks;
use super::tokens::{bearer_is, check_token, digest, TokenDigest};
use super::{Bridge, BridgeError, Failure, Links, Profile};

/// Scripts stopped by `SCRIPT KILL` or `FUNCTION KILL` in this process, on any node.
pub(super) static SCRIPTS_KILLED: LazyLock<Counter> = LazyLock::new(Counter::default);

/// Refusals logged per second at most; the rest are counted in the next line.
const LOGGED_PER_SECOND: u32 = 10;

/// A request's labels. Each has few values, so the series stay few whatever clients send.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    route: &'static str,
    profile: &'static str,
    status: u16,
}

/// The bridge's metrics and its refusal log.
pub(super) struct Observer {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    redis_seconds: Histogram,
    /// HTTP connections open now (`serving.rs` counts them).
    pub(super) connections: Gauge,
    memory_in_flight: Gauge,
    metrics_token: Option<TokenDigest>,
    log_window: Mutex<LogWindow>,
    /// The last health check: when, and what it found.
    last_health: tokio::sync::Mutex<Option<(Instant, Result<(), String>)>>,
}

/// The refusals logged in the current second, and those left out.
struct LogWindow {
    started: Instant,
    logged: u32,
    left_out: u64,
}

impl Observer {
    /// Metrics for one bridge; `metrics_token` may read them besides admin tokens.
    pub(super) fn new(metrics_token: Option<&str>) -> Result<Self, BridgeError> {
        if let Some(token) = metrics_token {
            check_token(token).map_err(|e| BridgeError::Tokens(format!("--metrics-token: {e}")))?;
        }
        let mut registry = Registry::with_prefix("edgelimit_bridge");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register("requests", "HTTP requests answered, by route, token profile and status", requests.clone());
        // 100 µs to about 3.3 s.
        let redis_seconds = Histogram::new(exponential_buckets(0.0001, 2.0, 16));
        registry.register(
            "redis_round_trip_seconds",
            "Time from sending a request's commands to Redis to having every reply",
            redis_seconds.clone(),
        );
        let connections = Gauge::default();
        registry.register("connections", "HTTP connections open", connections.clone());
        let memory_in_flight = Gauge::default();
        registry.register(
            "memory_in_flight_bytes",
            "Bytes of large requests and responses held now (--max-memory-in-flight)",
            memory_in_flight.clone(),
        );
        registry.register(
            "scripts_killed",
            "Scripts or functions stopped for running past the timeout (by this process)",
            SCRIPTS_KILLED.clone(),
        );
        Ok(Observer {
            registry,
            requests,
            redis_seconds,
            connections,
            memory_in_flight,
            metrics_token: metrics_token.map(|token| digest(token.as_bytes())),
            log_window: Mutex::new(LogWindow { started: Instant::now(), logged: 0, left_out: 0 }),
            last_health: tokio::sync::Mutex::default(),
        })
    }

    /// Runs `redis`, one request's round trip to Redis, timing it.
    pub(super) async fn redis_round_trip<T>(&self, redis: impl std::future::Future<Output = T>) -> T {
        let started = Instant::now();
        let result = redis.await;
        self.redis_seconds.observe(started.elapsed().as_secs_f64());
        result
    }

    /// Logs a refused request, unless this second's share of lines is spent.
    fn log_refusal(&self, status: StatusCode, route: &str, profile: &str, reason: &str) {
        let Ok(mut window) = self.log_window.lock() else {
            return;
        };
        if window.started.elapsed() >= Duration::from_secs(1) {
            if window.left_out > 0 {
                tracing::warn!(left_out = window.left_out, "refused requests not logged in the last second");
            }
            *window = LogWindow { started: Instant::now(), logged: 0, left_out: 0 };
        }
        if window.logged >= LOGGED_PER_SECOND {
            window.left_out += 1;
            return;
        }
        window.logged += 1;
        drop(window);
        let reason: String = reason.chars().take(200).collect();
        tracing::warn!(status = status.as_u16(), route, profile, reason, "refused");
    }
}

/// Sends the bridge's log lines (refused requests) to stderr, as text or as one JSON object per line. Once per
/// process: a second call changes nothing.
pub fn init_logs(json: bool) {
    let logs = tracing_subscriber::fmt().with_writer(std::io::stderr).with_target(false);
    let _ = if json { logs.json().try_init() } else { logs.try_init() };
}

/// The route a path names, as a label: anything else is `other`, so clients cannot make new series.
fn route_of(path: &str) -> &'static str {
    match path {
        "/" => "/",
        "/pipeline" => "/pipeline",
        "/multi-exec" => "/multi-exec",
        "/healthz" => "/healthz",
        "/metrics" => "/metrics",
        _ if path.starts_with("/subscribe/") => "/subscribe",
        _ if path.starts_with("/psubscribe/") => "/psubscribe",
        _ => "other",
    }
}

/// Why a request was refused, for the log: the message of its [`Failure`].
#[derive(Clone)]
pub(super) struct Refusal(pub(super) String);

/// Counts every answer by route, profile and status, and logs the refusals (401, 403, 404, 405, 413, 429).
pub(super) async fn count(State(bridge): State<Arc<Bridge>>, request: Request, next: Next) -> Response {
    let route = route_of(request.uri().path());
    let response = next.run(request).await;
    let status = response.status();
    let profile = response.extensions().get::<Profile>().map_or("none", |profile| profile.name());
    bridge.observer.requests.get_or_create(&RequestLabels { route, profile, status: status.as_u16() }).inc();
    let refused = matches!(status.as_u16(), 401 | 403 | 404 | 405 | 413 | 429);
    if let (true, Some(Refusal(reason))) = (refused, response.extensions().get::<Refusal>()) {
        bridge.observer.log_refusal(status, route, profile, reason);
    }
    response
}

/// `GET /healthz`: 200 when Redis (every master of a cluster) answers `PING` within the Redis timeout, else 503.
/// One check a second at most, whoever asks: a flood of health checks (no token needed) queues no `PING`s before
/// other clients' commands.
pub(super) async fn healthz(State(bridge): State<Arc<Bridge>>) -> Response {
    let mut last = bridge.observer.last_health.lock().await;
    let health = match &*last {
        Some((checked, health)) if checked.elapsed() < Duration::from_secs(1) => health.clone(),
        _ => {
            let health = ping(&bridge).await;
            *last = Some((Instant::now(), health.clone()));
            health
        }
    };
    drop(last);
    match health {
        Ok(()) => Json(json!({ "status": "ok" })).into_response(),
        Err(why) => {
            (StatusCode::SERVICE_UNAVAILABLE, Json(json!({ "status": "unavailable", "error": why }))).into_response()
        }
    }
}

async fn ping(bridge: &Bridge) -> Result<(), String> {
    match &bridge.redis {
        Links::Single(links) => ping_node(links).await,
        Links::Cluster(cluster) => {
            let deadline = tokio::time::Instant::now() + cluster.timeout();
            for address in cluster.masters(deadline).await.map_err(|failed| failed.text())? {
                let node = cluster.node(&address).map_err(|failed| failed.text())?;
                ping_node(&node.links).await?;
            }
            Ok(())
        }
    }
}

async fn ping_node(links: &NodeLinks) -> Result<(), String> {
    let unavailable = |e: redis::RedisError| format!("redis at {} is unavailable: {e}", links.describe());
    let mut connection = links.admin_connection().await.map_err(unavailable)?;
    redis::cmd("PING").query_async::<String>(&mut connection).await.map_err(unavailable)?;
    Ok(())
}

/// `GET /metrics`: Prometheus text, for an admin token or the `--metrics-token`.
pub(super) async fn metrics(State(bridge): State<Arc<Bridge>>, request: Request) -> Response {
    let authorization = request.headers().get("authorization").map(|value| value.as_bytes());
    let admin = bridge.tokens.table().profile_of(authorization) == Some(Profile::Admin);
    let observer = &bridge.observer;
    let metrics_token = observer.metrics_token.as_ref().is_some_and(|token| bearer_is(token, authorization));
    if !admin && !metrics_token {
        return Failure::new(
            StatusCode::UNAUTHORIZED,
            "Unauthorized: /metrics needs an admin token or the bridge's --metrics-token as 'Authorization: Bearer <token>'",
        )
        .into_response();
    }
    observer.memory_in_flight.set(bridge.memory.in_use() as i64);
    let mut text = String::new();
    if let Err(e) = prometheus_client::encoding::text::encode(&mut text, &observer.registry) {
        return Failure::new(StatusCode::INTERNAL_SERVER_ERROR, format!("could not write the metrics: {e}"))
            .into_response();
    }
    ([(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], text).into_response()
}
