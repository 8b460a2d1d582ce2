//! The benchmark's own Redis and bridge: a private `redis-server` and the bridge in this process, both on free
//! loopback ports, so that every contender meets the same Redis and nothing else touches it.

use std::time::Duration;

use edgelimit::{Command, RestClient};
use edgelimit_cli::bridge::{BridgeConfig, InProcessBridge};
use edgelimit_cli::redis_server::RedisServer;

use crate::support::Context;

/// The token the benchmark's bridge requires.
pub const TOKEN: &str = "bench-token";

/// Generous: the scaling warm-up keeps both cores busy, and a timeout there would only lose a measurement.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(30);

/// A private `redis-server` with the bridge in front of it.
pub struct BenchStack {
    redis: RedisServer,
    bridge: InProcessBridge,
    client: RestClient,
}

impl BenchStack {
    /// Starts Redis, then the bridge.
    pub async fn start() -> Result<BenchStack, String> {
        let redis = RedisServer::start().await.context("could not start redis-server")?;
        let mut config = BridgeConfig::new(redis.url(), TOKEN);
        config.redis_timeout = CLIENT_TIMEOUT;
        let bridge = InProcessBridge::start(config)
            .await
            .context("could not start the bridge")?;
        let client = RestClient::new(bridge.url(), TOKEN)
            .and_then(|client| client.with_timeout(CLIENT_TIMEOUT))
            .context("could not make a client for the bridge")?;
        Ok(BenchStack { redis, bridge, client })
    }

    /// A client of the bridge.
    pub fn client(&self) -> &RestClient {
        &self.client
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
        self.client
            .command(&Command::new("FLUSHALL"))
            .await
            .map(drop)
            .context("FLUSHALL failed")
    }

    /// Stops the bridge, then Redis. Failures to stop are reported, not returned: the measurements are done.
    pub async fn stop(self) {
        if let Err(e) = self.bridge.stop().await {
            eprintln!("edgelimit-bench: the bridge did not stop cleanly: {e}");
        }
        if let Err(e) = self.redis.stop().await {
            eprintln!("edgelimit-bench: redis-server did not stop cleanly: {e}");
        }
    }
}
