//! The bridge's connections to Redis, one per profile, each as its Redis ACL user ([`super::profile`]), so Redis
//! enforces what a token may do as well as the bridge.
//!
//! A profile's user is created (or reset) with `ACL SETUSER` each time its connection is made, so a restarted Redis
//! gets it back. On a cluster every node gets its own [`NodeLinks`], since Redis does not pass users between nodes.

use std::sync::Arc;

use redis::aio::MultiplexedConnection;
use redis::{ConnectionInfo, IntoConnectionInfo};

use super::cluster::{self, Cluster};
use super::profile::{self, Profile, RedisAcl};
use super::redis_link::{Lane, RedisLink};

/// What the links are made of.
pub struct LinkConfig<'a> {
    /// `--redis`: one Redis (`redis://…`, `unix://…`) or a cluster's seed nodes (`redis+cluster://…`).
    pub redis_url: &'a str,
    pub acl: RedisAcl,
    pub limiter_keys: &'a [String],
    pub timeout: std::time::Duration,
    pub max_reply_bytes: u64,
}

/// A profile's own link and the rules of its user.
struct ProfileLink {
    profile: Profile,
    user: &'static str,
    rules: Vec<String>,
    link: RedisLink,
}

/// Where the bridge's requests go: one Redis, or a cluster's nodes.
pub enum Links {
    /// One Redis (or a proxy that looks like one).
    Single(Box<NodeLinks>),
    /// A Redis Cluster, routed by the bridge.
    Cluster(Arc<Cluster>),
}

impl Links {
    /// Where Redis is, for error messages (without any password).
    pub fn describe(&self) -> String {
        match self {
            Links::Single(links) => links.describe(),
            Links::Cluster(cluster) => cluster.describe(),
        }
    }

    /// The `--redis` URL's user's connection details on one node, for connections of their own (SCRIPT KILL,
    /// subscriptions).
    pub fn admin_info(&self) -> ConnectionInfo {
        match self {
            Links::Single(links) => links.admin_info().clone(),
            Links::Cluster(cluster) => cluster.any_admin_info(),
        }
    }

    /// Checks the URL; connects nothing yet.
    pub fn new(config: &LinkConfig<'_>) -> redis::RedisResult<Links> {
        if let Some(seeds) = cluster::seeds(config.redis_url)? {
            // `seeds` names at least one node, or refuses the URL.
            if let Some(first) = seeds.first().cloned() {
                return Ok(Links::Cluster(Cluster::new(first, seeds, config)));
            }
        }
        let info = config.redis_url.into_connection_info()?;
        Ok(Links::Single(Box::new(NodeLinks::new(info, config, false))))
    }
}

/// The connections of every profile to one Redis (or one node of a cluster).
pub struct NodeLinks {
    admin: RedisLink,
    admin_info: ConnectionInfo,
    /// Empty when the ACL is off: every profile then runs on the admin link.
    users: Vec<ProfileLink>,
}

impl NodeLinks {
    /// The links to the Redis `admin_info` names; the profiles' passwords derive from `config.redis_url`. On a
    /// cluster's node (`in_cluster`) the users also hold `ASKING`. Connects nothing yet.
    pub fn new(admin_info: ConnectionInfo, config: &LinkConfig<'_>, in_cluster: bool) -> NodeLinks {
        let link = |info: ConnectionInfo| RedisLink::new(info, config.timeout, config.max_reply_bytes);
        let users = match config.acl {
            RedisAcl::Off => Vec::new(),
            RedisAcl::Provision => [Profile::Limiter, Profile::Readonly]
                .into_iter()
                .filter_map(|profile| {
                    let user = profile.redis_user()?;
                    let password = profile::password(config.redis_url, user);
                    let settings = admin_info.redis_settings().clone().set_username(user).set_password(&password);
                    Some(ProfileLink {
                        profile,
                        user,
                        rules: profile::acl_rules(profile, &password, config.limiter_keys)
                            .into_iter()
                            .chain(in_cluster.then(|| "+asking".to_owned()))
                            .collect(),
                        link: link(admin_info.clone().set_redis_settings(settings)),
                    })
                })
                .collect(),
        };
        NodeLinks { admin: link(admin_info.clone()), admin_info, users }
    }

    /// Where Redis is, for error messages (without any password).
    pub fn describe(&self) -> String {
        self.admin.describe()
    }

    /// The connection details of the `--redis` URL's user, for connections of their own (SCRIPT KILL).
    pub fn admin_info(&self) -> &ConnectionInfo {
        &self.admin_info
    }

    /// The connection as the `--redis` URL's own user (reading a cluster's slot map, start-up checks).
    pub async fn admin_connection(&self) -> redis::RedisResult<MultiplexedConnection> {
        self.admin.connection().await
    }

    /// A connection for `profile`'s requests: its user's, created first if needed; the admin's with the ACL off.
    pub async fn connection(&self, profile: Profile) -> redis::RedisResult<MultiplexedConnection> {
        self.lane(profile, Lane::Main).await
    }

    /// [`NodeLinks::connection`] on `lane`.
    pub async fn lane(&self, profile: Profile, lane: Lane) -> redis::RedisResult<MultiplexedConnection> {
        let Some(user) = self.users.iter().find(|user| user.profile == profile) else {
            return self.admin.connection_after(lane, || async { Ok(()) }).await;
        };
        user.link.connection_after(lane, || self.provision(user)).await
    }

    /// Creates or resets `user`'s Redis ACL user. A refusal becomes a `NOPERM` saying what to do: no retry fixes it,
    /// so clients must not take it for an outage (and fail open).
    async fn provision(&self, user: &ProfileLink) -> redis::RedisResult<()> {
        let mut admin = self.admin.connection().await?;
        let mut command = redis::cmd("ACL");
        command.arg("SETUSER").arg(user.user).arg(&user.rules);
        let reply: redis::RedisResult<()> = command.query_async(&mut admin).await;
        match reply {
            // Only a refusal is rewritten: LOADING, BUSY and the like stay an outage for clients.
            Err(e) if e.code() == Some("NOPERM") => Err(redis::RedisError::from((
                redis::ErrorKind::Server(redis::ServerErrorKind::NoPerm),
                "ACL SETUSER refused",
                format!(
                    "the bridge could not create the Redis ACL user {} for {} tokens ({}): let the --redis user run \
                     ACL SETUSER, or start the bridge with --redis-acl off",
                    user.user,
                    user.profile,
                    e.code().unwrap_or_default()
                ),
            ))),
            other => other,
        }
    }
}
