//! The one error type of the core.
//!
//! Every failure a caller can meet is a variant here, with a message that says what went wrong and what to do about
//! it, and a stable [`Error::code`] that the JS surface exposes as `err.code`. A *denied* request is not an error:
//! it is a decision value.

use std::time::Duration;

/// Everything that can go wrong between the caller and Redis.
#[derive(Debug, thiserror::Error)]
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
        "limiter {name:?} has no rate: set one first (a sliding log: `edgelimit set-rate {name} --rate N \
             --interval 1s` or try_set_rate; a stored quota: `edgelimit configure {name} --algorithm gcra --limit N \
             --interval 1s` or store_quota); a sliding-log configuration with a keep-alive vanishes after that long \
             unused"
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
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    /// The endpoint answered with an HTTP error that is not a Redis command error, e.g. a 503 while Redis is down.
    #[error("the REST endpoint answered HTTP {status}: {message}")]
    Endpoint {
        /// HTTP status.
        status: u16,
        /// The endpoint's `error` field, or the start of its body.
        message: String,
    },

    /// Redis ran the command and returned an error reply (wrong type, unknown command, a script error, …).
    #[error("redis replied with an error: {0}")]
    Redis(String),

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
            Error::Endpoint { .. } => "EDGELIMIT_ENDPOINT",
            Error::Redis(_) => "EDGELIMIT_REDIS",
            Error::MalformedReply { .. } => "EDGELIMIT_MALFORMED_REPLY",
        }
    }

    /// True when the store failed rather than the caller: it was unreachable, slow, overloaded, or answered
    /// something unusable. These are the failures a fail-open or fail-closed policy (`onError`) may absorb; the
    /// others (bad arguments, permits above the limit, a wrong token, a missing config) are the caller's to fix and
    /// are always reported.
    pub fn is_store_failure(&self) -> bool {
        matches!(
            self,
            Error::Timeout { .. }
                | Error::Transport { .. }
                | Error::Endpoint { .. }
                | Error::Redis(_)
                | Error::MalformedReply { .. }
        )
    }

    /// True for a Redis `NOSCRIPT` reply: the script cache does not hold the SHA1 that EVALSHA named.
    pub fn is_noscript(&self) -> bool {
        matches!(self, Error::Redis(message) if message.starts_with("NOSCRIPT"))
    }

    pub(crate) fn malformed(what: impl Into<String>, got: impl std::fmt::Display) -> Self {
        let mut got = got.to_string();
        if got.len() > 120 {
            let cut = (0..=120).rev().find(|&i| got.is_char_boundary(i)).unwrap_or(0);
            got.truncate(cut);
            got.push('…');
        }
        Error::MalformedReply { what: what.into(), got }
    }
}

/// Shorthand used throughout the core.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn noscript_is_recognised_only_for_redis_errors() {
        assert!(Error::Redis("NOSCRIPT No matching script. Please use EVAL.".into()).is_noscript());
        assert!(!Error::Redis("ERR unknown command".into()).is_noscript());
        assert!(!Error::InvalidConfig("NOSCRIPT".into()).is_noscript());
    }

    #[test]
    fn malformed_reply_renderings_are_cut_on_a_char_boundary() {
        let long = "é".repeat(200);
        let Error::MalformedReply { got, .. } = Error::malformed("an integer", &long) else {
            unreachable!()
        };
        assert!(got.ends_with('…'));
        assert!(got.len() <= 124);
    }
}
