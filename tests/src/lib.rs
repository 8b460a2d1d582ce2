//! Test harness: a real `redis-server` and the real REST bridge, each on a free loopback port, torn down on drop.
//!
//! No test depends on a service it did not start. The bridge runs in-process (same code as `edgelimit bridge`), so
//! a test can stop and restart Redis under it and watch it recover.

pub mod release_bridge;

use std::future::Future;
use std::time::Duration;

use edgelimit::{Limiter, RestClient, Script};
use edgelimit_cli::bridge::{BridgeConfig, InProcessBridge, Profile};
use edgelimit_cli::redis_cluster::RedisCluster;
use edgelimit_cli::redis_server::RedisServer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The admin token of every harness bridge, which [`Stack::client`] uses.
pub const TOKEN: &str = "test-token";

/// A `limiter` token every harness bridge accepts too.
pub const LIMITER_TOKEN: &str = "test-limiter-token";

/// A `readonly` token every harness bridge accepts too.
pub const READONLY_TOKEN: &str = "test-readonly-token";

/// Redis (one server, or a cluster) + bridge.
pub struct Stack {
    redis: Option<RedisServer>,
    redis_port: u16,
    cluster: Option<RedisCluster>,
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
        let config = harness_config(redis.url(), configure);
        let bridge = InProcessBridge::start(config).await.expect("start the bridge");
        Stack {
            redis_port: redis.port(),
            redis: Some(redis),
            cluster: None,
            bridge_url: bridge.url().to_owned(),
            bridge: Some(bridge),
        }
    }

    /// A fresh 6-node Redis Cluster (3 masters, 3 replicas) and a bridge in front of it, given every node as a seed,
    /// with the same tokens as [`Stack::start`].
    pub async fn start_cluster() -> Stack {
        Stack::start_cluster_with(|_| {}).await
    }

    /// [`Stack::start_cluster`] with the bridge's config changed by `configure` first.
    pub async fn start_cluster_with(configure: impl FnOnce(&mut BridgeConfig)) -> Stack {
        let cluster = RedisCluster::start(3, 1).await.expect("start a 6-node Redis Cluster");
        let config = harness_config(cluster_url(&cluster), configure);
        let bridge = InProcessBridge::start(config).await.expect("start the bridge");
        Stack {
            redis_port: cluster.ports()[0],
            redis: None,
            cluster: Some(cluster),
            bridge_url: bridge.url().to_owned(),
            bridge: Some(bridge),
        }
    }

    /// Takes the cluster of a [`Stack::start_cluster`] stack out, to act on it (kill a node, reshard) while the
    /// bridge serves; dropping it stops its nodes.
    pub fn take_cluster(&mut self) -> RedisCluster {
        self.cluster.take().expect("a stack started with Stack::start_cluster")
    }

    /// The cluster of a [`Stack::start_cluster`] stack.
    pub fn cluster(&mut self) -> &mut RedisCluster {
        self.cluster.as_mut().expect("a stack started with Stack::start_cluster")
    }

    /// The bridge's base URL.
    pub fn url(&self) -> &str {
        &self.bridge_url
    }

    /// A client with the admin token and a 5 s timeout (tests must not flake on a busy machine).
    pub fn client(&self) -> RestClient {
        self.client_with(TOKEN)
    }

    /// A client with `token` and a 5 s timeout.
    pub fn client_with(&self, token: &str) -> RestClient {
        RestClient::new(&self.bridge_url, token)
            .and_then(|client| client.with_timeout(Duration::from_secs(5)))
            .expect("valid client config")
    }

    /// Where the harness's Redis listens, e.g. `redis://127.0.0.1:40123`; for a cluster, the bridge's
    /// `redis+cluster://` URL of its nodes.
    pub fn redis_url(&self) -> String {
        match &self.cluster {
            Some(cluster) => cluster_url(cluster),
            None => format!("redis://127.0.0.1:{}", self.redis_port),
        }
    }

    /// Kills Redis (the bridge keeps running).
    pub async fn stop_redis(&mut self) {
        if let Some(redis) = self.redis.take() {
            redis.stop().await.expect("stop redis-server");
        }
    }

    /// Starts Redis again on the port it had.
    pub async fn restart_redis(&mut self) {
        self.redis = Some(RedisServer::start_on(self.redis_port).await.expect("restart redis-server"));
    }

    /// Stops the bridge gracefully and waits for it to finish.
    pub async fn stop_bridge(&mut self) {
        if let Some(bridge) = self.bridge.take() {
            bridge.stop().await.expect("bridge stops cleanly");
        }
    }
}

/// A bridge config as the harness sets it up: its tokens, a short Redis timeout, then `configure`.
fn harness_config(redis_url: String, configure: impl FnOnce(&mut BridgeConfig)) -> BridgeConfig {
    let mut config = BridgeConfig::new(redis_url, TOKEN);
    config.tokens = vec![(Profile::Limiter, LIMITER_TOKEN.to_owned()), (Profile::Readonly, READONLY_TOKEN.to_owned())];
    // Short, so the Redis-down tests answer quickly; still generous for a loaded 2-core machine.
    config.redis_timeout = Duration::from_millis(1_500);
    configure(&mut config);
    config
}

/// The bridge's URL for `cluster`: every node a seed.
pub fn cluster_url(cluster: &RedisCluster) -> String {
    let nodes: Vec<String> = cluster.ports().iter().map(|port| format!("127.0.0.1:{port}")).collect();
    format!("redis+cluster://{}", nodes.join(","))
}

/// Runs each of `futures` as a task of its own, all spawned before any runs (on Tokio's current-thread runtime,
/// `#[tokio::test]`'s, they then run in turn, in this order, each up to its first wait), and returns their outputs
/// in the same order.
pub async fn spawned_at_once<T: Send + 'static>(
    futures: impl IntoIterator<Item = impl Future<Output = T> + Send + 'static>,
) -> Vec<T> {
    let tasks: Vec<_> = futures.into_iter().map(tokio::spawn).collect();
    let mut outputs = Vec::new();
    for task in tasks {
        outputs.push(task.await.unwrap());
    }
    outputs
}

/// `script` run on `key` with `arguments` through `stack`'s bridge: the reply's whole numbers (the reserve scripts
/// reply with an array of them).
pub async fn script_numbers(stack: &Stack, script: &Script, key: &str, arguments: &[String]) -> Vec<i64> {
    let reply = script.run(&stack.client(), &[key], arguments).await.unwrap();
    let numbers = reply.into_array().unwrap().into_iter();
    numbers.map(|value| value.into_int().unwrap()).collect()
}

/// A TCP relay in front of `url` (a bridge) that passes every request on until one holds `marker`, then stalls that
/// connection: the request never reaches the bridge and no reply comes, as a store that stops answering mid-call.
/// Returns the relay's URL. A script's text travels only in an `EVAL` (an `EVALSHA` names its SHA1), so a marker
/// from a script's source stalls exactly its resend after `NOSCRIPT`.
pub async fn relay_stalling_on(url: &str, marker: &'static [u8]) -> String {
    let upstream = url.trim_start_matches("http://").to_owned();
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind a relay");
    let relay = format!("http://{}", listener.local_addr().expect("the relay's address"));
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let Ok(bridge) = TcpStream::connect(&upstream).await else {
                continue;
            };
            let (mut from_client, mut to_client) = client.into_split();
            let (mut from_bridge, mut to_bridge) = bridge.into_split();
            tokio::spawn(async move { tokio::io::copy(&mut from_bridge, &mut to_client).await });
            tokio::spawn(async move {
                // The last bytes seen, then each chunk: a marker split between two reads is still found.
                let mut seen = Vec::new();
                let mut chunk = vec![0u8; 64 * 1024];
                while let Ok(read @ 1..) = from_client.read(&mut chunk).await {
                    seen.drain(..seen.len().saturating_sub(marker.len()));
                    seen.extend_from_slice(&chunk[..read]);
                    if seen.windows(marker.len()).any(|window| window == marker) {
                        // Hold both halves open and say nothing, until the test ends.
                        std::future::pending::<()>().await;
                    }
                    if to_bridge.write_all(&chunk[..read]).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    relay
}

/// How many plain requests of 1 permit for `id` at explicit time `at` (unix ms) `limiter` grants before one is
/// denied: what a limit has left at that moment.
pub async fn grants_until_denied(limiter: &Limiter, id: &str, at: u64) -> u32 {
    let mut granted = 0;
    while limiter.clone().at(at).limit(id, 1).await.unwrap().success {
        granted += 1;
    }
    granted
}
