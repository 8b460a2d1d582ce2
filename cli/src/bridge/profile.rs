//! What a token may do: its profile, and the Redis ACL user that each profile's requests run as.
//!
//! | profile | for | the bridge lets it run (the first fence, [`super::fence`]) | its Redis ACL user (the second) |
//! |---|---|---|---|
//! | `limiter` | Workers, servers | edgelimit's own scripts, at the server's time, refunds only of grants a member names | `edgelimit-limiter`: the commands those scripts call, on the limiter's keys |
//! | `readonly` | dashboards, `state()` | the read-only `inspect` script and a list of reads, on the limiter's keys, bounded as the limiter's | `edgelimit-readonly`: those reads, on the limiter's keys |
//! | `admin` | operators, `edgelimit admin` | everything the bridge serves | the user of `--redis` |
//!
//! Why two fences: Redis's ACL checks each `redis.call`, so a user that may run the scripts may write their keys, and
//! with `EVAL` any script could; and the scripts trust their arguments. The ACL cannot say "only these scripts, with
//! these arguments", so the bridge does ([`super::fence`]); the ACL user bounds what a bug in that fence could reach.
//! The bridge creates each user with `ACL SETUSER` ([`RedisAcl`]), its password derived from the `--redis` URL.

use std::fmt;
use std::str::FromStr;

use sha2::{Digest, Sha256};

use super::fence;

/// What a token may do (see the module's table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Profile {
    /// Decisions with edgelimit's scripts only.
    Limiter,
    /// Reads.
    Readonly,
    /// Everything the bridge serves.
    Admin,
}

impl Profile {
    /// The profiles' names, for error messages.
    pub const NAMES: &'static str = "limiter, readonly, admin";

    /// The profile's name in tokens files and messages.
    pub fn name(self) -> &'static str {
        match self {
            Profile::Limiter => "limiter",
            Profile::Readonly => "readonly",
            Profile::Admin => "admin",
        }
    }

    /// The Redis ACL user this profile's requests run as, or `None` for the `--redis` URL's own user.
    pub fn redis_user(self) -> Option<&'static str> {
        match self {
            Profile::Limiter => Some("edgelimit-limiter"),
            Profile::Readonly => Some("edgelimit-readonly"),
            Profile::Admin => None,
        }
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Profile {
    type Err = String;

    fn from_str(name: &str) -> Result<Profile, String> {
        [Profile::Limiter, Profile::Readonly, Profile::Admin]
            .into_iter()
            .find(|profile| profile.name() == name)
            .ok_or_else(|| {
                format!(
                    "unknown profile {:?}: use one of {}",
                    name.chars().take(40).collect::<String>(),
                    Profile::NAMES
                )
            })
    }
}

/// Whether the bridge runs each profile as its own Redis ACL user.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RedisAcl {
    /// It creates the users and runs each profile's requests as its user (the default).
    #[default]
    Provision,
    /// Every request runs as the `--redis` URL's user, for a Redis whose ACL the bridge may not change. The fence
    /// still holds `limiter` tokens; `readonly` tokens are refused, since nothing would confine them.
    Off,
}

/// The `limiter` user's key patterns by default: the family's prefix (`edgelimit:{name}:…`) and Redisson-layout
/// limiters under it (`{edgelimit:x}:value`).
pub const DEFAULT_LIMITER_KEYS: [&str; 2] = ["edgelimit:*", "{edgelimit:*"];

/// What a user needs to run scripts at all (the fence decides which), `PING`, the `ECHO` a pipeline starts with
/// (`shared_budget.rs`), and `MULTI`/`EXEC`: without them Redis would run a `/multi-exec`'s commands one by one.
const SCRIPT_RUNNING: &[&str] = &[
    "echo",
    "multi",
    "exec",
    "discard",
    "ping",
    "evalsha",
    "eval",
    "evalsha_ro",
    "eval_ro",
    "script|load",
    "script|exists",
];

/// Every command edgelimit's scripts call, which the `limiter` user must hold (a test checks it against `lua/`).
pub const SCRIPT_COMMANDS: &[&str] = &[
    "decrby",
    "del",
    "exists",
    "get",
    "hmget",
    "hset",
    "incrby",
    "persist",
    "pexpire",
    "pttl",
    "set",
    "time",
    "type",
    "zadd",
    "zcard",
    "zcount",
    "zrange",
    "zrangebyscore",
    "zrank",
    "zrem",
    "zremrangebyscore",
];

/// The rules after `ACL SETUSER <user>` for `profile`, its password first, from a fresh `reset` so that a rule
/// dropped here is dropped from Redis too.
pub fn acl_rules(profile: Profile, password: &str, limiter_keys: &[String]) -> Vec<String> {
    let mut rules = vec!["reset".to_owned(), "on".to_owned(), format!(">{password}"), "-@all".to_owned()];
    let commands: Vec<&str> = match profile {
        Profile::Limiter => {
            rules.extend(limiter_keys.iter().map(|pattern| format!("~{pattern}")));
            [SCRIPT_RUNNING, SCRIPT_COMMANDS].concat()
        }
        Profile::Readonly => {
            // The limiter's keys, `~` and not `%R~`: Redis counts EVALSHA's keys as written, so `%R~` would refuse
            // the inspect script. The user still cannot write: it holds no writing command, and Redis checks each
            // `redis.call`.
            rules.extend(limiter_keys.iter().map(|pattern| format!("~{pattern}")));
            let reads: Vec<&str> = fence::read_commands().collect();
            [SCRIPT_RUNNING, &["time"], &reads].concat()
        }
        Profile::Admin => Vec::new(),
    };
    rules.extend(commands.into_iter().map(|command| format!("+{command}")));
    rules
}

/// The password of `user` on the Redis at `redis_url`: SHA-256 of both, as secret as the URL's own password, the
/// same for every bridge with that URL, never stored.
pub fn password(redis_url: &str, user: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(b"edgelimit bridge ACL user password, v1\0");
    hasher.update(redis_url.as_bytes());
    hasher.update(b"\0");
    hasher.update(user.as_bytes());
    hasher.finalize().iter().map(|byte| format!("{byte:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_parse_by_name_only() {
        for profile in [Profile::Limiter, Profile::Readonly, Profile::Admin] {
            assert_eq!(profile.name().parse::<Profile>(), Ok(profile));
        }
        assert!("Admin".parse::<Profile>().unwrap_err().contains("limiter, readonly, admin"));
        assert!("".parse::<Profile>().is_err());
    }

    #[test]
    fn every_command_a_script_calls_is_granted_to_the_limiter_user() {
        let mut called = std::collections::BTreeSet::new();
        for script in edgelimit::lua::every_script() {
            for part in script.source().split("redis.call('").skip(1) {
                called.insert(part.split('\'').next().unwrap().to_ascii_lowercase());
            }
        }
        let granted: std::collections::BTreeSet<String> = SCRIPT_COMMANDS.iter().map(|c| c.to_string()).collect();
        assert_eq!(called, granted);
    }

    #[test]
    fn every_command_the_inspect_script_calls_is_granted_to_the_readonly_user() {
        let rules = acl_rules(Profile::Readonly, "p", &["edgelimit:*".to_owned()]);
        let source = edgelimit::lua::INSPECT.source();
        for part in source.split("redis.call('").skip(1) {
            let command = part.split('\'').next().unwrap().to_ascii_lowercase();
            assert!(rules.contains(&format!("+{command}")), "{command}");
        }
        assert!(source.contains("redis.call('PTTL'"), "the inspect script calls what it did");
    }

    #[test]
    fn passwords_differ_by_url_and_user_and_rules_hold_no_wildcard_key_for_the_limiter() {
        assert_ne!(password("redis://a", "u"), password("redis://b", "u"));
        assert_ne!(password("redis://a", "u"), password("redis://a", "v"));
        assert_eq!(password("redis://a", "u").len(), 64);
        for profile in [Profile::Limiter, Profile::Readonly] {
            let rules = acl_rules(profile, "p", &["edgelimit:*".to_owned()]);
            assert!(rules.contains(&"~edgelimit:*".to_owned()), "{profile}");
            assert!(
                !rules.iter().any(|rule| rule.contains("~*") || rule == "allkeys" || rule.starts_with("+@")),
                "{profile}: {rules:?}"
            );
        }
    }
}
