//! The one error type of the core: every failure a caller can meet, with a message saying what to do and a stable
//! [`Error::code`] (`err.code` in JS). A denied request is not an error but a decision.

use std::time::Duration;

/// Everything that can go wrong between the caller and Redis. `Clone`: one failed request carrying several callers'
/// commands fails each of them alike.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The client was configured with something unusable (an empty URL, a zero timeout, …).
    #[error("invalid configuration: {0}")]
    InvalidConfig(String),

    /// An argument was unusable (wrong type, out of range, …). Nothing was sent.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// The limiter has no rate: it was never set, or its configuration expired after its keep-alive.
    #[error(
        "limiter {name:?} has no rate: set one first (the Redisson layout: `edgelimit set-rate {name} --rate N \
             --interval 1s` or try_set_rate; a stored quota: `edgelimit configure {name} --algorithm gcra --limit N \
             --interval 1s` or store_quota); a Redisson-layout configuration with a keep-alive vanishes after that \
             long unused"
    )]
    NotInitialized {
        /// The limiter's name.
        name: String,
    },

    /// More permits were asked for than the limiter can ever grant at once.
    #[error(
        "asked for {permits} permits, but the limit is {rate}: such a request could never succeed; ask for at \
             most {rate}, or raise the limit"
    )]
    PermitsExceedRate {
        /// Permits asked for.
        permits: u32,
        /// The limiter's rate.
        rate: u64,
    },

    /// The REST endpoint refused the token (HTTP 401/403).
    #[error("the REST endpoint rejected the token (HTTP {status}): {message}; check EDGELIMIT_TOKEN / UPSTASH_REDIS_REST_TOKEN")]
    Unauthorized {
        /// HTTP status the endpoint answered with.
        status: u16,
        /// The endpoint's own explanation.
        message: String,
    },

    /// The endpoint did not answer within the configured timeout. The request may or may not have run.
    #[error("no reply from the REST endpoint within {} ms; the store is slow or unreachable", .after.as_millis())]
    Timeout {
        /// The timeout that elapsed.
        after: Duration,
    },

    /// The HTTP request could not be made or its body not read (connection refused, DNS, TLS, reset, …).
    #[error("could not reach the REST endpoint at {url}: {source}")]
    Transport {
        /// The endpoint URL (never includes the token).
        url: String,
        /// What the HTTP client reported.
        #[source]
        source: std::sync::Arc<dyn std::error::Error + Send + Sync>,
    },

    /// The request failed in this process, not on the network: the runtime's HTTP client refused it (a `TypeError` of
    /// `fetch`'s own, e.g. under a polluted `Object.prototype`, or a port `fetch` blocks) or failed in a way not known
    /// to be the network's. Never absorbed: nothing says the store is down.
    #[error(
        "the request to {url} failed in this process, not on the network ({message}): a local error, not the \
         store's unavailability, so the failure policy does not absorb it; check the runtime (a changed \
         Object.prototype or global fetch, a port fetch blocks)"
    )]
    Client {
        /// The endpoint URL (never includes the token).
        url: String,
        /// What the HTTP client reported.
        message: String,
    },

    /// The endpoint answered an HTTP error that is not a Redis command error: 502–504 while Redis is down (the store is
    /// unavailable), or another status (500, 413, 404, …) that no waiting fixes.
    #[error("the REST endpoint answered HTTP {status}: {message}{}", endpoint_advice(*.status))]
    Endpoint {
        /// HTTP status.
        status: u16,
        /// The endpoint's `error` field, or the start of its body.
        message: String,
    },

    /// Redis cannot serve now: loading (LOADING), running a long script (BUSY), failing over (MASTERDOWN, TRYAGAIN,
    /// CLUSTERDOWN, READONLY). A failure policy may absorb it. READONLY has its own code, to alert on: a Redis that
    /// stays read-only is a misrouted endpoint.
    #[error("the store cannot serve now: {}; {}", .message, unavailable_advice(.code))]
    Unavailable {
        /// Redis's error code word (`LOADING`, `BUSY`, …).
        code: String,
        /// Redis's message, without the script's location.
        message: String,
    },

    /// The store is set up so edgelimit cannot work with it: the token's user may not run what it needs (NOPERM,
    /// NOAUTH, WRONGPASS), or the endpoint is a Cluster node that does not route (MOVED, ASK, CROSSSLOT). Never
    /// absorbed.
    #[error("the store refused the call: {}; {}", .message, store_config_advice(.code))]
    StoreConfig {
        /// Redis's error code word (`NOPERM`, `MOVED`, …).
        code: String,
        /// Redis's message, without the script's location.
        message: String,
    },

    /// Redis is out of memory and refuses writes (`OOM`), so no grant can be recorded. Never absorbed: anyone sending
    /// made-up identifiers can fill the store, and a fail-open policy would then pass every limit. Denials are still
    /// answered.
    #[error(
        "the store is out of memory and refuses writes, so no grant can be recorded: {0}; raise Redis's maxmemory (and \
         keep maxmemory-policy noeviction, which edgelimit needs); not absorbed by the failure policy, since clients \
         that invent identifiers can fill a store"
    )]
    StoreFull(String),

    /// A limit's key holds state edgelimit did not write (WRONGTYPE, or a value in no known layout): another program or
    /// limit uses the key. Never absorbed: deciding on state of unknown meaning could admit anything.
    #[error(
        "a limit's key holds state edgelimit did not write ({0}): another program or another limit uses it; give the \
         limit another name or prefix, or delete the key"
    )]
    ForeignState(String),

    /// Redis replied with an error edgelimit does not know. Reported, never absorbed.
    #[error("redis replied with an error edgelimit does not expect: {message}")]
    Redis {
        /// Redis's error code word (`ERR`, `EXECABORT`, …).
        code: String,
        /// Redis's message, without the script's location.
        message: String,
    },

    /// The reply did not have the shape the protocol or the script promises. Nothing was assumed about it.
    #[error("malformed reply: {what} (got {got})")]
    MalformedReply {
        /// What was expected.
        what: String,
        /// A short rendering of what arrived instead.
        got: String,
    },
}

impl Error {
    /// A stable, machine-readable code for this kind of error (`EDGELIMIT_…`), the same in Rust and in JS.
    pub fn code(&self) -> &'static str {
        match self {
            Error::InvalidConfig(_) => "EDGELIMIT_INVALID_CONFIG",
            Error::InvalidArgument(_) => "EDGELIMIT_INVALID_ARGUMENT",
            Error::NotInitialized { .. } => "EDGELIMIT_NOT_INITIALIZED",
            Error::PermitsExceedRate { .. } => "EDGELIMIT_PERMITS_EXCEED_RATE",
            Error::Unauthorized { .. } => "EDGELIMIT_AUTH",
            Error::Timeout { .. } => "EDGELIMIT_TIMEOUT",
            Error::Transport { .. } => "EDGELIMIT_TRANSPORT",
            Error::Client { .. } => "EDGELIMIT_CLIENT",
            Error::Endpoint { status: 413, .. } => "EDGELIMIT_TOO_LARGE",
            Error::Endpoint { .. } => "EDGELIMIT_ENDPOINT",
            Error::Unavailable { code, .. } if code == "READONLY" => "EDGELIMIT_READONLY",
            Error::Unavailable { .. } => "EDGELIMIT_UNAVAILABLE",
            Error::StoreConfig { .. } => "EDGELIMIT_STORE_CONFIG",
            Error::StoreFull(_) => "EDGELIMIT_STORE_FULL",
            Error::ForeignState(_) => "EDGELIMIT_FOREIGN_STATE",
            Error::Redis { .. } => "EDGELIMIT_REDIS",
            Error::MalformedReply { .. } => "EDGELIMIT_MALFORMED_REPLY",
        }
    }

    /// True when the store is unavailable: a timeout, a transport failure, HTTP 502–504 or 520–524 (Cloudflare could
    /// not reach the endpoint), or Redis saying it cannot serve now ([`Error::Unavailable`]). Only these may a failure
    /// policy absorb; every other error (a caller's mistake, a wrong token or set-up, foreign state, an unparsable
    /// reply, another 5xx, a redirect, anything unknown) is reported, since turning it into "allowed" would let
    /// requests past a limit by accident.
    pub fn is_store_unavailable(&self) -> bool {
        match self {
            Error::Timeout { .. } | Error::Transport { .. } | Error::Unavailable { .. } => true,
            // 520–524: Cloudflare's answers for an origin it could not reach.
            Error::Endpoint { status, .. } => matches!(status, 502..=504 | 520..=524),
            _ => false,
        }
    }

    /// True for a Redis `NOSCRIPT` reply: the script cache does not hold the SHA1 that EVALSHA named.
    pub fn is_noscript(&self) -> bool {
        matches!(self, Error::Redis { code, .. } if code == "NOSCRIPT")
    }

    /// Classifies an error reply from Redis by its code word, after removing what Redis adds to an error raised inside
    /// a script (Redis 7's ` script: <sha1>, on @user_script:<line>.`, Redis 6's `ERR Error running script (call to
    /// f_<sha1>): @user_script:<line>: `, a Lua runtime error's `user_script:<line>: `).
    pub(crate) fn from_redis_reply(reply: &str) -> Error {
        let message = without_script_location(reply);
        let code = message.split_whitespace().next().unwrap_or_default().to_owned();
        match code.as_str() {
            "LOADING" | "BUSY" | "MASTERDOWN" | "TRYAGAIN" | "CLUSTERDOWN" | "READONLY" => {
                Error::Unavailable { code, message }
            }
            "OOM" => Error::StoreFull(message),
            "NOPERM" | "NOAUTH" | "WRONGPASS" | "MOVED" | "ASK" | "CROSSSLOT" => Error::StoreConfig { code, message },
            "WRONGTYPE" => Error::ForeignState(message),
            "ERR" if message.starts_with(NOPERM_IN_SCRIPT) => Error::StoreConfig { code: "NOPERM".to_owned(), message },
            "ERR" if message.starts_with(SCRIPT_REFUSAL) => {
                Error::InvalidArgument(format!("the script refused the call: {}", &message[SCRIPT_REFUSAL.len()..]))
            }
            _ => Error::Redis { code, message },
        }
    }

    pub(crate) fn malformed(what: impl Into<String>, got: impl std::fmt::Display) -> Self {
        let mut got = got.to_string();
        if got.len() > 120 {
            got.truncate(prefix(&got, 120).len());
            got.push('…');
        }
        Error::MalformedReply { what: what.into(), got }
    }
}

/// The longest start of `text` of at most `max_bytes` bytes ending on a character boundary, so a message quoting a
/// refused value does not grow with it.
pub(crate) fn prefix(text: &str, max_bytes: usize) -> &str {
    let cut = (0..=max_bytes.min(text.len())).rev().find(|&i| text.is_char_boundary(i)).unwrap_or(0);
    &text[..cut]
}

/// How edgelimit's scripts start an error for an argument they refuse (`reject` in `lua/common.lua`).
const SCRIPT_REFUSAL: &str = "ERR edgelimit: ";
/// Redis 7's wording of NOPERM for a command a script calls (`redis.call` under an ACL user that may not run it).
const NOPERM_IN_SCRIPT: &str = "ERR The user executing the script can't run this command";

/// `reply` without the location Redis adds to an error raised inside a script (see [`Error::from_redis_reply`]).
fn without_script_location(reply: &str) -> String {
    let mut message = reply.trim();
    if let Some(at) = message.rfind(" script: ") {
        if message[at..].contains(", on @user_script:") && message.ends_with('.') {
            message = &message[..at];
        }
    }
    // Redis 6: `@user_script:<line>: ` before a Redis error, `user_script:<line>: ` before a Lua runtime error (which
    // Redis calls ERR).
    if let Some(rest) = message.strip_prefix("ERR Error running script (call to f_") {
        if let Some((_, inner)) = rest.split_once("): ") {
            if let Some(located) = inner.strip_prefix("@user_script:") {
                message = located.split_once(": ").map_or(located, |(_, text)| text);
            } else if let Some(text) = after_lua_line(inner) {
                return format!("ERR {}", text.trim());
            }
        }
    }
    let message = message.trim();
    // Redis 7 words a Lua runtime error `ERR user_script:12: attempt to …`.
    match message.strip_prefix("ERR ").and_then(after_lua_line) {
        Some(text) => format!("ERR {text}"),
        None => message.to_owned(),
    }
}

/// The text of a Lua runtime error after its `user_script:<line>: `, or `None`: the line means nothing to callers.
fn after_lua_line(text: &str) -> Option<&str> {
    let (line, rest) = text.strip_prefix("user_script:")?.split_once(": ")?;
    line.bytes().all(|b| b.is_ascii_digit()).then_some(rest)
}

fn unavailable_advice(code: &str) -> &'static str {
    match code {
        "READONLY" => {
            "the endpoint reached a read-only replica (a failover in progress, or an endpoint pointed at a replica: \
             check it if this lasts); the failure policy (onError) decides meanwhile"
        }
        _ => "it is loading, busy or failing over; the failure policy (onError) decides meanwhile",
    }
}

fn store_config_advice(code: &str) -> &'static str {
    match code {
        "MOVED" | "ASK" => {
            "the endpoint is a Redis Cluster node that does not route commands: point edgelimit at a cluster-aware \
             endpoint"
        }
        // Through a cluster-aware endpoint too: one call named keys of several slots.
        "CROSSSLOT" => {
            "one call named keys of several Redis Cluster slots: limits decided together (limitAll, several limits in \
             one rule) need the per-identifier layout (EDGELIMIT_LAYOUT, `layout`), which keeps one identifier's keys \
             in one slot; or the endpoint is a cluster node that does not route: point edgelimit at a cluster-aware one"
        }
        _ => {
            "the token's Redis user may not run what edgelimit needs (EVALSHA, EVAL, SCRIPT LOAD on the limiter's \
             keys): grant it, or use another token"
        }
    }
}

fn endpoint_advice(status: u16) -> &'static str {
    match status {
        413 => "; the request is too large for the endpoint: send fewer or smaller commands",
        // The bridge's answer when its memory for large responses is taken: busy, not an outage.
        429 => "; the endpoint is busy with other clients' large responses: retry shortly; not absorbed",
        // A browser's fetch shows a redirect it did not follow as status 0.
        0 | 300..=399 => {
            "; the endpoint redirects, which is never followed (the call would go elsewhere): give its final URL"
        }
        502..=504 | 520..=524 => "; the store is unavailable, and the failure policy (onError) decides",
        500.. => "; the endpoint failed on this request (see its logs); not taken for an outage, so not absorbed",
        _ => "; check the endpoint's URL",
    }
}

/// Shorthand used throughout the core.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn noscript_is_recognised_only_for_redis_errors() {
        assert!(Error::from_redis_reply("NOSCRIPT No matching script. Please use EVAL.").is_noscript());
        assert!(!Error::from_redis_reply("ERR unknown command").is_noscript());
        assert!(!Error::InvalidConfig("NOSCRIPT".into()).is_noscript());
    }

    /// Replies as Redis 7.0.15 words them (captured from the real server), and Redis 6's wording of the same.
    #[test]
    fn redis_replies_are_classified_by_who_must_act_without_script_locations() {
        let cases = [
            (
                "WRONGTYPE Operation against a key holding the wrong kind of value script: \
                 fd1f62702330c26137b50b4d8f15f201f6699d84, on @user_script:1.",
                "EDGELIMIT_FOREIGN_STATE",
                false,
            ),
            (
                "ERR Error running script (call to f_fd1f62702330c26137b50b4d8f15f201f6699d84): @user_script:1: \
                 WRONGTYPE Operation against a key holding the wrong kind of value",
                "EDGELIMIT_FOREIGN_STATE",
                false,
            ),
            (
                "ERR edgelimit: invalid permits: 0 script: be5473da61c2bc2b4b836cd2b0cf9c682ff26f27, on \
                 @user_script:1.",
                "EDGELIMIT_INVALID_ARGUMENT",
                false,
            ),
            (
                "ERR user_script:1: attempt to perform arithmetic on a nil value script: \
                 cd204846b476dfdb7c087f1a1cef2df50cc9a6e7, on @user_script:1.",
                "EDGELIMIT_REDIS",
                false,
            ),
            (
                "OOM command not allowed when used memory > 'maxmemory'. script: \
                 ab5a402eac2ea8cb211185723d9390126aed2cfa, on @user_script:1.",
                "EDGELIMIT_STORE_FULL",
                false,
            ),
            (
                "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.",
                "EDGELIMIT_UNAVAILABLE",
                true,
            ),
            ("LOADING Redis is loading the dataset in memory", "EDGELIMIT_UNAVAILABLE", true),
            (
                "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
                "EDGELIMIT_UNAVAILABLE",
                true,
            ),
            ("TRYAGAIN Multiple keys request during rehashing of slot", "EDGELIMIT_UNAVAILABLE", true),
            ("CLUSTERDOWN The cluster is down", "EDGELIMIT_UNAVAILABLE", true),
            ("READONLY You can't write against a read only replica.", "EDGELIMIT_READONLY", true),
            ("NOPERM this user has no permissions to run the 'evalsha' command", "EDGELIMIT_STORE_CONFIG", false),
            ("NOAUTH Authentication required.", "EDGELIMIT_STORE_CONFIG", false),
            ("WRONGPASS invalid username-password pair or user is disabled.", "EDGELIMIT_STORE_CONFIG", false),
            ("MOVED 15495 127.0.0.1:7103", "EDGELIMIT_STORE_CONFIG", false),
            ("ASK 15495 127.0.0.1:7103", "EDGELIMIT_STORE_CONFIG", false),
            ("CROSSSLOT Keys in request don't hash to the same slot", "EDGELIMIT_STORE_CONFIG", false),
            ("EXECABORT Transaction discarded because of previous errors.", "EDGELIMIT_REDIS", false),
            ("", "EDGELIMIT_REDIS", false),
            (
                "ERR The user executing the script can't run this command or subcommand script: \
                 2248ea7f1064bd8a19bac4fad179cb7f74bc361a, on @user_script:1.",
                "EDGELIMIT_STORE_CONFIG",
                false,
            ),
            (
                "ERR Error running script (call to f_fd1f62702330c26137b50b4d8f15f201f6699d84): user_script:1: \
                 attempt to index local 'x' (a nil value)",
                "EDGELIMIT_REDIS",
                false,
            ),
        ];
        for (reply, code, unavailable) in cases {
            let error = Error::from_redis_reply(reply);
            assert_eq!((error.code(), error.is_store_unavailable()), (code, unavailable), "{reply}");
            let text = error.to_string();
            assert!(!text.contains("user_script") && !text.contains("f_fd1f"), "{text}");
            assert!(!text.contains("be5473da61c2bc2b4b836cd2b0cf9c682ff26f27"), "{text}");
            assert!(!text.contains("2248ea7f1064bd8a19bac4fad179cb7f74bc361a"), "{text}");
        }
        assert_eq!(
            Error::from_redis_reply(cases[2].0).to_string(),
            "invalid argument: the script refused the call: invalid permits: 0"
        );
    }

    #[test]
    fn only_an_unavailable_store_may_be_absorbed() {
        let endpoint = |status| Error::Endpoint { status, message: String::new() };
        for status in [502, 503, 504, 520, 524] {
            assert!(endpoint(status).is_store_unavailable(), "{status}");
        }
        for error in [
            // The endpoint failed on this request (the bridge's own bug, a reply it could not read).
            endpoint(500),
            endpoint(501),
            endpoint(413),
            // The bridge busy with large responses: no outage, and nothing a fail-open policy may absorb.
            endpoint(429),
            endpoint(404),
            Error::malformed("a JSON body", "<html>"),
            Error::Unauthorized { status: 401, message: String::new() },
            Error::InvalidArgument(String::new()),
            Error::Client { url: String::new(), message: String::new() },
        ] {
            assert!(!error.is_store_unavailable(), "{error}");
        }
        assert_eq!(endpoint(413).code(), "EDGELIMIT_TOO_LARGE");
    }

    #[test]
    fn malformed_reply_renderings_are_cut_on_a_char_boundary() {
        let long = "é".repeat(200);
        let Error::MalformedReply { got, .. } = Error::malformed("an integer", &long) else { unreachable!() };
        assert!(got.ends_with('…'));
        assert!(got.len() <= 124);
    }
}
