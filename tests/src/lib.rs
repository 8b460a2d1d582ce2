//! Test harness: a real `redis-server` and the real REST bridge, each on a free loopback port, torn down on drop.
//!
//! No test depends on a service it did not start. The bridge runs in-process (same code as `edgelimit bridge`), so
//! a test can stop and restart Redis under it and watch it recover.

pub mod redis_stats;

use std::time::Duration;

use edgelimit::RestClient;
use edgelimit_cli::bridge::{self, BridgeConfig};
use edgelimit_cli::redis_server::RedisServer;
use tokio::sync::oneshot;

/// The token every harness bridge requires.
pub const TOKEN: &str = "test-token";

/// Redis + bridge.
pub struct Stack {
    redis: Option<RedisServer>,
    redis_port: u16,
    bridge_url: String,
    stop_bridge: Option<oneshot::Sender<()>>,
    bridge_task: Option<tokio::task::JoinHandle<()>>,
}

impl Stack {
    /// Starts a fresh Redis and a bridge in front of it.
    pub async fn start() -> Stack {
        Stack::start_with(|_| {}).await
    }

    /// [`Stack::start`] with the bridge's config changed by `configure` first.
    pub async fn start_with(configure: impl FnOnce(&mut BridgeConfig)) -> Stack {
        let redis = RedisServer::start().await.expect("start redis-server");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind bridge port");
        let bridge_url = format!("http://{}", listener.local_addr().unwrap());
        let mut config = BridgeConfig::new(redis.url(), TOKEN);
        // Short, so the Redis-down tests answer quickly; still generous for a loaded 2-core machine.
        config.redis_timeout = Duration::from_millis(1_500);
        configure(&mut config);
        let (stop_bridge, stopped) = oneshot::channel::<()>();
        let bridge_task = tokio::spawn(async move {
            bridge::serve(listener, config, async {
                let _ = stopped.await;
            })
            .await
            .expect("bridge serves");
        });
        Stack {
            redis_port: redis.port(),
            redis: Some(redis),
            bridge_url,
            stop_bridge: Some(stop_bridge),
            bridge_task: Some(bridge_task),
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
        if let Some(stop) = self.stop_bridge.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.bridge_task.take() {
            task.await.expect("bridge task ends cleanly");
        }
    }
}
