//! The one error type of the core.
//!
//! Every failure a caller can meet is a variant here, with a message that says what went wrong and what to do about
//! it, and a stable [`Error::code`] that the JS surface exposes as `err.code`. A *denied* request is not an error:
//! it is a decision value.
//!
//! Errors are sorted by who must act ([`ErrorClass`]). Only the store being unavailable ([`Error::is_absorbable`])
//! may be absorbed by a failure policy (`onError`): a rate limiter is a security control, so a caller's mistake, a
//! wrong configuration, state edgelimit did not write, or anything not recognised is reported, never turned into
//! "allowed". Redis error replies are classified by their code word once the script wrapper is removed (see
//! [`ErrorReply`]); nothing else in the crate reads Redis error text.

mod reply;

use std::time::Duration;

pub use self::reply::ErrorReply;
use self::reply::ReplyKind;

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

    /// The endpoint answered with an HTTP error that is not a Redis command error: a 5xx (e.g. the bridge's 503
    /// while Redis is down), 408 or 429 means the store is unavailable; any other status (404, 405, …) means the URL
    /// does not lead to an Upstash-compatible endpoint.
    #[error("the REST endpoint answered HTTP {status}: {message}; {}", endpoint_advice(*.status))]
    Endpoint {
        /// HTTP status.
        status: u16,
        /// The endpoint's `error` field, or the start of its body.
        message: String,
    },

    /// The endpoint refused the request as too large (HTTP 413), e.g. an identifier of a mebibyte. The caller's to
    /// fix: never absorbed, or an oversized input would pass a fail-open limiter.
    #[error(
        "the REST endpoint refused the request as too large (HTTP 413): {message}; shorten what the request \
         carries (an identifier is sent in full unless it is long enough to be hashed), or raise the endpoint's \
         body limit"
    )]
    RequestTooLarge {
        /// The endpoint's `error` field, or the start of its body.
        message: String,
    },

    /// Redis cannot serve now but will by itself: `LOADING`, `BUSY`, `MASTERDOWN`, `TRYAGAIN`, `CLUSTERDOWN`.
    #[error("the store cannot serve now ({0}): it is starting, busy or failing over; retry shortly")]
    StoreUnavailable(#[source] ErrorReply),

    /// Redis is up but refuses writes until something changes: `READONLY` (a failover, or an endpoint pointed at a
    /// replica), `OOM` (maxmemory reached), `MISCONF` (a failed save). Absorbable like an outage, since nothing was
    /// decided, but a health signal: the Worker logs it as a warning, for an operator to act on.
    #[error("the store refuses writes ({0}): {advice}", advice = .0.degraded_advice())]
    StoreDegraded(#[source] ErrorReply),

    /// Redis refused the endpoint's user or topology: `NOPERM` (also inside a script), `NOAUTH`, `WRONGPASS`, or a
    /// cluster redirect (`MOVED`, `ASK`, `CROSSSLOT`) from an endpoint that should have routed it.
    #[error(
        "the store refused the request for its configuration ({0}): give the token's Redis user EVALSHA, EVAL, \
         SCRIPT LOAD and the limiter's keys, and for a Redis Cluster use an endpoint that routes by slot"
    )]
    StoreConfig(#[source] ErrorReply),

    /// An edgelimit script refused one of its arguments (`ERR edgelimit: invalid …`). edgelimit's own clients never
    /// send such a call: a hand-made call, or a client of another version, did.
    #[error(
        "the script refused an argument ({0}); edgelimit's clients check their arguments first, so this call was \
         made by hand or by a client of another version: use the documented API"
    )]
    ScriptArgument(#[source] ErrorReply),

    /// A limiter's key holds something edgelimit did not write: another type (`WRONGTYPE`), or a grant id that is
    /// already logged. Never absorbed: the key would otherwise let every request through until someone noticed.
    #[error(
        "a limiter key holds state edgelimit did not write ({0}): another program writes the same key (give the \
         limiter another prefix or name) or it was corrupted (delete it, e.g. with `edgelimit reset`)"
    )]
    ForeignState(#[source] ErrorReply),

    /// Redis replied with an error edgelimit does not recognise (an unknown command, a script error, `NOSCRIPT`
    /// where no fallback applies, …). Reported, never absorbed.
    #[error("redis replied with an error edgelimit does not recognise ({0}); it is reported, not absorbed")]
    Redis(#[source] ErrorReply),

    /// The reply did not have the shape the protocol or the script promises. Nothing was assumed about it.
    ///
    /// Never absorbed: a reply that is not what the protocol promises (an HTML page from a proxy, a foreign value)
    /// does not prove that the store is down, and an error not recognised is reported, not turned into "allowed".
    #[error("malformed reply: {what} (got {got}); check that the URL leads to an Upstash-compatible REST endpoint")]
    MalformedReply {
        /// What was expected.
        what: String,
        /// A short rendering of what arrived instead.
        got: String,
    },
}

/// Who must act on an [`Error`]: the classes of the README's table "Errors and the failure policy".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorClass {
    /// The store cannot answer now (timeout, transport failure, HTTP 5xx, `LOADING`, `BUSY`, …). Absorbed by `onError`.
    StoreUnavailable,
    /// The store refuses writes until an operator acts (`READONLY`, `OOM`, `MISCONF`). Absorbed by `onError`, and
    /// logged as a health warning.
    StoreDegraded,
    /// The client, the endpoint, its token or its Redis user is set up wrong. Reported.
    Configuration,
    /// The request itself was refused: a bad argument, too many permits, too large a request. Reported.
    Request,
    /// A limiter key holds state edgelimit did not write. Reported.
    ForeignState,
    /// Not recognised: an unknown Redis error or a malformed reply. Reported.
    Unknown,
}

impl ErrorClass {
    /// The JS spelling (`err.class`): `store-unavailable`, `store-degraded`, `configuration`, `request`,
    /// `foreign-state`, `unknown`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorClass::StoreUnavailable => "store-unavailable",
            ErrorClass::StoreDegraded => "store-degraded",
            ErrorClass::Configuration => "configuration",
            ErrorClass::Request => "request",
            ErrorClass::ForeignState => "foreign-state",
            ErrorClass::Unknown => "unknown",
        }
    }
}

impl Error {
    /// Classifies the text of a Redis error reply (as the REST endpoint relays it) into its variant.
    pub(crate) fn from_reply(text: &str) -> Error {
        let reply = ErrorReply::parse(text);
        match reply.kind() {
            ReplyKind::Unavailable => Error::StoreUnavailable(reply),
            ReplyKind::Degraded => Error::StoreDegraded(reply),
            ReplyKind::Configuration => Error::StoreConfig(reply),
            ReplyKind::ScriptArgument => Error::ScriptArgument(reply),
            ReplyKind::ForeignState => Error::ForeignState(reply),
            ReplyKind::Unknown => Error::Redis(reply),
        }
    }

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
            Error::Endpoint { status, .. } if endpoint_unavailable(*status) => "EDGELIMIT_STORE_UNAVAILABLE",
            Error::Endpoint { .. } => "EDGELIMIT_ENDPOINT",
            Error::RequestTooLarge { .. } => "EDGELIMIT_REQUEST_TOO_LARGE",
            Error::StoreUnavailable(_) => "EDGELIMIT_STORE_UNAVAILABLE",
            Error::StoreDegraded(reply) => match reply.word() {
                "READONLY" => "EDGELIMIT_STORE_READONLY",
                "OOM" => "EDGELIMIT_STORE_OUT_OF_MEMORY",
                _ => "EDGELIMIT_STORE_WRITES_REFUSED",
            },
            Error::StoreConfig(_) => "EDGELIMIT_STORE_CONFIG",
            Error::ScriptArgument(_) => "EDGELIMIT_SCRIPT_ARGUMENT",
            Error::ForeignState(_) => "EDGELIMIT_FOREIGN_STATE",
            Error::Redis(_) => "EDGELIMIT_REDIS_UNKNOWN",
            Error::MalformedReply { .. } => "EDGELIMIT_MALFORMED_REPLY",
        }
    }

    /// Who must act on this error.
    pub fn class(&self) -> ErrorClass {
        match self {
            Error::Timeout { .. } | Error::Transport { .. } | Error::StoreUnavailable(_) => {
                ErrorClass::StoreUnavailable
            }
            Error::Endpoint { status, .. } if endpoint_unavailable(*status) => ErrorClass::StoreUnavailable,
            Error::StoreDegraded(_) => ErrorClass::StoreDegraded,
            Error::InvalidConfig(_)
            | Error::NotInitialized { .. }
            | Error::Unauthorized { .. }
            | Error::Endpoint { .. }
            | Error::StoreConfig(_) => ErrorClass::Configuration,
            Error::InvalidArgument(_)
            | Error::PermitsExceedRate { .. }
            | Error::RequestTooLarge { .. }
            | Error::ScriptArgument(_) => ErrorClass::Request,
            Error::ForeignState(_) => ErrorClass::ForeignState,
            Error::Redis(_) | Error::MalformedReply { .. } => ErrorClass::Unknown,
        }
    }

    /// True only when the store is unavailable (classes [`ErrorClass::StoreUnavailable`] and
    /// [`ErrorClass::StoreDegraded`]): the one failure a fail-open or fail-closed policy (`onError`) may absorb.
    /// Every other error is returned to the caller, whatever the policy.
    pub fn is_absorbable(&self) -> bool {
        matches!(self.class(), ErrorClass::StoreUnavailable | ErrorClass::StoreDegraded)
    }

    /// True for a Redis `NOSCRIPT` reply: the script cache does not hold the SHA1 that EVALSHA named.
    pub fn is_noscript(&self) -> bool {
        matches!(self, Error::Redis(reply) if reply.word() == "NOSCRIPT")
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

/// HTTP statuses that mean the endpoint cannot serve now: any 5xx, a request timeout, or load shedding.
fn endpoint_unavailable(status: u16) -> bool {
    matches!(status, 408 | 429 | 500..=599)
}

fn endpoint_advice(status: u16) -> &'static str {
    if endpoint_unavailable(status) {
        "the store is unavailable; retry shortly"
    } else {
        "check that the URL leads to an Upstash-compatible REST endpoint (POST /, /pipeline, /multi-exec)"
    }
}

/// Shorthand used throughout the core.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn noscript_is_recognised_only_for_redis_errors() {
        assert!(Error::from_reply("NOSCRIPT No matching script. Please use EVAL.").is_noscript());
        assert!(!Error::from_reply("ERR unknown command").is_noscript());
        assert!(!Error::InvalidConfig("NOSCRIPT".into()).is_noscript());
    }

    #[test]
    fn only_the_store_being_unavailable_is_absorbable() {
        let absorbed = [
            (
                Error::from_reply("LOADING Redis is loading the dataset in memory"),
                "EDGELIMIT_STORE_UNAVAILABLE",
            ),
            (
                Error::from_reply("READONLY You can't write against a read only replica."),
                "EDGELIMIT_STORE_READONLY",
            ),
            (
                Error::from_reply("OOM command not allowed when used memory > 'maxmemory'."),
                "EDGELIMIT_STORE_OUT_OF_MEMORY",
            ),
            (
                Error::Endpoint {
                    status: 503,
                    message: "down".into(),
                },
                "EDGELIMIT_STORE_UNAVAILABLE",
            ),
            (
                Error::Timeout {
                    after: Duration::from_secs(1),
                },
                "EDGELIMIT_TIMEOUT",
            ),
        ];
        for (error, code) in absorbed {
            assert!(error.is_absorbable(), "{error}");
            assert_eq!(error.code(), code, "{error}");
        }
        let reported = [
            (
                Error::from_reply("WRONGTYPE Operation against a key holding the wrong kind of value"),
                "EDGELIMIT_FOREIGN_STATE",
            ),
            (
                Error::from_reply("ERR edgelimit: invalid limit: -5"),
                "EDGELIMIT_SCRIPT_ARGUMENT",
            ),
            (
                Error::from_reply("NOPERM this user has no permissions to run the 'evalsha' command"),
                "EDGELIMIT_STORE_CONFIG",
            ),
            (Error::from_reply("MOVED 3999 127.0.0.1:6381"), "EDGELIMIT_STORE_CONFIG"),
            (
                Error::from_reply("ERR unknown command 'FOO'"),
                "EDGELIMIT_REDIS_UNKNOWN",
            ),
            (
                Error::RequestTooLarge { message: "body".into() },
                "EDGELIMIT_REQUEST_TOO_LARGE",
            ),
            (
                Error::Endpoint {
                    status: 404,
                    message: "no such route".into(),
                },
                "EDGELIMIT_ENDPOINT",
            ),
            (
                Error::Unauthorized {
                    status: 401,
                    message: "no".into(),
                },
                "EDGELIMIT_AUTH",
            ),
            (Error::malformed("an integer", "x"), "EDGELIMIT_MALFORMED_REPLY"),
        ];
        for (error, code) in reported {
            assert!(!error.is_absorbable(), "{error}");
            assert_eq!(error.code(), code, "{error}");
        }
    }

    #[test]
    fn redis_replies_keep_their_words_but_not_the_script_wrapper_and_say_what_to_do() {
        let error = Error::from_reply(
            "WRONGTYPE Operation against a key holding the wrong kind of value script: \
             fd1f62702330c26137b50b4d8f15f201f6699d84, on @user_script:161.",
        );
        let message = error.to_string();
        assert!(message.contains("WRONGTYPE Operation against a key"), "{message}");
        assert!(
            !message.contains("fd1f6270") && !message.contains("user_script"),
            "{message}"
        );
        assert!(message.contains("edgelimit reset"), "{message}");
        let source = std::error::Error::source(&error).expect("the Redis reply is the source");
        assert_eq!(
            source.to_string(),
            "WRONGTYPE Operation against a key holding the wrong kind of value"
        );
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
