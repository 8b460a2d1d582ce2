//! The bridge in front of a Redis Cluster: `--redis redis+cluster://[user:password@]host:port[,host:port…]`.
//!
//! Keeps the slot map, sends each command to its slot's master ([`super::routing`]), and follows redirections itself,
//! resending only on a reply that proves the command did not run ([`resend`]). Why not the redis crate's cluster
//! client, and the retry rule: docs/design/bridge-cluster.md.

use std::collections::{BTreeSet, HashMap};
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock, Weak};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{ConnectionAddr, ConnectionInfo, ErrorKind, IntoConnectionInfo, RedisError, RedisResult, Value};
use tokio::time::Instant;

use super::json::{self, Words};
use super::links::{LinkConfig, NodeLinks};
use super::profile::{Profile, RedisAcl};
use super::script_bodies::ScriptBodies;
use super::script_kill::ScriptKiller;

/// The scheme of `--redis` that names a cluster's seed nodes.
pub const SCHEME: &str = "redis+cluster://";

/// How often the slot map is read again when nothing asked for it.
pub const REFRESH_EVERY: Duration = Duration::from_secs(5);

/// Slots in a Redis Cluster.
const SLOTS: usize = 16384;

/// A slot no known master serves.
const NO_OWNER: u16 = u16::MAX;

/// The most redirections one command follows: more means the nodes disagree.
pub(super) const MAX_REDIRECTS: u32 = 5;

/// The first and the longest wait between tries of a command refused for now (`TRYAGAIN`, `CLUSTERDOWN`, …).
pub(super) const FIRST_BACKOFF: Duration = Duration::from_millis(10);
const MAX_BACKOFF: Duration = Duration::from_millis(200);

/// The most node addresses kept: a cluster has far fewer; past that the map of links is cleared and made again.
const MAX_NODES: usize = 1024;

/// The seed nodes of a `redis+cluster://` URL (user and password apply to every node); `None` for one Redis.
pub fn seeds(url: &str) -> RedisResult<Option<Vec<ConnectionInfo>>> {
    let Some(rest) = url
        .get(..SCHEME.len())
        .filter(|scheme| scheme.eq_ignore_ascii_case(SCHEME))
        .and_then(|_| url.get(SCHEME.len()..))
    else {
        return Ok(None);
    };
    let invalid = |why: String| RedisError::from((ErrorKind::InvalidClientConfig, "invalid cluster URL", why));
    let (user, hosts) = match rest.rsplit_once('@') {
        Some((user, hosts)) => (format!("{user}@"), hosts),
        None => (String::new(), rest),
    };
    let (hosts, tail) = hosts.split_at(hosts.find(['/', '?']).unwrap_or(hosts.len()));
    let seeds = hosts
        .split(',')
        .map(|host| {
            if host.is_empty() {
                return Err(invalid(format!("an empty node in {SCHEME}…: list the seed nodes as host:port,host:port")));
            }
            format!("redis://{user}{host}{tail}").into_connection_info()
        })
        .collect::<RedisResult<Vec<_>>>()?;
    if seeds.iter().any(|seed| !matches!(seed.addr(), ConnectionAddr::Tcp(..))) {
        return Err(invalid("cluster nodes are reached over TCP only".into()));
    }
    Ok(Some(seeds))
}

/// The seed nodes of `url` as `host:port,host:port`, without a password; `None` for one Redis.
pub fn describe_url(url: &str) -> Option<String> {
    match seeds(url) {
        Ok(Some(seeds)) => {
            Some(format!("cluster {}", seeds.iter().map(|seed| seed.addr().to_string()).collect::<Vec<_>>().join(",")))
        }
        Ok(None) => None,
        Err(_) => Some("an invalid cluster URL".to_owned()),
    }
}

/// One node: its links (admin and a user per profile) and its own `SCRIPT KILL`.
pub struct Node {
    /// `host:port`, as the cluster names it.
    pub address: Arc<str>,
    /// The connections to it.
    pub links: NodeLinks,
    /// Stops a script that runs too long on this node.
    pub killer: Arc<ScriptKiller>,
}

/// Which master serves each slot.
struct SlotMap {
    /// Per slot, an index into `masters`, or [`NO_OWNER`].
    owner: Vec<u16>,
    masters: Vec<Arc<str>>,
    /// Every node the last read named, masters first: where the next read is tried.
    nodes: Vec<Arc<str>>,
}

impl SlotMap {
    fn empty() -> Self {
        SlotMap { owner: vec![NO_OWNER; SLOTS], masters: Vec::new(), nodes: Vec::new() }
    }

    fn master_of(&self, slot: u16) -> Option<Arc<str>> {
        let index = *self.owner.get(usize::from(slot))?;
        self.masters.get(usize::from(index)).cloned()
    }

    /// Records `address` as the master of `slot` (a `MOVED` said so).
    fn set_owner(&mut self, slot: u16, address: &str) {
        let index = match self.masters.iter().position(|master| &**master == address) {
            Some(index) => index,
            None => {
                self.masters.push(Arc::from(address));
                self.masters.len() - 1
            }
        };
        if let (Some(owner), Ok(index)) = (self.owner.get_mut(usize::from(slot)), u16::try_from(index)) {
            *owner = index;
        }
    }

    /// The masters that serve at least one slot.
    fn serving_masters(&self) -> Vec<Arc<str>> {
        let serving: BTreeSet<u16> = self.owner.iter().copied().filter(|&i| i != NO_OWNER).collect();
        serving.into_iter().filter_map(|index| self.masters.get(usize::from(index)).cloned()).collect()
    }
}

/// A cluster's nodes and slot map.
pub struct Cluster {
    seeds: Vec<ConnectionInfo>,
    /// The first seed: every node's connection details are its own, at the node's address.
    template: ConnectionInfo,
    /// What each node's links are made of (the `--redis` URL, its user, the bridge's limits).
    redis_url: String,
    acl: RedisAcl,
    limiter_keys: Vec<String>,
    timeout: Duration,
    max_reply_bytes: u64,
    nodes: Mutex<HashMap<Arc<str>, Arc<Node>>>,
    map: RwLock<SlotMap>,
    /// Held while the map is read from the cluster: one read at a time.
    refreshing: tokio::sync::Mutex<()>,
    /// Counts the reads: who asked for a read before the last one finished needs no other.
    generation: AtomicU64,
    /// A read in the background is under way or queued.
    refresh_queued: AtomicBool,
    /// Spreads key-less commands over the masters.
    next_master: AtomicUsize,
    /// When a node's trouble was last logged, in ms since `created`: at most one line a second.
    logged_at: AtomicU64,
    created: Instant,
    /// Script bodies for `NOSCRIPT` after a failover.
    pub scripts: ScriptBodies,
}

/// A command that failed on a cluster, as the request must be answered.
#[derive(Debug)]
pub enum Failed {
    /// Redis answered with an error that may not be resent after.
    Reply(RedisError),
    /// Refused for now (`TRYAGAIN`, `CLUSTERDOWN`, …) until the request's time ran out: nothing ran.
    Busy(RedisError),
    /// Sent, then no reply (I/O error, timeout): it may have run, and is not sent again.
    Lost {
        /// The node it was sent to.
        address: Arc<str>,
        /// What happened.
        error: RedisError,
    },
    /// Never sent: no node could be reached for it within the request's time.
    Unreachable(String),
    /// Never sent: a node refused the bridge's login or ACL user. Passed on as Redis's text (`WRONGPASS`, `NOPERM`),
    /// so clients do not take it for an outage.
    Refused(String),
    /// A command every master runs ran on some, and on others was lost or never sent.
    Partial(String),
}

impl Failed {
    /// The error's text for the client.
    pub fn text(&self) -> String {
        match self {
            Failed::Reply(error) => json::redis_error_text(error).unwrap_or_else(|| error.to_string()),
            // Redis's own words: clients know these codes for "unavailable now".
            Failed::Busy(error) => json::redis_error_text(error).unwrap_or_else(|| error.to_string()),
            Failed::Lost { address, error } => format!(
                "redis node {address} failed after the command was sent ({error}): it may have run, and the bridge \
                 does not send it again (a decision or a refund must never run twice); the bridge reconnects by \
                 itself"
            ),
            Failed::Unreachable(why) => format!("{why}; the command was not sent: retry shortly"),
            Failed::Refused(text) | Failed::Partial(text) => text.clone(),
        }
    }
}

/// Why a command may be sent again, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resend {
    /// `MOVED <slot> <address>`: the slot has a new master; send it there (and refresh the map).
    Moved {
        /// The slot.
        slot: u16,
        /// Its master now.
        address: String,
    },
    /// `ASK <slot> <address>`: the slot is migrating; send `ASKING` and the command to that node, once.
    Ask {
        /// The node importing the slot.
        address: String,
    },
    /// `TRYAGAIN`, `CLUSTERDOWN`, `MASTERDOWN`, `LOADING`, `BUSY`: refused for now; wait and send it again.
    Wait,
    /// `NOSCRIPT`: the node does not have the script; load it (when its body is known) and send it again.
    NoScript,
}

/// **The retry rule**: how a command answered `reply` may be sent again; `None` means the reply is the answer.
/// Only a reply that proves the command did not run allows it: a decision run twice spends permits twice, a refund
/// run twice over-admits (docs/design/bridge-cluster.md).
pub fn resend(reply: &RedisResult<Value>) -> Option<Resend> {
    let error = reply.as_ref().err()?;
    match error.code()? {
        "MOVED" => {
            let (address, slot) = error.redirect_node()?;
            Some(Resend::Moved { slot, address: address.to_owned() })
        }
        "ASK" => {
            let (address, _slot) = error.redirect_node()?;
            Some(Resend::Ask { address: address.to_owned() })
        }
        "TRYAGAIN" | "CLUSTERDOWN" | "MASTERDOWN" | "LOADING" | "BUSY" => Some(Resend::Wait),
        "NOSCRIPT" => Some(Resend::NoScript),
        _ => None,
    }
}

/// Where a command is sent first.
#[derive(Debug, Clone)]
pub enum Target {
    /// The master of this slot.
    Slot(u16),
    /// Any master.
    AnyMaster,
    /// This node, whatever the map says (a command every master must run).
    Node(Arc<str>),
}

/// Where the next try goes, when a reply said.
#[derive(Debug, Clone)]
pub struct Redirect {
    /// The node.
    pub address: Arc<str>,
    /// Send `ASKING` first (an `ASK` redirection).
    pub asking: bool,
}

impl Cluster {
    /// A cluster reached through `seeds` (at least one); connects nothing yet.
    pub fn new(template: ConnectionInfo, seeds: Vec<ConnectionInfo>, config: &LinkConfig<'_>) -> Arc<Cluster> {
        Arc::new(Cluster {
            seeds,
            template,
            redis_url: config.redis_url.to_owned(),
            acl: config.acl,
            limiter_keys: config.limiter_keys.to_vec(),
            timeout: config.timeout,
            max_reply_bytes: config.max_reply_bytes,
            nodes: Mutex::default(),
            map: RwLock::new(SlotMap::empty()),
            refreshing: tokio::sync::Mutex::new(()),
            generation: AtomicU64::new(0),
            refresh_queued: AtomicBool::new(false),
            next_master: AtomicUsize::new(0),
            logged_at: AtomicU64::new(0),
            created: Instant::now(),
            scripts: ScriptBodies::default(),
        })
    }

    /// The request timeout: how long one request may keep trying.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The reply cap (`--max-reply-bytes`).
    pub fn max_reply_bytes(&self) -> u64 {
        self.max_reply_bytes
    }

    /// The seeds, for messages.
    pub fn describe(&self) -> String {
        let seeds: Vec<String> = self.seeds.iter().map(|seed| seed.addr().to_string()).collect();
        format!("the cluster at {}", seeds.join(","))
    }

    /// The admin connection details of a master (`PUBLISH` reaches every node), or of the first seed before any map.
    pub fn any_admin_info(&self) -> ConnectionInfo {
        let master = self.read_map().masters.first().cloned();
        match master.and_then(|address| self.node(&address).ok()) {
            Some(node) => node.links.admin_info().clone(),
            None => self.template.clone(),
        }
    }

    fn read_map(&self) -> std::sync::RwLockReadGuard<'_, SlotMap> {
        self.map.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write_map(&self) -> std::sync::RwLockWriteGuard<'_, SlotMap> {
        self.map.write().unwrap_or_else(PoisonError::into_inner)
    }

    fn lock_nodes(&self) -> MutexGuard<'_, HashMap<Arc<str>, Arc<Node>>> {
        self.nodes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The first seed's connection details (its user, password, protocol) at another address.
    fn template(&self, (host, port): (&str, u16)) -> ConnectionInfo {
        self.template.clone().set_addr(ConnectionAddr::Tcp(host.to_owned(), port))
    }

    /// The node at `address` (`host:port`), its links made on first use.
    pub fn node(&self, address: &str) -> Result<Arc<Node>, Failed> {
        if let Some(node) = self.lock_nodes().get(address) {
            return Ok(node.clone());
        }
        let (host, port) = address
            .rsplit_once(':')
            .and_then(|(host, port)| Some((host.trim_start_matches('[').trim_end_matches(']'), port.parse().ok()?)))
            .filter(|(host, _)| !host.is_empty())
            .ok_or_else(|| Failed::Unreachable(format!("the cluster named a node at {address:?}, not host:port")))?;
        let info = self.template((host, port));
        let config = LinkConfig {
            redis_url: &self.redis_url,
            acl: self.acl,
            limiter_keys: &self.limiter_keys,
            timeout: self.timeout,
            max_reply_bytes: self.max_reply_bytes,
        };
        let node = Arc::new(Node {
            address: Arc::from(address),
            killer: Arc::new(ScriptKiller::new(info.clone(), self.timeout)),
            links: NodeLinks::new(info, &config, true),
        });
        let mut nodes = self.lock_nodes();
        if nodes.len() >= MAX_NODES {
            nodes.clear();
        }
        Ok(nodes.entry(node.address.clone()).or_insert(node).clone())
    }

    /// Where a command for `target` goes now: `None` when no master is known for it (the map must be read).
    pub fn address_of(&self, target: &Target) -> Option<Arc<str>> {
        let map = self.read_map();
        match target {
            Target::Slot(slot) => map.master_of(*slot),
            Target::Node(address) => Some(address.clone()),
            Target::AnyMaster => {
                let masters = map.serving_masters();
                let next = self.next_master.fetch_add(1, Ordering::Relaxed);
                masters.get(next % masters.len().max(1)).cloned()
            }
        }
    }

    /// The masters that serve slots now, reading the map first when none is known.
    pub async fn masters(&self, deadline: Instant) -> Result<Vec<Arc<str>>, Failed> {
        loop {
            let masters = self.read_map().serving_masters();
            if !masters.is_empty() {
                return Ok(masters);
            }
            self.wait_for_map(deadline).await?;
        }
    }

    /// Reads the map again and waits a little, unless the request's time is up: then why no node serves it.
    pub async fn wait_for_map(&self, deadline: Instant) -> Result<(), Failed> {
        let seen = self.generation.load(Ordering::Acquire);
        if Instant::now() >= deadline {
            return Err(Failed::Unreachable(format!(
                "no node of {} could be reached for this command within the bridge's Redis timeout",
                self.describe()
            )));
        }
        let _ = tokio::time::timeout_at(deadline, self.refresh(seen)).await;
        tokio::time::sleep_until((Instant::now() + FIRST_BACKOFF * 5).min(deadline)).await;
        Ok(())
    }

    /// Reads the slot map from the first node that answers, unless a read finished since the caller saw `seen`.
    pub async fn refresh(&self, seen: u64) {
        let _one_at_a_time = self.refreshing.lock().await;
        if self.generation.load(Ordering::Acquire) != seen {
            return;
        }
        let mut candidates: Vec<Arc<str>> = self.read_map().nodes.clone();
        for seed in &self.seeds {
            candidates.push(Arc::from(seed.addr().to_string()));
        }
        let mut tried = BTreeSet::new();
        for address in candidates {
            if !tried.insert(address.clone()) {
                continue;
            }
            match self.read_slots(&address).await {
                Ok(map) if !map.masters.is_empty() => {
                    *self.write_map() = map;
                    break;
                }
                Ok(_) => {}
                Err(e) => self.log(format_args!("could not read the slot map from redis node {address}: {e}")),
            }
        }
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// Logs a node's trouble on stderr, at most once a second.
    pub fn log(&self, what: std::fmt::Arguments<'_>) {
        let now = u64::try_from(self.created.elapsed().as_millis()).unwrap_or(u64::MAX).saturating_add(1000);
        let last = self.logged_at.load(Ordering::Relaxed);
        if now.saturating_sub(last) >= 1000
            && self.logged_at.compare_exchange(last, now, Ordering::AcqRel, Ordering::Relaxed).is_ok()
        {
            eprintln!("edgelimit bridge: {what}");
        }
    }

    /// No connection to `node` could be had, so nothing was sent: logs it, and starts a `SCRIPT KILL` there when
    /// connecting timed out (a script may hold the node).
    pub fn unavailable(&self, node: &Node, address: &str, error: &RedisError) {
        self.log(format_args!("redis node {address} unavailable: {error}"));
        if error.is_timeout() {
            node.killer.start();
        }
    }

    /// After [`unavailable`](Cluster::unavailable): waits for the map to be read again; past `deadline`, why not.
    pub async fn reroute(&self, address: &str, error: &RedisError, deadline: Instant) -> Result<(), Failed> {
        let refused = match error.kind() {
            redis::ErrorKind::AuthenticationFailed => json::refusal_text(error, address),
            _ if error.code() == Some("NOPERM") => json::redis_error_text(error),
            _ => None,
        };
        if let Some(text) = refused {
            return Err(Failed::Refused(text));
        }
        if Instant::now() >= deadline {
            return Err(Failed::Unreachable(format!(
                "redis node {address} of {} is unavailable ({error})",
                self.describe()
            )));
        }
        self.wait_for_map(deadline).await
    }

    /// A command sent to `node` that got no reply: it may have run, so it is never resent. A timeout starts a
    /// `SCRIPT KILL` there, and the map is read again soon.
    pub fn lost(self: &Arc<Self>, node: &Node, address: Arc<str>, error: RedisError) -> Failed {
        if error.is_timeout() {
            node.killer.start();
        }
        self.refresh_soon();
        Failed::Lost { address, error }
    }

    /// Records what a `MOVED` said: `slot` is served by `address` now; and reads the whole map again soon.
    pub fn moved(self: &Arc<Self>, slot: u16, address: &str) {
        self.write_map().set_owner(slot, address);
        self.refresh_soon();
    }

    /// Queues one read of the map in the background (after `MOVED`, or an error on a node), unless one is queued.
    pub fn refresh_soon(self: &Arc<Self>) {
        if self.refresh_queued.swap(true, Ordering::AcqRel) {
            return;
        }
        let cluster = self.clone();
        let seen = self.generation.load(Ordering::Acquire);
        tokio::spawn(async move {
            cluster.refresh_queued.store(false, Ordering::Release);
            cluster.refresh(seen).await;
        });
    }

    /// `CLUSTER SLOTS` from the node at `address`, as a map.
    async fn read_slots(&self, address: &str) -> RedisResult<SlotMap> {
        let node = self.node(address).map_err(|e| RedisError::from(io::Error::other(e.text())))?;
        let mut connection = node.links.admin_connection().await?;
        let reply: Value = redis::cmd("CLUSTER").arg("SLOTS").query_async(&mut connection).await?;
        let host = address.rsplit_once(':').map_or(address, |(host, _)| host);
        parse_slots(reply, host)
    }

    /// Sends `command` for `profile` to the node `target` names, following what [`resend`] allows until `deadline`.
    pub async fn run(
        self: &Arc<Self>,
        profile: Profile,
        command: &redis::Cmd,
        words: &Words,
        target: Target,
        mut redirect: Option<Redirect>,
        deadline: Instant,
    ) -> Result<Value, Failed> {
        let mut redirects = 0;
        let mut backoff = FIRST_BACKOFF;
        let mut loaded = false;
        loop {
            let (address, asking) = match redirect.take() {
                Some(redirect) => (redirect.address, redirect.asking),
                None => match self.address_of(&target) {
                    Some(address) => (address, false),
                    None => {
                        self.wait_for_map(deadline).await?;
                        continue;
                    }
                },
            };
            let node = self.node(&address)?;
            let mut connection = match node.links.connection(profile).await {
                Ok(connection) => connection,
                Err(error) => {
                    // Nothing was sent: read the map again (the node may be gone) and try again in time.
                    self.unavailable(&node, &address, &error);
                    self.reroute(&address, &error, deadline).await?;
                    continue;
                }
            };
            let reply = send(&mut connection, command, asking).await;
            let how = resend(&reply);
            let error = match reply {
                Ok(value) => return Ok(value),
                Err(error) => error,
            };
            let Some(how) = how else {
                if error.code().is_some() {
                    return Err(Failed::Reply(error));
                }
                // Sent, and no reply: it may have run. Never sent again (see `resend`).
                return Err(self.lost(&node, address, error));
            };
            match how {
                Resend::Moved { slot, address: owner } => {
                    self.moved(slot, &owner);
                    redirect = Some(Redirect { address: Arc::from(owner), asking: false });
                }
                Resend::Ask { address: importing } => {
                    redirect = Some(Redirect { address: Arc::from(importing), asking: true });
                }
                Resend::Wait => {
                    if error.code() == Some("BUSY") {
                        node.killer.start();
                    } else {
                        self.refresh_soon();
                    }
                    if !pause(&mut backoff, deadline).await {
                        return Err(Failed::Busy(error));
                    }
                    // An ASK holds for this try only; otherwise the map (refreshed meanwhile) says where.
                    redirect = asking.then_some(Redirect { address, asking });
                    continue;
                }
                Resend::NoScript => {
                    let body = if loaded { None } else { self.scripts.body_for(words) };
                    let Some(body) = body else {
                        return Err(Failed::Reply(error));
                    };
                    loaded = true;
                    let load: RedisResult<Value> =
                        redis::cmd("SCRIPT").arg("LOAD").arg(body.as_slice()).query_async(&mut connection).await;
                    if load.is_err() {
                        return Err(Failed::Reply(error));
                    }
                    redirect = Some(Redirect { address, asking });
                    continue;
                }
            }
            redirects += 1;
            if redirects > MAX_REDIRECTS {
                return Err(Failed::Reply(error));
            }
        }
    }

    /// Provisions the profiles' users on every master and reads the map: what [`super::serve`] checks at start-up.
    pub async fn check_at_start(self: &Arc<Self>, profiles: &[Profile]) -> Option<MultiplexedConnection> {
        let deadline = Instant::now() + self.timeout;
        let masters = self.masters(deadline).await.ok()?;
        let mut admin = None;
        for address in masters {
            let Ok(node) = self.node(&address) else { continue };
            for profile in profiles {
                if let Err(e) = node.links.connection(*profile).await {
                    eprintln!("edgelimit bridge: WARNING: {profile} tokens cannot be served by node {address}: {e}");
                }
            }
            if admin.is_none() {
                admin = node.links.admin_connection().await.ok();
            }
        }
        admin
    }
}

/// Waits before the next try, doubling `backoff`; false when the deadline comes first.
pub async fn pause(backoff: &mut Duration, deadline: Instant) -> bool {
    let until = Instant::now() + *backoff;
    if until >= deadline {
        return false;
    }
    tokio::time::sleep_until(until).await;
    *backoff = (*backoff * 2).min(MAX_BACKOFF);
    true
}

/// Sends one command, after `ASKING` in the same write when `asking` (an `ASK` holds for the next command only).
pub async fn send(connection: &mut MultiplexedConnection, command: &redis::Cmd, asking: bool) -> RedisResult<Value> {
    if !asking {
        return connection.send_packed_command(command).await.and_then(json::top_level_error);
    }
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    pipe.cmd("ASKING");
    pipe.add_command(command.clone());
    let mut replies = pipe.query_async::<Vec<RedisResult<Value>>>(connection).await?;
    let reply = replies.pop();
    match (replies.pop(), reply) {
        (Some(Err(refused)), _) => Err(refused),
        (_, Some(reply)) => reply,
        _ => Err(RedisError::from(io::Error::other("Redis answered ASKING and a command with one reply"))),
    }
}

/// Keeps the map of the cluster behind `cluster` fresh until the bridge is gone.
pub async fn keep_refreshing(cluster: Weak<Cluster>) {
    loop {
        let Some(live) = cluster.upgrade() else { return };
        let seen = live.generation.load(Ordering::Acquire);
        live.refresh(seen).await;
        drop(live);
        tokio::time::sleep(REFRESH_EVERY).await;
    }
}

/// A `CLUSTER SLOTS` reply as a map. A node shown without a host (`""` or `?`) is on `default_host`, who answered.
fn parse_slots(reply: Value, default_host: &str) -> RedisResult<SlotMap> {
    let bad = |why: &str| RedisError::from(io::Error::other(format!("an unexpected CLUSTER SLOTS reply: {why}")));
    let Value::Array(ranges) = reply else {
        return Err(bad("not an array"));
    };
    let mut map = SlotMap::empty();
    let mut replicas = Vec::new();
    for range in ranges {
        let Value::Array(fields) = range else {
            return Err(bad("a range that is not an array"));
        };
        let mut fields = fields.into_iter();
        let (Some(Value::Int(start)), Some(Value::Int(end))) = (fields.next(), fields.next()) else {
            return Err(bad("a range without its bounds"));
        };
        let mut nodes = fields.filter_map(|node| node_address(node, default_host));
        let Some(master) = nodes.next() else { continue };
        replicas.extend(nodes);
        let (Ok(start), Ok(end)) = (usize::try_from(start), usize::try_from(end)) else {
            return Err(bad("a negative slot"));
        };
        for slot in start..=end.min(SLOTS - 1) {
            if let Ok(slot) = u16::try_from(slot) {
                map.set_owner(slot, &master);
            }
        }
    }
    map.nodes = map.masters.clone();
    for replica in replicas {
        if !map.nodes.iter().any(|node| **node == *replica) {
            map.nodes.push(Arc::from(replica));
        }
    }
    Ok(map)
}

/// `host:port` of one node in a `CLUSTER SLOTS` range.
fn node_address(node: Value, default_host: &str) -> Option<String> {
    let Value::Array(fields) = node else { return None };
    let mut fields = fields.into_iter();
    let host = match fields.next()? {
        Value::BulkString(host) => String::from_utf8(host).ok()?,
        Value::SimpleString(host) => host,
        _ => return None,
    };
    let Value::Int(port) = fields.next()? else { return None };
    let host = if host.is_empty() || host == "?" { default_host.to_owned() } else { host };
    Some(format!("{host}:{port}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_url_names_seeds_with_one_user_for_all() {
        assert!(seeds("redis://127.0.0.1:6379").unwrap().is_none());
        let seeds_ = seeds("redis+cluster://u:p%40w@10.0.0.1:7000,10.0.0.2:7001").unwrap().unwrap();
        assert_eq!(seeds_.len(), 2);
        assert_eq!(seeds_[1].addr().to_string(), "10.0.0.2:7001");
        assert_eq!(seeds_[1].redis_settings().username(), Some("u"));
        assert_eq!(seeds_[1].redis_settings().password(), Some("p@w"));
        assert!(seeds("redis+cluster://").is_err());
        assert!(seeds("redis+cluster://a:1,,b:2").is_err());
        assert_eq!(describe_url("REDIS+CLUSTER://x:y@h:1,h:2/").as_deref(), Some("cluster h:1,h:2"));
        assert_eq!(describe_url("redis://h:1"), None);
    }

    #[test]
    fn only_replies_that_prove_nothing_ran_are_resent() {
        let reply = |text: &[u8]| json::top_level_error(redis::parse_redis_value(text).unwrap());
        assert_eq!(
            resend(&reply(b"-MOVED 3999 127.0.0.1:6381\r\n")),
            Some(Resend::Moved { slot: 3999, address: "127.0.0.1:6381".into() })
        );
        assert_eq!(
            resend(&reply(b"-ASK 3999 127.0.0.1:6381\r\n")),
            Some(Resend::Ask { address: "127.0.0.1:6381".into() })
        );
        for wait in ["TRYAGAIN x", "CLUSTERDOWN The cluster is down", "LOADING x", "BUSY x", "MASTERDOWN x"] {
            assert_eq!(resend(&reply(format!("-{wait}\r\n").as_bytes())), Some(Resend::Wait), "{wait}");
        }
        assert_eq!(resend(&reply(b"-NOSCRIPT x\r\n")), Some(Resend::NoScript));
        for final_ in ["ERR x", "WRONGTYPE x", "READONLY x", "E2", "CROSSSLOT x", "EXECABORT x"] {
            assert_eq!(resend(&reply(format!("-{final_}\r\n").as_bytes())), None, "{final_}");
        }
        assert_eq!(resend(&reply(b":1\r\n")), None);
        let lost = Err(RedisError::from(io::Error::new(io::ErrorKind::TimedOut, "no reply")));
        assert_eq!(resend(&lost), None);
        let broken = Err(RedisError::from(io::Error::new(io::ErrorKind::BrokenPipe, "gone")));
        assert_eq!(resend(&broken), None);
    }

    #[test]
    fn slots_replies_become_a_map_and_odd_ones_errors() {
        let reply = redis::parse_redis_value(
            b"*2\r\n*4\r\n:0\r\n:8191\r\n*3\r\n$9\r\n127.0.0.1\r\n:7000\r\n$2\r\nid\r\n*3\r\n$0\r\n\r\n:7003\r\n$2\r\nid\r\n\
              *3\r\n:8192\r\n:16383\r\n*2\r\n$1\r\n?\r\n:7001\r\n",
        )
        .unwrap();
        let map = parse_slots(reply, "10.0.0.9").unwrap();
        assert_eq!(map.master_of(0).as_deref(), Some("127.0.0.1:7000"));
        assert_eq!(map.master_of(16383).as_deref(), Some("10.0.0.9:7001"));
        assert_eq!(map.nodes.len(), 3);
        assert!(map.nodes.iter().any(|node| &**node == "10.0.0.9:7003"));
        assert!(parse_slots(Value::Int(1), "h").is_err());
        let odd = redis::parse_redis_value(b"*1\r\n*3\r\n:-1\r\n:99999\r\n*2\r\n$1\r\nh\r\n:1\r\n").unwrap();
        assert!(parse_slots(odd, "h").is_err());
        let huge = redis::parse_redis_value(b"*1\r\n*3\r\n:0\r\n:99999\r\n*2\r\n$1\r\nh\r\n:1\r\n").unwrap();
        assert_eq!(parse_slots(huge, "h").unwrap().master_of(16383).as_deref(), Some("h:1"));
    }
}
