//! Test harness: a real `redis-server` and the real REST bridge, each on a free loopback port, torn down on drop.
//!
//! No test depends on a service it did not start. The bridge runs in-process (same code as `edgelimit bridge`), so
//! a test can stop and restart Redis under it and watch it recover.

use std::time::Duration;

use edgelimit::RestClient;
use edgelimit_cli::bridge::{BridgeConfig, InProcessBridge};
use edgelimit_cli::redis_server::RedisServer;

/// The token every harness bridge requires.
pub const TOKEN: &str = "test-token";

/// Redis + bridge.
pub struct Stack {
    redis: Option<RedisServer>,
    redis_port: u16,
    bridge_url: String,
    bridge: Option<InProcessBridge>,
}

impl Stack {
    /// Starts a fresh Redis and a bridge in front of it.
    pub async fn start() -> Stack {
        Stack::start_with(|_| {}).await
    }

    /// [`Stack::start`] with the bridge's config changed by `configure` first.
    pub async fn start_with(configure: impl FnOnce(&mut BridgeConfig)) -> Stack {
        let redis = RedisServer::start().await.expect("start redis-server");
        let mut config = BridgeConfig::new(redis.url(), TOKEN);
        // Short, so the Redis-down tests answer quickly; still generous for a loaded 2-core machine.
        config.redis_timeout = Duration::from_millis(1_500);
        configure(&mut config);
        let bridge = InProcessBridge::start(config).await.expect("start the bridge");
        Stack {
            redis_port: redis.port(),
            redis: Some(redis),
            bridge_url: bridge.url().to_owned(),
            bridge: Some(bridge),
        }
    }

    /// The bridge's base URL.
    pub fn url(&self) -> &str {
        &self.bridge_url
    }

    /// A client with the right token and a 5 s timeout (tests must not flake on a busy machine).
    pub fn client(&self) -> RestClient {
        RestClient::new(&self.bridge_url, TOKEN)
            .and_then(|client| client.with_timeout(Duration::from_secs(5)))
            .expect("valid client config")
    }

    /// Kills Redis (the bridge keeps running).
    pub async fn stop_redis(&mut self) {
        if let Some(redis) = self.redis.take() {
            redis.stop().await.expect("stop redis-server");
        }
    }

    /// Starts Redis again on the port it had.
    pub async fn restart_redis(&mut self) {
        self.redis = Some(
            RedisServer::start_on(self.redis_port)
                .await
                .expect("restart redis-server"),
        );
    }

    /// Stops the bridge gracefully and waits for it to finish.
    pub async fn stop_bridge(&mut self) {
        if let Some(bridge) = self.bridge.take() {
            bridge.stop().await.expect("bridge stops cleanly");
        }
    }
}
