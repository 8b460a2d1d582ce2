//! The Upstash-compatible REST bridge: HTTP+JSON in front of a real Redis.
//!
//! | route | body | reply |
//! |---|---|---|
//! | `POST /` | `["CMD", arg…]` | `{"result": …}`, or HTTP 400 `{"error": "ERR …"}` |
//! | `POST /pipeline` | `[["CMD", …], …]` | HTTP 200 `[{"result": …} or {"error": …}, …]` |
//! | `POST /multi-exec` | the same | the same, run inside MULTI/EXEC |
//! | `POST /subscribe/<channel>`, `/psubscribe/<pattern>` | ignored | server-sent events (`subscribe.rs`) |
//! | `GET /healthz`, `GET /metrics` | | Redis's health (no token), Prometheus text (`observe.rs`) |
//!
//! Every other request needs `Authorization: Bearer <token>`; the token's [`profile`] decides what it may run (`limiter`
//! tokens only edgelimit's scripts, see [`fence`]), each profile as its own Redis ACL user. When Redis is out of reach
//! the answer is HTTP 503 and the bridge keeps reconnecting. A handler's panic is that request's HTTP 500 (with
//! `--profile bridge`, which unwinds); a reply above [`BridgeConfig::max_reply_bytes`] is dropped as it streams in.
//! In front of a Redis Cluster (`redis+cluster://…`) commands are routed by slot (`cluster.rs`).

mod cluster;
mod clustered;
mod cors;
mod fair_share;
pub mod fence;
mod in_process;
mod json;
mod key_pattern;
mod links;
mod memory_budget;
mod observe;
mod policy;
pub mod profile;
mod redis_link;
mod reply_cap;
mod routing;
mod script_bodies;
pub mod script_kill;
pub mod serving;
mod shared_budget;
mod subscribe;
pub mod tokens;
mod upstash_scripts;
mod write_batch;

use std::any::Any;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use serde_json::{json, Value as JsonValue};
use tower_http::catch_panic::CatchPanicLayer;

pub use self::cluster::SCHEME as CLUSTER_SCHEME;
pub use self::cors::CorsOrigins;
use self::fair_share::{off_runtime, FairShare, Lane, Share, BULK_COMMANDS};
pub use self::in_process::InProcessBridge;
use self::json::Words;
use self::links::{LinkConfig, Links};
pub use self::memory_budget::BODY_READ_TIMEOUT;
pub use self::observe::init_logs;
pub use self::profile::{Profile, RedisAcl};
use self::reply_cap::over_budget;
pub use self::reply_cap::REPLY_TOO_LARGE;
use self::script_kill::ScriptKiller;
use self::tokens::{TokenDigest, TokenTable, Tokens};
use self::upstash_scripts::ScriptAliases;

/// How the bridge is set up.
#[derive(Debug, Clone)]
pub struct BridgeConfig {
    /// Where Redis is, e.g. `redis://127.0.0.1:6379`, or a cluster's seed nodes,
    /// `redis+cluster://[user:password@]host:port[,host:port…]`.
    pub redis_url: String,
    /// An admin token (`--token`); empty when the tokens come from [`BridgeConfig::tokens`] or the tokens file.
    pub token: String,
    /// More tokens, each with its profile.
    pub tokens: Vec<(Profile, String)>,
    /// A file of tokens, read again whenever it changes ([`tokens`] has the format).
    pub tokens_file: Option<PathBuf>,
    /// Whether each profile runs as its own Redis ACL user ([`RedisAcl::Provision`], the default).
    pub redis_acl: RedisAcl,
    /// The key patterns the `limiter` profile's Redis user may touch (Redis ACL `~pattern` syntax).
    pub limiter_keys: Vec<String>,
    /// Largest request body accepted; larger ones get HTTP 413.
    pub max_request_bytes: usize,
    /// The largest Redis reply passed on, in RESP bytes; a larger one is discarded as it arrives (HTTP 413, though
    /// the command ran). The replies of one `/pipeline` or `/multi-exec` share it.
    pub max_reply_bytes: u64,
    /// The most bytes held at once for large requests and responses, all requests together (see [`memory_budget`]);
    /// a request that finds it taken gets HTTP 429, one larger than all of it HTTP 413.
    pub max_memory_in_flight: u64,
    /// Bound on connecting to Redis and on each reply; on a cluster also on one request's retries.
    pub redis_timeout: Duration,
    /// Web page origins allowed to call the bridge from a browser (`*`: any); none by default.
    pub cors_origins: CorsOrigins,
    /// A token that may read `/metrics` and nothing else (admin tokens may too).
    pub metrics_token: Option<String>,
    /// The most HTTP connections open at once; past it new ones wait in the listen backlog.
    pub max_connections: usize,
    /// The largest limit a `limiter` token may give a sliding log or a concurrency limit ([`fence::MAX_LOG_LIMIT`]).
    pub max_log_limit: u64,
}

impl BridgeConfig {
    /// One admin token and the defaults: 1 MiB bodies, 8 MiB replies, 2 s Redis timeout, an ACL user per profile.
    pub fn new(redis_url: impl Into<String>, token: impl Into<String>) -> Self {
        BridgeConfig {
            redis_url: redis_url.into(),
            token: token.into(),
            tokens: Vec::new(),
            tokens_file: None,
            redis_acl: RedisAcl::default(),
            limiter_keys: profile::DEFAULT_LIMITER_KEYS.map(str::to_owned).to_vec(),
            max_request_bytes: 1 << 20,
            max_reply_bytes: DEFAULT_MAX_REPLY_BYTES,
            max_memory_in_flight: DEFAULT_MAX_MEMORY_IN_FLIGHT,
            redis_timeout: Duration::from_secs(2),
            cors_origins: CorsOrigins::default(),
            metrics_token: None,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_log_limit: fence::MAX_LOG_LIMIT,
        }
    }
}

/// The default reply cap, 8 MiB. As JSON a reply may grow sixfold (`\u0001`), so one reply costs at most some 60 MB.
pub const DEFAULT_MAX_REPLY_BYTES: u64 = 8 << 20;

/// The default bound on open connections: each holds a file descriptor (raise `ulimit -n` above it).
pub const DEFAULT_MAX_CONNECTIONS: usize = 4096;

/// The default memory in flight, 256 MiB: 25 default-sized requests being parsed, or five of the largest replies.
pub const DEFAULT_MAX_MEMORY_IN_FLIGHT: u64 = 256 << 20;

/// Why the bridge could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BridgeError {
    /// No token, or one that cannot be used.
    #[error("{0}")]
    Tokens(String),
    /// The Redis URL could not be parsed.
    #[error("invalid Redis URL {url:?}: {source}; expected e.g. redis://127.0.0.1:6379")]
    RedisUrl {
        /// The URL as given.
        url: String,
        /// The parser's complaint.
        #[source]
        source: redis::RedisError,
    },
    /// Serving HTTP failed.
    #[error("the HTTP server failed: {0}")]
    Serve(#[from] std::io::Error),
    /// A limit was set to a value the bridge cannot use.
    #[error("{0}")]
    Limit(String),
}

struct Bridge {
    redis: Links,
    acl: RedisAcl,
    tokens: Arc<Tokens>,
    /// One Redis's `SCRIPT KILL`; each node of a cluster has its own ([`cluster::Node`]).
    killer: Option<Arc<ScriptKiller>>,
    aliases: ScriptAliases,
    max_reply_bytes: u64,
    subscriptions: subscribe::Subscriptions,
    /// The `limiter` profile's key patterns, which the fence holds its scripts' keys to.
    limiter_keys: Vec<String>,
    max_log_limit: u64,
    memory: Arc<memory_budget::MemoryBudget>,
    fair_share: FairShare,
    observer: observe::Observer,
}

impl Bridge {
    fn new(
        config: &BridgeConfig,
        redis: Links,
        killer: Option<Arc<ScriptKiller>>,
        tokens: Arc<Tokens>,
    ) -> Result<Bridge, BridgeError> {
        Ok(Bridge {
            killer,
            redis,
            acl: config.redis_acl,
            tokens,
            aliases: ScriptAliases::default(),
            max_reply_bytes: config.max_reply_bytes,
            subscriptions: subscribe::Subscriptions::new(config),
            limiter_keys: config.limiter_keys.clone(),
            max_log_limit: config.max_log_limit,
            memory: Arc::new(memory_budget::MemoryBudget::new(config.max_memory_in_flight, config.max_request_bytes)),
            fair_share: FairShare::new(),
            observer: observe::Observer::new(config.metrics_token.as_deref())?,
        })
    }
}

/// Serves the bridge on `listener` until `shutdown` completes, then finishes the requests in flight and returns.
pub async fn serve(
    listener: tokio::net::TcpListener,
    config: BridgeConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), BridgeError> {
    let tokens = Arc::new(tokens_of(&config)?);
    check_limits(&config)?;
    let redis = links_of(&config)?;
    if cfg!(panic = "abort") {
        eprintln!(
            "edgelimit bridge: WARNING: built with panic = \"abort\" (cargo --release): a bug that panics on one \
             request would end the bridge for every client; build it with `cargo build --profile bridge`"
        );
    }
    let killer = match &redis {
        Links::Single(links) => Some(Arc::new(ScriptKiller::new(links.admin_info().clone(), config.redis_timeout))),
        Links::Cluster(cluster) => {
            tokio::spawn(cluster::keep_refreshing(Arc::downgrade(cluster)));
            None
        }
    };
    let bridge = Arc::new(Bridge::new(&config, redis, killer, tokens.clone())?);
    let reloading = tokio::spawn(tokens.keep_reloading());
    tokio::spawn(check_redis_at_start(bridge.clone()));
    let app = app(routes(), bridge.clone(), &config);
    let connections =
        serving::Connections { open: bridge.observer.connections.clone(), max: Some(config.max_connections) };
    // Event streams never end by themselves; close them so the graceful shutdown completes.
    let shutdown = async move {
        shutdown.await;
        bridge.subscriptions.close_all();
    };
    let served = serving::serve(listener, app, connections, shutdown).await;
    reloading.abort();
    Ok(served?)
}

/// Checks what [`serve`] would refuse in `config` (its tokens, its limits), without serving.
pub fn check(config: &BridgeConfig) -> Result<(), BridgeError> {
    links_of(config)?;
    tokens_of(config)?;
    observe::Observer::new(config.metrics_token.as_deref())?;
    check_limits(config)
}

/// The links to the Redis of `config`, its URL checked; nothing is connected yet.
fn links_of(config: &BridgeConfig) -> Result<Links, BridgeError> {
    Links::new(&LinkConfig {
        redis_url: &config.redis_url,
        acl: config.redis_acl,
        limiter_keys: &config.limiter_keys,
        timeout: config.redis_timeout,
        max_reply_bytes: config.max_reply_bytes,
    })
    .map_err(|source| BridgeError::RedisUrl { url: config.redis_url.clone(), source })
}

fn check_limits(config: &BridgeConfig) -> Result<(), BridgeError> {
    for pattern in &config.limiter_keys {
        if let Some(why) = key_pattern::problem(pattern) {
            return Err(BridgeError::Limit(format!(
                "--limiter-keys {:?}: {why}",
                pattern.chars().take(80).collect::<String>()
            )));
        }
    }
    let largest_request = u64::try_from(config.max_request_bytes)
        .unwrap_or(u64::MAX)
        .saturating_mul(memory_budget::PARSED_REQUEST_FACTOR);
    if config.max_memory_in_flight < largest_request {
        return Err(BridgeError::Limit(format!(
            "--max-memory-in-flight ({} bytes) must hold at least one request of --max-request-bytes being parsed \
             ({} × {} = {largest_request} bytes): raise it or lower --max-request-bytes",
            config.max_memory_in_flight,
            config.max_request_bytes,
            memory_budget::PARSED_REQUEST_FACTOR
        )));
    }
    if config.max_reply_bytes == 0 {
        return Err(BridgeError::Limit(
            "the reply cap must be at least 1 byte (--max-reply-bytes, EDGELIMIT_MAX_REPLY_BYTES)".into(),
        ));
    }
    Ok(())
}

/// Where `redis_url` points, without its password, for printing.
pub fn redis_address(redis_url: &str) -> String {
    use redis::IntoConnectionInfo;
    if let Some(cluster) = cluster::describe_url(redis_url) {
        return cluster;
    }
    match redis_url.into_connection_info() {
        Ok(info) => info.addr().to_string(),
        Err(_) => "an invalid URL".to_owned(),
    }
}

/// The tokens of `config`, checked: at least one, none unusable, and no `readonly` token without its ACL user.
fn tokens_of(config: &BridgeConfig) -> Result<Tokens, BridgeError> {
    let admin = Some(config.token.as_str()).filter(|token| !token.is_empty());
    let inline = admin
        .map(|token| (Profile::Admin, token))
        .into_iter()
        .chain(config.tokens.iter().map(|(profile, token)| (*profile, token.as_str())));
    let inline = TokenTable::new(inline).map_err(|e| BridgeError::Tokens(format!("--token or --tokens: {e}")))?;
    let tokens = Tokens::load(inline, config.tokens_file.clone()).map_err(BridgeError::Tokens)?;
    if config.redis_acl == RedisAcl::Off && tokens.table().profiles().contains(&Profile::Readonly) {
        return Err(BridgeError::Tokens(READONLY_NEEDS_ACL.into()));
    }
    Ok(tokens)
}

/// Why a `readonly` token is refused when the ACL is off.
const READONLY_NEEDS_ACL: &str = "readonly tokens need the bridge's Redis ACL users (--redis-acl provision): with \
     --redis-acl off nothing would keep them from writing";

/// The protocol's routes.
fn routes() -> Router<Arc<Bridge>> {
    Router::new()
        .route("/", post(single))
        .route("/pipeline", post(pipeline))
        .route("/multi-exec", post(multi_exec))
        .route("/subscribe/{*channels}", post(subscribe::channels))
        .route("/psubscribe/{*patterns}", post(subscribe::patterns))
}

/// `routes` behind the bridge's layers, innermost first: JSON fallbacks, memory budget, token check (beside the
/// routes without a token: `/healthz`, `/metrics`), body cap, panic catch, metrics and refusal log, CORS.
fn app(routes: Router<Arc<Bridge>>, bridge: Arc<Bridge>, config: &BridgeConfig) -> Router {
    let with_token = routes
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        // Inside the token check: a request without a valid token takes nothing from the budget.
        .layer(middleware::from_fn_with_state(bridge.memory.clone(), memory_budget::hold))
        .layer(middleware::from_fn_with_state(bridge.clone(), authenticate));
    Router::new()
        .route("/healthz", get(observe::healthz))
        .route("/metrics", get(observe::metrics))
        .merge(with_token)
        .layer(DefaultBodyLimit::max(config.max_request_bytes))
        // A panic is that request's HTTP 500; inside CORS so a page can read it.
        .layer(CatchPanicLayer::custom(panic_response))
        .layer(middleware::from_fn_with_state(bridge.clone(), observe::count))
        // Outermost, so that preflights are answered before the token check.
        .layer(middleware::from_fn_with_state(Arc::new(config.cors_origins.clone()), cors::cors))
        .with_state(bridge)
}

/// The answer to a request whose handler panicked; the message went to stderr.
fn panic_response(_panic: Box<dyn Any + Send + 'static>) -> Response {
    Failure::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "the bridge failed on this request (a bug, logged on the bridge's stderr); other requests are unaffected",
    )
    .into_response()
}

/// Once at start-up: creates the profiles' ACL users, to report a Redis that refuses now rather than at the first
/// request, and warns when Redis evicts keys (an evicted limiter key is a fresh limit). Warnings only: Redis may be
/// down yet, or evict on purpose.
async fn check_redis_at_start(bridge: Arc<Bridge>) {
    let links = match &bridge.redis {
        Links::Single(links) => links,
        Links::Cluster(cluster) => {
            let profiles: Vec<Profile> = bridge.tokens.table().profiles().into_iter().collect();
            if let Some(connection) = cluster.check_at_start(&profiles).await {
                warn_of_eviction(connection).await;
            }
            return;
        }
    };
    let Ok(connection) = links.connection(Profile::Admin).await else {
        return;
    };
    for profile in bridge.tokens.table().profiles() {
        if let Err(e) = links.connection(profile).await {
            eprintln!("edgelimit bridge: WARNING: {profile} tokens cannot be served: {e}");
        }
    }
    warn_of_eviction(connection).await;
}

/// Warns when the Redis behind `connection` evicts keys under memory pressure (see [`check_redis_at_start`]).
async fn warn_of_eviction(mut connection: redis::aio::MultiplexedConnection) {
    let reply: redis::RedisResult<Vec<String>> =
        redis::cmd("CONFIG").arg("GET").arg("maxmemory-policy").query_async(&mut connection).await;
    if let Ok([_, policy]) = reply.as_deref() {
        if let Some(problem) = crate::doctor::eviction_policy_problem(policy) {
            eprintln!("edgelimit bridge: WARNING: {problem}");
        }
    }
}

/// A request that failed before or instead of reaching Redis, answered as `{"error": …}` with its status.
struct Failure {
    status: StatusCode,
    message: String,
}

impl Failure {
    fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Failure { status, message: message.into() }
    }

    fn bad_request(message: impl Into<String>) -> Self {
        Failure::new(StatusCode::BAD_REQUEST, message)
    }
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        let mut response = (self.status, Json(json!({ "error": &self.message }))).into_response();
        if self.status == StatusCode::TOO_MANY_REQUESTS {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        response.extensions_mut().insert(observe::Refusal(self.message));
        response
    }
}

/// Who sent a request: its token's profile, and the token (as its digest) for [`fair_share`].
#[derive(Clone, Copy)]
struct Caller {
    profile: Profile,
    token: TokenDigest,
}

/// Finds who sent the request, which the handlers receive as an `Extension<Caller>`.
async fn authenticate(State(bridge): State<Arc<Bridge>>, mut request: Request, next: Next) -> Response {
    let authorization = request.headers().get("authorization").map(|value| value.as_bytes());
    if let Some((profile, token)) = bridge.tokens.table().caller_of(authorization) {
        request.extensions_mut().insert(Caller { profile, token });
        request.extensions_mut().insert(profile);
        let mut response = next.run(request).await;
        // For the metrics' labels (observe.rs).
        response.extensions_mut().insert(profile);
        response
    } else {
        Failure::new(
            StatusCode::UNAUTHORIZED,
            "Unauthorized: send the bridge's token as 'Authorization: Bearer <token>'",
        )
        .into_response()
    }
}

async fn not_found() -> Failure {
    Failure::new(StatusCode::NOT_FOUND, "no such route: POST a command to /, /pipeline or /multi-exec")
}

async fn method_not_allowed() -> Failure {
    Failure::new(StatusCode::METHOD_NOT_ALLOWED, "only POST is served: POST a command to /, /pipeline or /multi-exec")
}

/// Reads a request's commands from its JSON body with `words`, after taking the request's [`Share`] (a bulk one's
/// body is parsed off the runtime); an oversized or unparsable body is a failure that says so.
async fn read_commands<T: Send + 'static>(
    bridge: &Bridge,
    caller: &Caller,
    body: Result<Bytes, BytesRejection>,
    words: fn(&JsonValue) -> Result<T, String>,
) -> Result<(T, Share), Failure> {
    let bytes = body.map_err(|rejection| {
        Failure::new(rejection.status(), format!("could not read the request body: {}", rejection.body_text()))
    })?;
    let share = bridge.fair_share.share(&caller.token, bytes.len()).await?;
    let parsed = off_runtime(share.is_bulk(), move || {
        let json: JsonValue = serde_json::from_slice(&bytes)
            .map_err(|e| Failure::bad_request(format!("the request body is not valid JSON: {e}")))?;
        words(&json).map_err(Failure::bad_request)
    });
    Ok((parsed.await??, share))
}

/// The JSON response `render` makes: rendered off the runtime for a bulk request.
async fn respond(bulk: bool, render: impl FnOnce() -> JsonValue + Send + 'static) -> Result<Response, Failure> {
    off_runtime(bulk, move || Json(render()).into_response()).await
}

/// How long a request to a cluster may take, retries included: `--redis-timeout-ms`, or less when the client waits
/// less ([`edgelimit::rest::DEADLINE_HEADER`]); past that a resent decision would spend permits nobody uses.
fn retry_budget(cluster: &cluster::Cluster, headers: &HeaderMap) -> Result<Duration, Failure> {
    let Some(value) = headers.get(edgelimit::rest::DEADLINE_HEADER) else {
        return Ok(cluster.timeout());
    };
    let ms = value
        .to_str()
        .ok()
        .filter(|text| !text.is_empty() && text.len() <= 10 && text.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|text| text.parse::<u64>().ok())
        .ok_or_else(|| {
            Failure::bad_request(format!(
                "{} must be the client's timeout in whole ms (at most 10 digits), got {:?}",
                edgelimit::rest::DEADLINE_HEADER,
                String::from_utf8_lossy(value.as_bytes()).chars().take(40).collect::<String>()
            ))
        })?;
    Ok(cluster.timeout().min(Duration::from_millis(ms)))
}

fn wants_base64(headers: &HeaderMap) -> bool {
    headers.get("upstash-encoding").is_some_and(|value| value.as_bytes().eq_ignore_ascii_case(b"base64"))
}

/// One prepared command: the command, the SHA1 a `SCRIPT LOAD` reply must name, and its words (for routing).
type Prepared = (redis::Cmd, Option<String>, Words);

impl Bridge {
    /// Checks and rewrites the commands of one request; nothing runs unless all of them may.
    fn prepare(&self, profile: Profile, mut commands: Vec<Words>) -> Result<Vec<Prepared>, Failure> {
        if let Some(why) = commands.iter().find_map(|words| policy::refusal(words)) {
            return Err(Failure::bad_request(why));
        }
        if profile == Profile::Readonly && self.acl == RedisAcl::Off {
            return Err(Failure::new(StatusCode::FORBIDDEN, READONLY_NEEDS_ACL));
        }
        if let Some(why) =
            commands.iter().find_map(|words| fence::refusal(profile, words, &self.limiter_keys, self.max_log_limit))
        {
            return Err(Failure::new(StatusCode::FORBIDDEN, why));
        }
        Ok(commands
            .iter_mut()
            .map(|words| {
                let loaded_sha = self.aliases.rewrite(words);
                let mut command = redis::Cmd::new();
                words.iter().for_each(|word| {
                    command.arg(word.as_slice());
                });
                (command, loaded_sha, std::mem::take(words))
            })
            .collect())
    }

    /// [`Bridge::prepare`], off the runtime for a bulk request.
    async fn prepare_off_runtime(
        self: &Arc<Self>,
        bulk: bool,
        profile: Profile,
        commands: Vec<Words>,
    ) -> Result<Vec<Prepared>, Failure> {
        let bridge = self.clone();
        off_runtime(bulk, move || bridge.prepare(profile, commands)).await?
    }

    async fn connection(&self, profile: Profile, lane: Lane) -> Result<redis::aio::MultiplexedConnection, Failure> {
        match &self.redis {
            Links::Single(links) => links.lane(profile, lane).await.map_err(|e| self.failure(&e)),
            Links::Cluster(_) => Err(Failure::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the bridge asked for one Redis connection in front of a cluster (a bug)",
            )),
        }
    }

    /// Starts a `SCRIPT KILL` when `error` says a script may be holding Redis (a timeout, or BUSY).
    fn notice(&self, error: &redis::RedisError) {
        if error.is_timeout() || error.code() == Some("BUSY") {
            if let Some(killer) = &self.killer {
                killer.start();
            }
        }
    }

    /// Maps a Redis error to a status: an error reply 400, a reply above the cap 413, a refusal of the bridge's
    /// login 400; only Redis out of reach is 503, which clients may take for an outage.
    fn failure(&self, error: &redis::RedisError) -> Failure {
        self.notice(error);
        if let Some(message) = json::redis_error_text(error) {
            if message.starts_with(REPLY_TOO_LARGE) {
                return Failure::new(StatusCode::PAYLOAD_TOO_LARGE, message);
            }
            return Failure::bad_request(message);
        }
        let redis = self.redis.describe();
        if let Some(message) = json::refusal_text(error, &redis) {
            eprintln!("edgelimit bridge: {message}");
            return Failure::bad_request(message);
        }
        eprintln!("edgelimit bridge: redis at {redis} unavailable: {error}");
        let why = if self.killer.as_ref().is_some_and(|killer| killer.unkillable()) {
            script_kill::UNKILLABLE_NOTE
        } else {
            "the bridge reconnects by itself, retry shortly"
        };
        Failure::new(StatusCode::SERVICE_UNAVAILABLE, format!("redis at {redis} is unavailable ({error}); {why}"))
    }
}

/// One reply as JSON; a `SCRIPT LOAD` of a rewritten script answers the SHA1 the client computed.
fn render(value: redis::Value, loaded_sha: Option<String>, base64: bool) -> JsonValue {
    match loaded_sha {
        Some(sha) => json::reply(redis::Value::BulkString(sha.into_bytes()), base64),
        None => json::reply(value, base64),
    }
}

async fn single(
    State(bridge): State<Arc<Bridge>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, Failure> {
    let (words, share) = read_commands(&bridge, &caller, body, json::command).await?;
    let bulk = share.is_bulk();
    let Some(prepared) = bridge.prepare_off_runtime(bulk, caller.profile, vec![words]).await?.pop() else {
        return Err(Failure::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the bridge prepared no command for this request (a bug)",
        ));
    };
    let base64 = wants_base64(&headers);
    if let Links::Cluster(cluster) = &bridge.redis {
        let budget = retry_budget(cluster, &headers)?;
        let value =
            bridge.observer.redis_round_trip(clustered::single(cluster, caller.profile, &prepared, budget)).await?;
        // A reply combined from every master (KEYS) is held to the cap as a whole.
        let combined = matches!(routing::route(&prepared.2), Ok(routing::Route::EveryMaster(_)));
        if combined && json::wire_size(&value) > bridge.max_reply_bytes {
            return Err(Failure::new(StatusCode::PAYLOAD_TOO_LARGE, over_budget(bridge.max_reply_bytes)));
        }
        return respond(bulk, move || json!({ "result": render(value, prepared.1, base64) })).await;
    }
    let (command, loaded_sha, _) = prepared;
    let mut connection = bridge.connection(caller.profile, share.lane()).await?;
    let value = bridge
        .observer
        .redis_round_trip(connection.send_packed_command(&command))
        .await
        .and_then(json::top_level_error)
        .map_err(|e| bridge.failure(&e))?;
    respond(bulk, move || json!({ "result": render(value, loaded_sha, base64) })).await
}

async fn pipeline(
    State(bridge): State<Arc<Bridge>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, Failure> {
    batch(bridge, caller, &headers, body, false).await
}

async fn multi_exec(
    State(bridge): State<Arc<Bridge>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, Failure> {
    batch(bridge, caller, &headers, body, true).await
}

async fn batch(
    bridge: Arc<Bridge>,
    caller: Caller,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
    atomic: bool,
) -> Result<Response, Failure> {
    let (commands, mut share) = read_commands(&bridge, &caller, body, json::commands).await?;
    if !share.is_bulk() && commands.len() > BULK_COMMANDS {
        // Its main lane share is given back first: waiting for a turn must not hold up the token's small requests.
        drop(share);
        share = bridge.fair_share.bulk_turn(&caller.token).await?;
    }
    let bulk = share.is_bulk();
    let profile = caller.profile;
    let prepared = bridge.prepare_off_runtime(bulk, profile, commands).await?;
    let count = prepared.len();
    let base64 = wants_base64(headers);
    if let Links::Cluster(cluster) = &bridge.redis {
        let budget = retry_budget(cluster, headers)?;
        let results = if atomic {
            let transaction = clustered::transaction(&bridge, cluster, profile, &prepared, budget);
            bridge.observer.redis_round_trip(transaction).await?
        } else {
            let pipeline = clustered::pipeline(cluster, profile, &prepared, budget);
            bridge.observer.redis_round_trip(pipeline).await
        };
        let loaded_shas = prepared.into_iter().map(|(_, loaded_sha, _)| loaded_sha).collect();
        return respond(bulk, move || bridge.render_batch(results, loaded_shas, base64)).await;
    }
    // MULTI…EXEC is written out by hand: the redis crate's atomic mode turns an EXEC answered by an error (a reply
    // the cap refused) into a parse failure. Only a pipeline's replies are announced as sharing the cap.
    let (mut pipe, announced) = shared_budget::pipeline(if atomic { 0 } else { count });
    if atomic {
        pipe.cmd("MULTI");
    }
    let mut loaded_shas = Vec::with_capacity(count);
    for (command, loaded_sha, _) in prepared {
        pipe.add_command(command);
        loaded_shas.push(loaded_sha);
    }
    if atomic {
        pipe.cmd("EXEC");
    }
    let mut connection = bridge.connection(profile, share.lane()).await?;
    let replies = announced.replies(
        bridge
            .observer
            .redis_round_trip(pipe.query_async::<Vec<redis::RedisResult<redis::Value>>>(&mut connection))
            .await
            .map_err(|e| bridge.failure(&e))?,
    );
    let results = if atomic {
        bridge.transaction_results(replies, count)?
    } else {
        replies
            .into_iter()
            .map(|reply| {
                reply.map_err(|e| {
                    bridge.notice(&e);
                    json::redis_error_text(&e).unwrap_or_else(|| e.to_string())
                })
            })
            .collect()
    };
    respond(bulk, move || bridge.render_batch(results, loaded_shas, base64)).await
}

/// One command's result in a batch: its reply, or the text of its error.
type BatchResult = Result<redis::Value, String>;

/// What is left of one request's reply budget: the reply cap, which all its replies share.
struct ReplyBudget {
    left: u64,
    cap: u64,
}

impl ReplyBudget {
    fn new(cap: u64) -> Self {
        ReplyBudget { left: cap, cap }
    }

    /// `result` when its reply fits in what is left (which it then takes), else the over-budget error in its place.
    fn take(&mut self, result: BatchResult) -> BatchResult {
        let value = result?;
        let left = (self.left.checked_sub(json::wire_size(&value))).ok_or_else(|| over_budget(self.cap))?;
        self.left = left;
        Ok(value)
    }
}

impl Bridge {
    /// The items of a `/pipeline` or `/multi-exec` answer, in order.
    fn render_batch(&self, results: Vec<BatchResult>, loaded_shas: Vec<Option<String>>, base64: bool) -> JsonValue {
        // The reply cap held each reply, and a pipeline's together when announced (shared_budget.rs); held here
        // too for a cluster's pieces and when Redis refused the marker.
        let mut budget = ReplyBudget::new(self.max_reply_bytes);
        let items = results
            .into_iter()
            .zip(loaded_shas)
            .map(|(result, loaded_sha)| match budget.take(result) {
                Ok(value) => json!({ "result": render(value, loaded_sha, base64) }),
                Err(error) => json!({ "error": error }),
            })
            .collect();
        JsonValue::Array(items)
    }

    /// The per-command results of `MULTI`, the commands, `EXEC`; or why the transaction failed as a whole
    /// (EXECABORT naming each refused command, or an EXEC reply the cap refused).
    fn transaction_results(
        &self,
        mut replies: Vec<redis::RedisResult<redis::Value>>,
        count: usize,
    ) -> Result<Vec<BatchResult>, Failure> {
        let exec = replies.pop();
        let mut replies = replies.into_iter();
        if let Some(Err(e)) = replies.next() {
            return Err(self.failure(&e));
        }
        let refused: Vec<String> = replies
            .enumerate()
            .filter_map(|(i, queued)| {
                let e = queued.err()?;
                Some(format!("command {i}: {}", json::redis_error_text(&e).unwrap_or_else(|| e.to_string())))
            })
            .collect();
        match exec {
            Some(Ok(redis::Value::Array(items))) if items.len() == count => Ok(items
                .into_iter()
                .map(|item| match item {
                    redis::Value::ServerError(error) => Err(json::server_error_text(&error)),
                    value => Ok(value),
                })
                .collect()),
            Some(Err(e)) if !refused.is_empty() && e.code() == Some("EXECABORT") => Err(Failure::bad_request(format!(
                "EXECABORT Transaction discarded because of previous errors: {}",
                refused.join("; ")
            ))),
            Some(Err(e)) => Err(self.failure(&e)),
            // Not an outage (clients would take a 502 for one): an unreadable reply is reported as a bug.
            _ => Err(Failure::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("Redis answered EXEC of {count} commands with something else than their {count} results"),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::IntoFuture;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// POSTs an empty body with the token over a fresh connection; the status line and the body.
    async fn post_to(address: std::net::SocketAddr, path: &str) -> (String, String) {
        let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: bridge\r\nAuthorization: Bearer test-admin-token\r\nContent-Length: 0\r\n\
             Connection: close\r\n\r\n"
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
        (head.lines().next().unwrap_or_default().to_owned(), body.to_owned())
    }

    #[test]
    fn a_memory_budget_too_small_for_one_request_is_refused_at_start() {
        let mut config = BridgeConfig::new("redis://127.0.0.1:1", "test-admin-token");
        assert!(check(&config).is_ok());
        config.max_memory_in_flight = 4 << 20;
        let refusal = check(&config).unwrap_err().to_string();
        assert!(refusal.contains("--max-memory-in-flight (4194304 bytes) must hold at least one request"), "{refusal}");
        config.max_request_bytes = 64 << 10;
        assert!(check(&config).is_ok());
    }

    /// The bridge's layers around a route that panics on purpose; test builds unwind, as `--profile bridge` does.
    #[tokio::test]
    async fn a_panicking_handler_answers_500_in_json_and_the_bridge_keeps_serving() {
        let mut config = BridgeConfig::new("redis://127.0.0.1:1", "test-admin-token");
        config.max_reply_bytes = 1024;
        let redis = Links::new(&LinkConfig {
            redis_url: &config.redis_url,
            acl: config.redis_acl,
            limiter_keys: &config.limiter_keys,
            timeout: Duration::from_millis(200),
            max_reply_bytes: 1024,
        })
        .unwrap();
        let killer = Arc::new(ScriptKiller::new(redis.admin_info(), Duration::from_millis(200)));
        let tokens = Arc::new(tokens_of(&config).unwrap());
        let bridge = Arc::new(Bridge::new(&config, redis, Some(killer), tokens).unwrap());
        let routes = routes().route(
            "/panic",
            post(|| async {
                if true {
                    panic!("a handler panicked on purpose, in a test");
                }
                "unreachable"
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        config.max_request_bytes = 1024;
        let server = tokio::spawn(axum::serve(listener, app(routes, bridge, &config)).into_future());
        for _ in 0..3 {
            let (status, body) = post_to(address, "/panic").await;
            assert!(status.contains(" 500 "), "{status}");
            let body: JsonValue = serde_json::from_str(&body).unwrap();
            assert!(body["error"].as_str().unwrap().contains("other requests are unaffected"));
        }
        let (status, body) = post_to(address, "/nowhere").await;
        assert!(status.contains(" 404 "), "{status} {body}");
        assert!(!server.is_finished());
        server.abort();
    }
}
