//! The bridge's connections to Redis, one per profile: each profile's requests run as its Redis ACL user
//! ([`super::profile`]) on a connection of its own, so Redis enforces what a token may do as well as the bridge.
//!
//! A profile's user is created (or reset to the rules of this bridge) with `ACL SETUSER` over the admin connection
//! each time its connection is made: on first use, and after Redis restarted (a Redis without persistence forgets
//! its users). Were the second step, connecting as the user, never to run (Redis gone in between), nothing is lost:
//! the user exists with this bridge's rules, and the next request connects again.

use std::io;

use redis::aio::MultiplexedConnection;
use redis::{ConnectionInfo, IntoConnectionInfo};

use super::profile::{self, Profile, RedisAcl};
use super::redis_link::RedisLink;

/// What the links are made of.
pub struct LinkConfig<'a> {
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

/// The connections of every profile.
pub struct Links {
    admin: RedisLink,
    admin_info: ConnectionInfo,
    /// Empty when the ACL is off: every profile then runs on the admin link.
    users: Vec<ProfileLink>,
}

impl Links {
    /// Checks the URL; connects nothing yet.
    pub fn new(config: &LinkConfig<'_>) -> redis::RedisResult<Links> {
        let admin_info = config.redis_url.into_connection_info()?;
        let link = |info: ConnectionInfo| RedisLink::new(info, config.timeout, config.max_reply_bytes);
        let users = match config.acl {
            RedisAcl::Off => Vec::new(),
            RedisAcl::Provision => [Profile::Limiter, Profile::Readonly]
                .into_iter()
                .filter_map(|profile| {
                    let user = profile.redis_user()?;
                    let password = profile::password(config.redis_url, user);
                    let settings = admin_info
                        .redis_settings()
                        .clone()
                        .set_username(user)
                        .set_password(&password);
                    Some(ProfileLink {
                        profile,
                        user,
                        rules: profile::acl_rules(profile, &password, config.limiter_keys),
                        link: link(admin_info.clone().set_redis_settings(settings)),
                    })
                })
                .collect(),
        };
        Ok(Links {
            admin: link(admin_info.clone()),
            admin_info,
            users,
        })
    }

    /// Where Redis is, for error messages (without any password).
    pub fn describe(&self) -> String {
        self.admin.describe()
    }

    /// The connection details of the `--redis` URL's user, for connections of their own (SCRIPT KILL).
    pub fn admin_info(&self) -> &ConnectionInfo {
        &self.admin_info
    }

    /// A connection for `profile`'s requests: its user's, created first if needed; the admin's with the ACL off.
    pub async fn connection(&self, profile: Profile) -> redis::RedisResult<MultiplexedConnection> {
        let Some(user) = self.users.iter().find(|user| user.profile == profile) else {
            return self.admin.connection().await;
        };
        user.link.connection_after(|| self.provision(user)).await
    }

    /// Creates or resets `user`'s Redis ACL user. A Redis that refuses (the `--redis` user may not run ACL SETUSER)
    /// is reported as unavailable, with what to do: the requests of that profile cannot run at all.
    async fn provision(&self, user: &ProfileLink) -> redis::RedisResult<()> {
        let mut admin = self.admin.connection().await?;
        let mut command = redis::cmd("ACL");
        command.arg("SETUSER").arg(user.user).arg(&user.rules);
        let reply: redis::RedisResult<()> = command.query_async(&mut admin).await;
        match reply {
            Err(e) if e.code().is_some() => Err(redis::RedisError::from(io::Error::other(format!(
                "the bridge could not create the Redis ACL user {} for {} tokens ({}): let the --redis user run \
                 ACL SETUSER, or start the bridge with --redis-acl off",
                user.user,
                user.profile,
                e.code().unwrap_or_default()
            )))),
            other => other,
        }
    }
}
