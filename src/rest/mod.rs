//! The client side of the Upstash REST protocol: reqwest natively, the runtime's `fetch` in wasm (`http_native.rs`,
//! `http_wasm.rs`). `POST /` carries one command as a JSON array; `/pipeline` and `/multi-exec` carry several. The
//! client always asks for `Upstash-Encoding: base64`, so binary strings arrive intact.

mod coalesce;
pub(crate) use coalesce::MergeableDecision;
#[cfg_attr(not(target_arch = "wasm32"), path = "http_native.rs")]
#[cfg_attr(target_arch = "wasm32", path = "http_wasm.rs")]
mod http;
pub(crate) use http::requests_may_wait_on_each_other;
mod script;
pub use script::{Script, ScriptCall};
mod slot;
pub use slot::hash_slot;

use std::sync::Arc;
use std::time::Duration;

use self::http::Http;
use crate::error::{Error, Result};
use crate::value::Value;
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde_json::Value as Json;

/// The header telling the endpoint how many ms the client waits, after which the cluster bridge stops resending a
/// command. Browsers do not send it (it would need a CORS preflight's approval).
pub const DEADLINE_HEADER: &str = "edgelimit-deadline-ms";

/// How long a request may take when the caller does not say.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(1_000);

/// The longest per-request timeout: 2^31 - 1 ms, the longest a JS timer waits (a longer one fires at once).
pub const MAX_TIMEOUT: Duration = Duration::from_millis(i32::MAX as u64);

/// Why a request got no HTTP reply (from either HTTP backend).
enum Failure {
    /// Nothing came back within the timeout.
    Timeout,
    /// The network failed: the endpoint could not be reached or the body not read.
    Network(Box<dyn std::error::Error + Send + Sync>),
    /// The request was refused in this process, or failed in a way not known to be the network's.
    Local(String),
}

/// One Redis command: its name and arguments, sent as a JSON array of strings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command(Vec<String>);

impl Command {
    /// Starts a command with its name, e.g. `Command::new("EVALSHA")`.
    pub fn new(name: &str) -> Self {
        Command(vec![name.to_owned()])
    }

    /// Appends one argument. Numbers are sent as their decimal text, which Redis parses as it would over RESP.
    pub fn arg(mut self, arg: impl ToString) -> Self {
        self.0.push(arg.to_string());
        self
    }

    /// Appends every argument of `args`, in order.
    pub fn args<T: ToString>(mut self, args: impl IntoIterator<Item = T>) -> Self {
        self.0.extend(args.into_iter().map(|arg| arg.to_string()));
        self
    }

    /// The command's words, name first.
    pub fn words(&self) -> &[String] {
        &self.0
    }

    /// The command as the REST protocol sends it: a JSON array of its words (which always serialises).
    fn rendered(&self) -> String {
        serde_json::to_string(&self.0).unwrap_or_default()
    }
}

/// A connection to one Upstash-compatible REST endpoint. Cheap to clone; clones share the connection pool and
/// coalesce their commands (see [`RestClient::command`]).
#[derive(Debug, Clone)]
pub struct RestClient {
    http: Http,
    base_url: String,
    token: String,
    timeout: Duration,
    /// Commands waiting for the next request; `None` when every command is a request of its own.
    queue: Option<Arc<coalesce::Queue>>,
}

impl RestClient {
    /// A client for the endpoint at `url` (e.g. `https://eu1-xyz.upstash.io` or `http://127.0.0.1:8079`),
    /// authenticating with the bearer `token`, with [`DEFAULT_TIMEOUT`].
    #[cfg_attr(target_arch = "wasm32", allow(clippy::default_constructed_unit_structs))]
    pub fn new(url: &str, token: &str) -> Result<Self> {
        let base_url = url.trim().trim_end_matches('/');
        if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
            return Err(Error::InvalidConfig(format!(
                "the REST URL must start with http:// or https://, got {url:?}; set EDGELIMIT_URL or \
                 UPSTASH_REDIS_REST_URL"
            )));
        }
        // Caught here: a request that cannot be sent would fail as a transport error, which fail-open absorbs.
        if let Some(problem) = http::url_problem(base_url) {
            return Err(Error::InvalidConfig(format!(
                "the REST URL {url:?} is not a URL a request can go to ({problem}); set EDGELIMIT_URL or \
                 UPSTASH_REDIS_REST_URL"
            )));
        }
        // fetch refuses such a URL; natively they would go as Basic auth beside the token. Not echoed: secrets.
        if http::url_has_credentials(base_url) {
            return Err(Error::InvalidConfig(
                "the REST URL holds credentials (user:password@ before the host), which are never sent: give the URL \
                 without them, and the credential as the token (EDGELIMIT_TOKEN or UPSTASH_REDIS_REST_TOKEN)"
                    .into(),
            ));
        }
        if token.is_empty() {
            return Err(Error::InvalidConfig(
                "the REST token is empty; set EDGELIMIT_TOKEN or UPSTASH_REDIS_REST_TOKEN".into(),
            ));
        }
        if let Some(bad) = token.chars().find(|c| !c.is_ascii_graphic()) {
            return Err(Error::InvalidConfig(format!(
                "the REST token holds {bad:?}, which an HTTP header cannot carry: a token is visible ASCII (letters, \
                 digits and punctuation, no spaces); check EDGELIMIT_TOKEN or UPSTASH_REDIS_REST_TOKEN for a stray \
                 character"
            )));
        }
        Ok(RestClient {
            http: Http::default(),
            base_url: base_url.to_owned(),
            token: token.to_owned(),
            timeout: DEFAULT_TIMEOUT,
            queue: Some(Arc::default()),
        })
    }

    /// The same client with every command a request of its own: none waits for the turn's others or shares their
    /// request's failure.
    pub fn without_coalescing(mut self) -> Self {
        self.queue = None;
        self
    }

    /// The same client with another per-request timeout: from 1 ms to [`MAX_TIMEOUT`].
    pub fn with_timeout(mut self, timeout: Duration) -> Result<Self> {
        if timeout < Duration::from_millis(1) {
            return Err(Error::InvalidConfig(format!("the request timeout must be at least 1 ms, got {timeout:?}")));
        }
        if timeout > MAX_TIMEOUT {
            return Err(Error::InvalidConfig(format!(
                "the request timeout must be at most {} ms (about 24.8 days, the longest a JS timer waits), got {} \
                 ms: is it in seconds where milliseconds are meant?",
                MAX_TIMEOUT.as_millis(),
                timeout.as_millis()
            )));
        }
        self.timeout = timeout;
        Ok(self)
    }

    /// The endpoint URL, without a trailing slash.
    pub fn url(&self) -> &str {
        &self.base_url
    }

    /// The per-request timeout.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Runs one command. A Redis error reply becomes the error its code means (`Error::from_redis_reply`).
    ///
    /// Commands that concurrent callers send within one turn of the executor share one `/pipeline` request, each
    /// getting its own reply (`src/rest/coalesce.rs`; see [`RestClient::without_coalescing`]).
    pub async fn command(&self, command: &Command) -> Result<Value> {
        match &self.queue {
            Some(queue) => self.coalesced(queue, coalesce::Entry::Command(command.clone())).await,
            None => self.send_rendered(command.rendered()).await,
        }
    }

    /// Runs a common decision: in one call of its batch script with the others queued this turn for that script and
    /// slot, when the client coalesces; else alone.
    pub(crate) async fn decide(&self, decision: MergeableDecision) -> Result<Value> {
        match &self.queue {
            Some(queue) => self.coalesced(queue, coalesce::Entry::Decision(decision)).await,
            None => decision.alone.run(self, &[&decision.key], &decision.args).await,
        }
    }

    /// Sends one command, already its JSON array, as a request of its own (`POST /`).
    async fn send_rendered(&self, command: String) -> Result<Value> {
        let reply = self.post("", command).await?;
        decode_item(&reply)
    }

    /// Runs several commands in one round trip, not atomically: each gets its own result, and one command's error
    /// does not stop the others.
    pub async fn pipeline(&self, commands: &[Command]) -> Result<Vec<Result<Value>>> {
        self.batch_rendered("/pipeline", &commands.iter().map(Command::rendered).collect::<Vec<_>>()).await
    }

    /// Runs several commands in one round trip inside MULTI/EXEC: no other client's command runs between them.
    pub async fn multi_exec(&self, commands: &[Command]) -> Result<Vec<Result<Value>>> {
        self.batch_rendered("/multi-exec", &commands.iter().map(Command::rendered).collect::<Vec<_>>()).await
    }

    /// Sends commands already rendered as their JSON arrays in one request to `path`.
    async fn batch_rendered(&self, path: &str, commands: &[String]) -> Result<Vec<Result<Value>>> {
        let body = format!("[{}]", commands.join(","));
        let reply = self.post(path, body).await?;
        let Json::Array(items) = reply else {
            return Err(Error::malformed("an array of results", reply));
        };
        if items.len() != commands.len() {
            return Err(Error::malformed(
                format!("{} results, one per command", commands.len()),
                format!("{} results", items.len()),
            ));
        }
        Ok(items.iter().map(decode_item).collect())
    }

    /// Sends one request and returns its JSON body, mapping HTTP-level failures to errors.
    async fn post(&self, path: &str, body: String) -> Result<Json> {
        let url = format!("{}{path}", self.base_url);
        let (status, text) = match self.http.post(&url, &self.token, body, self.timeout).await {
            Ok(reply) => reply,
            Err(Failure::Timeout) => return Err(Error::Timeout { after: self.timeout }),
            Err(Failure::Network(source)) => {
                return Err(Error::Transport { url: self.base_url.clone(), source: source.into() })
            }
            Err(Failure::Local(message)) => return Err(Error::Client { url: self.base_url.clone(), message }),
        };
        let json = serde_json::from_str::<Json>(&text).ok();
        let error_text = || match json.as_ref().and_then(|j| j.get("error")).and_then(|e| e.as_str()) {
            Some(message) => message.to_owned(),
            None => text.chars().take(200).collect(),
        };
        match status {
            200 => json.ok_or_else(|| Error::malformed("a JSON body", &text)),
            // Upstash answers a command that Redis rejected with 400 and the Redis error text.
            400 if json.is_some() => Err(Error::from_redis_reply(&error_text())),
            401 | 403 => Err(Error::Unauthorized { status, message: error_text() }),
            _ => Err(Error::Endpoint { status, message: error_text() }),
        }
    }
}

/// Decodes one `{"result": …}` / `{"error": …}` object.
fn decode_item(item: &Json) -> Result<Value> {
    if let Some(error) = item.get("error") {
        return match error.as_str() {
            Some(message) => Err(Error::from_redis_reply(message)),
            None => Err(Error::malformed("an error message string", error)),
        };
    }
    match item.get("result") {
        Some(result) => decode_value(result, true),
        None => Err(Error::malformed("an object with \"result\" or \"error\"", item)),
    }
}

/// Decodes one JSON reply value. With `base64` every string but the literal `OK` is base64, as Upstash sends it
/// (`OK` is never valid base64, whose length is a multiple of four).
fn decode_value(json: &Json, base64: bool) -> Result<Value> {
    match json {
        Json::Null => Ok(Value::Nil),
        Json::Number(number) => {
            (number.as_i64()).map(Value::Int).ok_or_else(|| Error::malformed("an integer that fits in 64 bits", number))
        }
        Json::String(text) if base64 && text != "OK" => {
            (STANDARD.decode(text).ok()).map(Value::Bytes).ok_or_else(|| Error::malformed("a base64 string", json))
        }
        Json::String(text) => Ok(Value::Bytes(text.clone().into_bytes())),
        Json::Array(items) => {
            items.iter().map(|item| decode_value(item, base64)).collect::<Result<_>>().map(Value::Array)
        }
        Json::Bool(_) | Json::Object(_) => Err(Error::malformed("a Redis reply (null, number, string or array)", json)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_unusable_configuration_with_what_to_do() {
        let err = RestClient::new("127.0.0.1:8079", "t").unwrap_err();
        assert!(err.to_string().contains("http://"), "{err}");
        let err = RestClient::new("http://127.0.0.1:8079", "").unwrap_err();
        assert!(err.to_string().contains("EDGELIMIT_TOKEN"), "{err}");
        let client = RestClient::new("http://127.0.0.1:8079/", "t").unwrap();
        assert_eq!(client.url(), "http://127.0.0.1:8079");
        assert!(client.clone().with_timeout(Duration::ZERO).is_err());
        let err = client.clone().with_timeout(Duration::from_micros(500)).unwrap_err();
        assert!(err.to_string().contains("at least 1 ms, got 500µs"), "{err}");
        assert!(client.clone().with_timeout(Duration::from_millis(1)).is_ok());
        // Caught when the client is made, not as a transport error (which a fail-open policy absorbs) per request.
        let err = RestClient::new("http://a b", "t").unwrap_err();
        assert!(err.to_string().contains("not a URL a request can go to"), "{err}");
        assert!(RestClient::new("https://[bad", "t").is_err());
        for url in ["http://user:pw@127.0.0.1:8079", "https://user@example.com/", "http://:pw@h"] {
            let err = RestClient::new(url, "t").unwrap_err();
            assert_eq!(err.code(), "EDGELIMIT_INVALID_CONFIG");
            assert!(err.to_string().contains("holds credentials"), "{err}");
            assert!(!err.to_string().contains("pw") && !err.to_string().contains("user@"), "{err}");
        }
        // An `@` after the host is no credential.
        assert!(RestClient::new("http://127.0.0.1:8079/a@b", "t").is_ok());
        for token in ["t\u{2603}", "a b", "t\r\nx: y", "t\0"] {
            let err = RestClient::new("http://127.0.0.1:8079", token).unwrap_err();
            assert!(err.to_string().contains("which an HTTP header cannot carry"), "{token:?}: {err}");
        }
        // A JS timer fires at once past 2^31 - 1 ms: a longer timeout would time every request out on wasm.
        assert!(client.clone().with_timeout(MAX_TIMEOUT).is_ok());
        let err = client.with_timeout(MAX_TIMEOUT + Duration::from_millis(1)).unwrap_err();
        assert!(err.to_string().contains("at most 2147483647 ms"), "{err}");
    }

    #[test]
    fn result_and_error_items_are_decoded_and_anything_else_is_malformed() {
        let item = |text: &str| decode_item(&json(text));
        assert_eq!(item(r#"{"result": "UE9ORw=="}"#).unwrap(), Value::Bytes(b"PONG".to_vec()));
        assert_eq!(
            item(r#"{"error": "ERR x"}"#).unwrap_err().to_string(),
            "redis replied with an error edgelimit does not expect: ERR x"
        );
        let nope = item(r#"{"nope": 1}"#).unwrap_err();
        assert_eq!(nope.code(), "EDGELIMIT_MALFORMED_REPLY");
        assert!(nope.to_string().contains(r#"got {"nope":1}"#), "{nope}");
        assert_eq!(item(r#"{"error": 5}"#).unwrap_err().code(), "EDGELIMIT_MALFORMED_REPLY");
    }

    fn json(text: &str) -> Json {
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn maps_every_json_shape_of_the_protocol() {
        let reply = json(r#"[null, 7, "abc", ["x", -1]]"#);
        assert_eq!(
            decode_value(&reply, false).unwrap(),
            Value::Array(vec![
                Value::Nil,
                Value::Int(7),
                Value::Bytes(b"abc".to_vec()),
                Value::Array(vec![Value::Bytes(b"x".to_vec()), Value::Int(-1)]),
            ])
        );
    }

    #[test]
    fn base64_strings_are_decoded_except_the_literal_ok() {
        let reply = json(r#"["T0s=", "OK", "AP8="]"#);
        assert_eq!(
            decode_value(&reply, true).unwrap(),
            Value::Array(vec![Value::Bytes(b"OK".to_vec()), Value::Bytes(b"OK".to_vec()), Value::Bytes(vec![0, 255]),])
        );
    }

    #[test]
    fn rejects_what_redis_never_sends() {
        for bad in ["1.5", "1e3", "-0.0", "true", r#"{"a": 1}"#, "18446744073709551615", "[1, [false]]"] {
            let err = decode_value(&json(bad), false).unwrap_err();
            assert_eq!(err.code(), "EDGELIMIT_MALFORMED_REPLY", "{bad}");
        }
        let err = decode_value(&json(r#""not base64!""#), true).unwrap_err();
        assert!(err.to_string().contains(r#"got "not base64!""#), "{err}");
    }
}
