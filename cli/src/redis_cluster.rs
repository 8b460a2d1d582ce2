//! A real Redis Cluster of `redis-server` child processes on loopback ports, for the dev stack (`edgelimit dev
//! --cluster`), the tests and the benchmarks.
//!
//! Each node is a [`RedisServer`] in cluster mode; `redis-cli --cluster create` joins them, and the cluster is handed
//! out once every node agrees on the slot map and every replica has synced (so failover tests can start at once).

use std::io;
use std::time::{Duration, Instant};

use crate::redis_server::RedisServer;

/// How long joining the nodes may take before giving up.
const FORM_TIMEOUT: Duration = Duration::from_secs(30);

/// Redis Cluster's bus port is the client port plus this, and must be free too.
const BUS_PORT_OFFSET: u16 = 10_000;

/// A running cluster.
#[derive(Debug)]
pub struct RedisCluster {
    nodes: Vec<RedisServer>,
}

/// What a node is in the cluster now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Serves a range of slots.
    Master,
    /// Copies a master and takes over when it fails.
    Replica,
    /// Marked failed by the others, or not answering.
    Failed,
}

impl RedisCluster {
    /// Starts `masters` masters with `replicas` replicas each (3 and 1 make the usual 6-node cluster), and waits until
    /// it serves every slot.
    pub async fn start(masters: usize, replicas: usize) -> io::Result<RedisCluster> {
        if masters < 3 {
            // redis-cli refuses fewer: a cluster needs a majority of masters to fail a node over.
            return Err(io::Error::other("a Redis Cluster needs at least 3 masters"));
        }
        let mut nodes = Vec::new();
        for _ in 0..masters * (1 + replicas) {
            nodes.push(start_node().await?);
        }
        let cluster = RedisCluster { nodes };
        let addresses: Vec<String> = cluster.nodes.iter().map(|node| format!("127.0.0.1:{}", node.port())).collect();
        let output = tokio::process::Command::new("redis-cli")
            .arg("--cluster")
            .arg("create")
            .args(&addresses)
            .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
            .output()
            .await
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("could not run redis-cli ({e}); run scripts/setup, which installs redis-tools"),
                )
            })?;
        if !output.status.success() {
            return Err(io::Error::other(format!(
                "redis-cli --cluster create failed ({}): {}",
                output.status,
                String::from_utf8_lossy(&output.stdout)
            )));
        }
        cluster.wait_until_formed().await?;
        Ok(cluster)
    }

    /// Every node's URL, e.g. `redis://127.0.0.1:40123`: the seed nodes a cluster client starts from.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// Every node's port, in the order the cluster was created (masters first).
    pub fn ports(&self) -> Vec<u16> {
        self.nodes.iter().map(RedisServer::port).collect()
    }

    /// Each node's role now, by port, as the node itself reports it (`ROLE`); a node that does not answer is
    /// [`Role::Failed`].
    pub async fn roles(&self) -> Vec<(u16, Role)> {
        let mut roles = Vec::new();
        for port in self.ports() {
            let role = match command(port, &["ROLE"]).await {
                Ok(redis::Value::Array(items)) => match items.first() {
                    Some(redis::Value::BulkString(role)) if role == b"master" => Role::Master,
                    Some(redis::Value::BulkString(role)) if role == b"slave" => Role::Replica,
                    _ => Role::Failed,
                },
                _ => Role::Failed,
            };
            roles.push((port, role));
        }
        roles
    }

    /// Kills the node on `port` (a crash: no failover is started by hand). The others promote its replica after the
    /// node timeout.
    pub async fn kill(&mut self, port: u16) -> io::Result<()> {
        match self.nodes.iter_mut().find(|node| node.port() == port) {
            Some(node) => node.kill().await,
            None => Err(io::Error::other(format!("no node of this cluster on port {port}"))),
        }
    }

    /// The node id of the node on `port` (`CLUSTER MYID`).
    pub async fn node_id(&self, port: u16) -> io::Result<String> {
        text(command(port, &["CLUSTER", "MYID"]).await?)
    }

    /// The ports of the masters that serve slots now, and of the replica of each (by `CLUSTER NODES` of a live
    /// node): `(master, replicas)`.
    pub async fn shards(&self) -> io::Result<Vec<(u16, Vec<u16>)>> {
        let mut last_error = io::Error::other("no live node");
        for (port, role) in self.roles().await {
            if role == Role::Failed {
                continue;
            }
            match command(port, &["CLUSTER", "NODES"]).await.and_then(text) {
                Ok(nodes) => return Ok(shards(&nodes)),
                Err(e) => last_error = e,
            }
        }
        Err(last_error)
    }

    /// Moves the lowest `slots` slots of the master on `from` to the master on `to` with `redis-cli --cluster
    /// reshard`, `pipeline` keys per `MIGRATE`; clients meet `ASK` meanwhile. Waits until the nodes agree.
    pub async fn reshard(&self, from: u16, to: u16, slots: u32, pipeline: u32) -> io::Result<()> {
        let (from_id, to_id) = (self.node_id(from).await?, self.node_id(to).await?);
        let output = tokio::process::Command::new("redis-cli")
            .args(["--cluster", "reshard", &format!("127.0.0.1:{from}")])
            .args(["--cluster-from", &from_id, "--cluster-to", &to_id])
            .args(["--cluster-slots", &slots.to_string(), "--cluster-yes"])
            .args(["--cluster-pipeline", &pipeline.to_string()])
            .output()
            .await?;
        if !output.status.success() {
            return Err(io::Error::other(format!(
                "redis-cli --cluster reshard failed ({}): {}",
                output.status,
                String::from_utf8_lossy(&output.stdout)
            )));
        }
        self.wait_until_formed().await
    }

    /// `CLUSTER FAILOVER` on the replica on `replica` (a manual failover), and waits until it is a master and the
    /// nodes agree.
    pub async fn failover(&self, replica: u16) -> io::Result<()> {
        command(replica, &["CLUSTER", "FAILOVER"]).await?;
        let deadline = Instant::now() + FORM_TIMEOUT;
        while self.roles().await.iter().all(|&(port, role)| port != replica || role != Role::Master) {
            if Instant::now() > deadline {
                return Err(io::Error::other(format!("replica {replica} did not take over")));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.wait_until_formed().await
    }

    /// Polls until every live node reports `cluster_state:ok` and all agree on one slot map, and every replica's
    /// link to its master is up.
    pub async fn wait_until_formed(&self) -> io::Result<()> {
        let deadline = Instant::now() + FORM_TIMEOUT;
        loop {
            match self.formed().await {
                Ok(()) => return Ok(()),
                Err(e) if Instant::now() > deadline => {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("the cluster did not settle within {FORM_TIMEOUT:?}: {e}"),
                    ))
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }

    async fn formed(&self) -> io::Result<()> {
        let mut slot_maps = Vec::new();
        for (port, role) in self.roles().await {
            if role == Role::Failed {
                continue;
            }
            let info = text(command(port, &["CLUSTER", "INFO"]).await?)?;
            if !info.contains("cluster_state:ok") {
                return Err(io::Error::other(format!("node {port}: cluster state not ok")));
            }
            if role == Role::Replica {
                let replication = text(command(port, &["INFO", "replication"]).await?)?;
                if !replication.contains("master_link_status:up") {
                    return Err(io::Error::other(format!("replica {port}: not synced with its master")));
                }
            }
            slot_maps.push(slot_map(&text(command(port, &["CLUSTER", "NODES"]).await?)?));
        }
        if slot_maps.windows(2).any(|pair| pair[0] != pair[1]) {
            return Err(io::Error::other("the nodes disagree on the slot map"));
        }
        Ok(())
    }
}

/// The masters' slot ranges from `CLUSTER NODES`, by address, sorted: what every node must agree on.
fn slot_map(nodes: &str) -> Vec<String> {
    let mut map: Vec<String> = nodes
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let is_serving_master = fields.get(2)?.contains("master") && !fields[2].contains("fail");
            let address = fields.get(1)?.split('@').next()?;
            let slots = fields.get(8..)?.join(" ");
            is_serving_master.then(|| format!("{address} {slots}"))
        })
        .collect();
    map.sort();
    map
}

/// Each serving master's port with its replicas' ports, from `CLUSTER NODES`.
fn shards(nodes: &str) -> Vec<(u16, Vec<u16>)> {
    let lines: Vec<Vec<&str>> = nodes.lines().map(|line| line.split(' ').collect()).collect();
    let port = |fields: &[&str]| -> Option<u16> { fields.get(1)?.split('@').next()?.rsplit(':').next()?.parse().ok() };
    let mut shards = Vec::new();
    for master in &lines {
        let flags = master.get(2).copied().unwrap_or_default();
        if !flags.contains("master") || flags.contains("fail") || master.len() <= 8 {
            continue;
        }
        let (Some(id), Some(master_port)) = (master.first(), port(master)) else {
            continue;
        };
        let replicas = lines
            .iter()
            .filter(|node| node.get(3) == Some(id) && !node.get(2).is_some_and(|f| f.contains("fail")))
            .filter_map(|node| port(node))
            .collect();
        shards.push((master_port, replicas));
    }
    shards.sort();
    shards
}

/// Starts one node in cluster mode on a port whose bus port is free as well.
async fn start_node() -> io::Result<RedisServer> {
    let mut last_error = io::Error::other("no free port pair found");
    for _ in 0..20 {
        let port = crate::redis_server::free_port()?;
        let Some(bus) = port.checked_add(BUS_PORT_OFFSET) else {
            continue;
        };
        if std::net::TcpListener::bind(("127.0.0.1", bus)).is_err() {
            continue;
        }
        let extra = [
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
            // Short, so that a killed master's replica takes over within seconds in the tests.
            "--cluster-node-timeout",
            "2000",
        ];
        match RedisServer::start_with(port, &extra).await {
            Ok(node) => return Ok(node),
            Err(e) => last_error = e,
        }
    }
    Err(last_error)
}

/// Sends one command to the node on `port`, on a connection of its own.
pub async fn command(port: u16, args: &[&str]) -> io::Result<redis::Value> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}")).map_err(io::Error::other)?;
    let mut connection = client.get_multiplexed_async_connection().await.map_err(io::Error::other)?;
    let mut cmd = redis::cmd(args[0]);
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    cmd.query_async(&mut connection).await.map_err(io::Error::other)
}

fn text(value: redis::Value) -> io::Result<String> {
    match value {
        redis::Value::BulkString(bytes) => Ok(String::from_utf8_lossy(&bytes).into_owned()),
        redis::Value::VerbatimString { text, .. } => Ok(text),
        redis::Value::SimpleString(text) => Ok(text),
        other => Err(io::Error::other(format!("expected text, got {other:?}"))),
    }
}
