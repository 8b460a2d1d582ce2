//! `edgelimit dev`: the whole local stack in one command.
//!
//! Starts a private `redis-server` (or, with `--cluster`, a 6-node cluster), the REST bridge in front of it and, from
//! a checkout, the playground page and the Worker under `wrangler dev`; stops them all on Ctrl-C or SIGTERM.

use std::future::Future;
use std::net::SocketAddr;

use crate::bridge::{self, BridgeConfig, CorsOrigins, Profile};
use crate::playground::{self, PlaygroundConfig};
use crate::redis_cluster::RedisCluster;
use crate::redis_server::RedisServer;
use crate::worker_dev::{self, WorkerConfig};

/// What `edgelimit dev` listens on.
#[derive(Debug, Clone)]
pub struct DevConfig {
    /// Address of the bridge.
    pub listen: SocketAddr,
    /// Port for the private Redis (not with `cluster`: the cluster's nodes take free ports).
    pub redis_port: u16,
    /// A private Redis Cluster of 3 masters and 3 replicas instead of one Redis, the bridge in front of it.
    pub cluster: bool,
    /// The admin token, for the developer's clients, the CLI and the playground.
    pub token: String,
    /// The `limiter` token, which the Worker gets: what a deployed Worker should hold.
    pub limiter_token: String,
    /// The Worker and its demo origin; `None` leaves them out.
    pub worker: Option<WorkerConfig>,
    /// The playground page; `None` leaves it out.
    pub playground: Option<PlaygroundConfig>,
}

/// Runs the stack until `shutdown` completes.
pub async fn run(config: DevConfig, shutdown: impl Future<Output = ()> + Send + 'static) -> Result<(), String> {
    let redis = if config.cluster {
        let cluster = RedisCluster::start(3, 1).await.map_err(|e| format!("could not start a Redis Cluster: {e}"))?;
        DevRedis::Cluster(cluster)
    } else {
        let server = RedisServer::start_on(config.redis_port)
            .await
            .map_err(|e| format!("could not start redis-server on port {}: {e}", config.redis_port))?;
        DevRedis::Single(server)
    };
    for url in redis.node_urls() {
        load_scripts(&url)
            .await
            .map_err(|e| format!("could not load edgelimit's scripts into redis-server at {url}: {e}"))?;
    }
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|e| format!("could not listen on {} for the bridge: {e}; pass --listen", config.listen))?;
    let url = format!("http://{}", listener.local_addr().map_err(|e| e.to_string())?);
    say!("edgelimit dev stack is up");
    say!("  redis    {}", redis.url());
    if let DevRedis::Cluster(cluster) = &redis {
        say!("  cluster  3 masters + 3 replicas, nodes on ports {:?}", cluster.ports());
    }
    say!("  bridge   {url}   (token: {})", config.token);
    say!("  try      curl -H 'Authorization: Bearer {}' -d '[\"PING\"]' {url}/", config.token);
    say!("  clients  EDGELIMIT_URL={url} EDGELIMIT_TOKEN={}", config.token);
    say!("  limiter  token {}   (limiter profile: decisions only; the Worker's)", config.limiter_token);
    // The playground is a view on the stack: if it cannot start, say why and run the rest.
    let playground = match &config.playground {
        Some(playground_config) => match playground::start(playground_config, &url, &config.token).await {
            Ok(playground) => Some(playground),
            Err(e) => {
                say!("  playground not started: {e}");
                None
            }
        },
        None => None,
    };
    if let Some(playground) = &playground {
        say!("  playground {}   (open it in a browser: the wasm core runs in the page)", playground.url);
    }
    let worker = match &config.worker {
        Some(worker_config) => Some(worker_dev::start(worker_config, &url, &config.limiter_token).await?),
        None => None,
    };
    if let Some(worker) = &worker {
        say!("  origin   {}   (demo: echoes what reaches it)", worker.origin_url);
        say!("  worker   {}   (wrangler dev, rules from wrangler.toml; ready when it says so below)", worker.url);
        say!("  try      for i in $(seq 6); do curl -s -o /dev/null -w '%{{http_code}} ' {}/; done", worker.url);
    }
    say!("Ctrl-C stops everything.");
    let mut bridge_config = BridgeConfig::new(redis.url(), config.token);
    bridge_config.tokens.push((Profile::Limiter, config.limiter_token));
    // Local pages call the dev bridge from the browser; it holds only throwaway state behind a dev token.
    bridge_config.cors_origins = CorsOrigins(vec!["*".to_owned()]);
    bridge::serve(listener, bridge_config, shutdown).await.map_err(|e| e.to_string())?;
    if let Some(worker) = worker {
        worker.stop().await;
    }
    if let Some(playground) = playground {
        playground.stop();
    }
    redis.stop().await?;
    say!("edgelimit dev stack stopped");
    Ok(())
}

/// The stack's Redis: one server, or a cluster.
enum DevRedis {
    Single(RedisServer),
    Cluster(RedisCluster),
}

impl DevRedis {
    /// What the bridge is given: the server's URL, or the cluster's `redis+cluster://` URL of every node.
    fn url(&self) -> String {
        match self {
            DevRedis::Single(server) => server.url(),
            DevRedis::Cluster(cluster) => {
                let nodes: Vec<String> = cluster.ports().iter().map(|port| format!("127.0.0.1:{port}")).collect();
                format!("{}{}", bridge::CLUSTER_SCHEME, nodes.join(","))
            }
        }
    }

    /// Every node's own URL: each gets edgelimit's scripts (a replica too, so that a failover finds them).
    fn node_urls(&self) -> Vec<String> {
        match self {
            DevRedis::Single(server) => vec![server.url()],
            DevRedis::Cluster(cluster) => cluster.urls(),
        }
    }

    async fn stop(self) -> Result<(), String> {
        match self {
            DevRedis::Single(server) => server.stop().await.map_err(|e| format!("could not stop redis-server: {e}")),
            // Its nodes are killed as they are dropped.
            DevRedis::Cluster(cluster) => {
                drop(cluster);
                Ok(())
            }
        }
    }
}

/// Loads every edgelimit script into the fresh Redis, so the playground's browser logs no `NOSCRIPT` HTTP 400s.
async fn load_scripts(redis_url: &str) -> Result<(), String> {
    let mut connection = redis::Client::open(redis_url)
        .map_err(|e| e.to_string())?
        .get_multiplexed_async_connection()
        .await
        .map_err(|e| e.to_string())?;
    for script in edgelimit::lua::every_script() {
        let _: String = redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(script.source())
            .query_async(&mut connection)
            .await
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}
