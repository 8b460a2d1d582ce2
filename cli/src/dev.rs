//! `edgelimit dev`: the whole local stack in one command.
//!
//! Starts a private `redis-server` (nothing on disk) and the REST bridge in front of it, prints how to reach them,
//! and stops both on Ctrl-C or SIGTERM.

use std::future::Future;
use std::net::SocketAddr;

use crate::bridge::{self, BridgeConfig};
use crate::redis_server::RedisServer;

/// What `edgelimit dev` listens on.
#[derive(Debug, Clone)]
pub struct DevConfig {
    /// Address of the bridge.
    pub listen: SocketAddr,
    /// Port for the private Redis.
    pub redis_port: u16,
    /// Token the bridge requires.
    pub token: String,
}

/// Runs the stack until `shutdown` completes.
pub async fn run(config: DevConfig, shutdown: impl Future<Output = ()> + Send + 'static) -> Result<(), String> {
    let redis = RedisServer::start_on(config.redis_port)
        .await
        .map_err(|e| format!("could not start redis-server on port {}: {e}", config.redis_port))?;
    let listener = tokio::net::TcpListener::bind(config.listen).await.map_err(|e| {
        format!(
            "could not listen on {} for the bridge: {e}; pass --listen",
            config.listen
        )
    })?;
    let url = format!("http://{}", listener.local_addr().map_err(|e| e.to_string())?);
    say!("edgelimit dev stack is up");
    say!("  redis    {}", redis.url());
    say!("  bridge   {url}   (token: {})", config.token);
    say!(
        "  try      curl -H 'Authorization: Bearer {}' -d '[\"PING\"]' {url}/",
        config.token
    );
    say!("  clients  EDGELIMIT_URL={url} EDGELIMIT_TOKEN={}", config.token);
    say!("Ctrl-C stops everything.");
    let bridge_config = BridgeConfig::new(redis.url(), config.token);
    bridge::serve(listener, bridge_config, shutdown)
        .await
        .map_err(|e| e.to_string())?;
    redis
        .stop()
        .await
        .map_err(|e| format!("could not stop redis-server: {e}"))?;
    say!("edgelimit dev stack stopped");
    Ok(())
}
