//! The bridge's one multiplexed connection to Redis, made on first use and remade after Redis comes back.
//!
//! `ConnectionManager` pipelines every request over one socket and reconnects by itself after the socket breaks. It
//! can only be created while Redis is up, so the bridge creates it lazily: a bridge started before Redis (or while
//! it is down) answers 503 until Redis is reachable, and then works without a restart.

use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use tokio::sync::Mutex;

/// A lazily connected, self-healing handle to Redis.
pub struct RedisLink {
    client: redis::Client,
    timeout: Duration,
    manager: Mutex<Option<ConnectionManager>>,
}

impl RedisLink {
    /// Validates the URL; connects on first use. `timeout` bounds both connecting and each reply.
    pub fn new(url: &str, timeout: Duration) -> redis::RedisResult<Self> {
        Ok(RedisLink {
            client: redis::Client::open(url)?,
            timeout,
            manager: Mutex::new(None),
        })
    }

    /// A handle to the shared connection, connecting first if there is none yet.
    pub async fn connection(&self) -> redis::RedisResult<ConnectionManager> {
        let mut manager = self.manager.lock().await;
        if let Some(existing) = manager.as_ref() {
            return Ok(existing.clone());
        }
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.timeout))
            .set_response_timeout(Some(self.timeout))
            // Fail fast: a REST request is waiting, and the next request tries again anyway.
            .set_number_of_retries(1);
        let created = ConnectionManager::new_with_config(self.client.clone(), config).await?;
        *manager = Some(created.clone());
        Ok(created)
    }

    /// Where this link points, for error messages (without any password).
    pub fn describe(&self) -> String {
        let info = self.client.get_connection_info();
        format!("{}", info.addr())
    }
}
