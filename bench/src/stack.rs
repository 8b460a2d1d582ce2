//! The benchmark's own Redis and bridges on free loopback ports: a private `redis-server`, the bridge in this process,
//! and a second bridge with Redis ACL users off, for scenario 3's token variants.

use std::time::Duration;

use edgelimit::{Command, RestClient};
use edgelimit_cli::bridge::{BridgeConfig, InProcessBridge, Profile, RedisAcl};
use edgelimit_cli::redis_server::RedisServer;

use crate::support::Context;

/// The admin token of the benchmark's bridge, which every scenario uses.
pub const TOKEN: &str = "bench-token";

/// The `limiter` tokens of both bridges: for what scoping a token costs (scenario 3), and a victim and its neighbour
/// (scenario 9).
pub(crate) const LIMITER_TOKEN: &str = "bench-limiter-token";
pub(crate) const OTHER_LIMITER_TOKEN: &str = "bench-other-limiter-token";

/// Generous: the scaling warm-up keeps both cores busy, and a timeout there would only lose a measurement.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(30);

/// A private `redis-server` with the bridges in front of it.
pub struct BenchStack {
    redis: RedisServer,
    bridge: InProcessBridge,
    acl_off_bridge: InProcessBridge,
    client: RestClient,
    limiter_client: RestClient,
    acl_off_limiter_client: RestClient,
}

impl BenchStack {
    /// Starts Redis, then the bridges: the main one serves the admin and the `limiter` token (with its ACL user);
    /// `--redis-acl off` is a whole bridge's setting, so it has a second one.
    pub async fn start() -> Result<BenchStack, String> {
        let redis = RedisServer::start().await.context("could not start redis-server")?;
        let config = |redis_acl| BridgeConfig {
            tokens: [LIMITER_TOKEN, OTHER_LIMITER_TOKEN].map(|token| (Profile::Limiter, token.to_owned())).to_vec(),
            redis_acl,
            ..BridgeConfig::new(redis.url(), TOKEN)
        };
        let bridge = start_bridge(config(RedisAcl::Provision)).await?;
        let acl_off_bridge = start_bridge(config(RedisAcl::Off)).await?;
        Ok(BenchStack {
            client: client_of(&bridge, TOKEN)?,
            limiter_client: client_of(&bridge, LIMITER_TOKEN)?,
            acl_off_limiter_client: client_of(&acl_off_bridge, LIMITER_TOKEN)?,
            redis,
            bridge,
            acl_off_bridge,
        })
    }

    /// A client of the bridge, with the admin token.
    pub fn client(&self) -> &RestClient {
        &self.client
    }

    /// Clients of scenario 3's token variants, by name: the admin token (no fence, on the `--redis` user's
    /// connection: what every other measurement uses), a `limiter` token on the bridge with `--redis-acl off` (the
    /// fence's checks, on that connection) and one on the bridge that provisions ACL users (the fence, on the
    /// `edgelimit-limiter` user's own connection).
    pub fn token_variants(&self) -> [(&'static str, &RestClient); 3] {
        [
            ("admin token", &self.client),
            ("limiter token, ACL off", &self.acl_off_limiter_client),
            ("limiter token, ACL user", &self.limiter_client),
        ]
    }

    /// The bridge's URL.
    pub fn url(&self) -> &str {
        self.bridge.url()
    }

    /// The port Redis listens on (for `redis-benchmark`, which speaks RESP to it directly).
    pub fn redis_port(&self) -> u16 {
        self.redis.port()
    }

    /// Deletes every key (the script cache stays).
    pub async fn flush(&self) -> Result<(), String> {
        self.client.command(&Command::new("FLUSHALL")).await.map(drop).context("FLUSHALL failed")
    }

    /// Stops the bridges, then Redis. Failures to stop are reported, not returned: the measurements are done.
    pub async fn stop(self) {
        for bridge in [self.bridge, self.acl_off_bridge] {
            if let Err(e) = bridge.stop().await {
                eprintln!("edgelimit-bench: a bridge did not stop cleanly: {e}");
            }
        }
        if let Err(e) = self.redis.stop().await {
            eprintln!("edgelimit-bench: redis-server did not stop cleanly: {e}");
        }
    }
}

/// Starts a bridge of `config`, its Redis timeout generous.
pub(crate) async fn start_bridge(config: BridgeConfig) -> Result<InProcessBridge, String> {
    let config = BridgeConfig { redis_timeout: CLIENT_TIMEOUT, ..config };
    InProcessBridge::start(config).await.context("could not start a bridge")
}

/// A client of `bridge` that sends `token`, a request per command: the scenarios measure what one decision costs
/// (bench/coalescing.mjs measures coalescing).
pub(crate) fn client_of(bridge: &InProcessBridge, token: &str) -> Result<RestClient, String> {
    RestClient::new(bridge.url(), token)
        .and_then(|client| client.with_timeout(CLIENT_TIMEOUT))
        .map(RestClient::without_coalescing)
        .context("could not make a client for the bridge")
}
