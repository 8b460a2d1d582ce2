//! The JSON side of the protocol: request bodies in, RESP replies out.
//!
//! Replies map as Upstash maps them: integers to numbers, strings to strings, nil to `null`, arrays to arrays, and
//! RESP3-only types to their RESP2 shapes (maps flatten to `[k, v, …]`). With `Upstash-Encoding: base64` every
//! string is base64 except the status reply `OK`, which Upstash's clients expect verbatim.

use base64::Engine as _;
use serde_json::{json, Value as Json};

/// One command from a request body: its words as bytes.
pub type Words = Vec<Vec<u8>>;

/// Parses `["SET", "k", 1]` into words: numbers as their decimal text ([`number_text`]), booleans as `true` or
/// `false` (as `@upstash/redis` sends them).
pub fn command(body: &Json) -> Result<Words, String> {
    let Json::Array(items) = body else {
        return Err(format!("a command must be a JSON array like [\"PING\"], got {}", kind(body)));
    };
    if items.is_empty() {
        return Err("a command must not be empty: put its name first, like [\"PING\"]".into());
    }
    items
        .iter()
        .enumerate()
        .map(|(i, item)| match item {
            Json::String(text) => Ok(text.as_bytes().to_vec()),
            Json::Number(number) => number_text(number).map(String::into_bytes).ok_or_else(|| {
                format!(
                    "argument {i}, the number {number}, has more digits than a JSON number keeps exactly (a whole \
                     number beyond 2^53 is read as a double): send it as a string"
                )
            }),
            Json::Bool(flag) => Ok(flag.to_string().into_bytes()),
            other => Err(format!("argument {i} must be a string, a number or a boolean, got {}", kind(other))),
        })
        .collect()
}

/// A JSON number as the argument Redis reads: a whole number as its digits (`1E2` as `100`: Redis's integers take no
/// exponent), a fraction as its shortest round-trip text. `None` for a whole number beyond ±2^53 that fits no 64-bit
/// integer: it has lost digits, and would store another number than the client wrote.
fn number_text(number: &serde_json::Number) -> Option<String> {
    if let Some(n) = number.as_i64() {
        return Some(n.to_string());
    }
    if let Some(n) = number.as_u64() {
        return Some(n.to_string());
    }
    let x = number.as_f64()?;
    if x.fract() != 0.0 {
        return Some(number.to_string());
    }
    // Exact: a whole double within ±2^53 converts to i64 without loss.
    (x.abs() <= (1u64 << 53) as f64).then(|| (x as i64).to_string())
}

/// Parses `[["SET", "k", 1], ["GET", "k"]]` into commands.
pub fn commands(body: &Json) -> Result<Vec<Words>, String> {
    let Json::Array(items) = body else {
        return Err(format!("a pipeline must be a JSON array of commands, got {}", kind(body)));
    };
    if items.is_empty() {
        return Err("a pipeline must hold at least one command".into());
    }
    items.iter().enumerate().map(|(i, item)| command(item).map_err(|e| format!("command {i}: {e}"))).collect()
}

fn kind(json: &Json) -> &'static str {
    match json {
        Json::Null => "null",
        Json::Bool(_) => "a boolean",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "an array",
        Json::Object(_) => "an object",
    }
}

/// The text of a Redis error reply as Redis wrote it (the redis crate splits code and detail; they are joined back).
pub(super) fn server_error_text(error: &redis::ServerError) -> String {
    match error.details() {
        Some(details) => format!("{} {details}", error.code()),
        None => error.code().to_owned(),
    }
}

/// The text of `error` when it is an error reply from Redis, as Redis wrote it; `None` for I/O, timeout, protocol.
pub(super) fn redis_error_text(error: &redis::RedisError) -> Option<String> {
    let code = error.code()?;
    Some(match redis::ServerError::try_from(error.clone()) {
        Ok(server_error) => server_error_text(&server_error),
        // An error the redis crate made up itself: its rendering is all there is.
        Err(_) => match error.detail() {
            Some(detail) => format!("{code} {detail}"),
            None => format!("{code} {error}"),
        },
    })
}

/// The text of an error of the bridge's own use of Redis other than Redis out of reach: its login refused
/// (`WRONGPASS`), an unreadable reply (`ERR`). `None` for an outage (the client's 503). Clients must report these:
/// taken for an outage, a policy failing open would let every request through.
pub(super) fn refusal_text(error: &redis::RedisError, redis: &str) -> Option<String> {
    match error.kind() {
        redis::ErrorKind::Io | redis::ErrorKind::ClusterConnectionNotFound => None,
        redis::ErrorKind::AuthenticationFailed => Some(format!(
            "WRONGPASS the bridge's login to Redis at {redis} was refused ({error}): fix the user and password in its \
             --redis URL"
        )),
        _ => Some(format!("ERR the bridge could not use Redis at {redis}: {error}")),
    }
}

/// One command's reply: a top-level error reply is the command's error, an error nested in an array stays a value
/// ([`reply`] renders its text), so that `POST /` answers as `/pipeline` does.
pub(super) fn top_level_error(value: redis::Value) -> redis::RedisResult<redis::Value> {
    match value {
        redis::Value::ServerError(error) => Err(error.into()),
        value => Ok(value),
    }
}

/// About how many bytes `value` took on the wire, payload plus framing: what replies are counted in against the
/// reply cap. Saturates, never panics.
pub fn wire_size(value: &redis::Value) -> u64 {
    use redis::Value as V;
    /// A type byte, a length and two CRLFs.
    const FRAMING: u64 = 8;
    let bytes = |len: usize| u64::try_from(len).unwrap_or(u64::MAX);
    let all = |items: &[V]| items.iter().fold(0u64, |sum, item| sum.saturating_add(wire_size(item)));
    let pairs = |pairs: &[(V, V)]| {
        pairs.iter().fold(0u64, |sum, (k, v)| sum.saturating_add(wire_size(k)).saturating_add(wire_size(v)))
    };
    let payload = match value {
        V::BulkString(bytes_) | V::BigNumber(bytes_) => bytes(bytes_.len()),
        V::SimpleString(text) | V::VerbatimString { text, .. } => bytes(text.len()),
        V::Array(items) | V::Set(items) | V::Push { data: items, .. } => all(items),
        V::Map(items) => pairs(items),
        V::Attribute { data, attributes } => wire_size(data).saturating_add(pairs(attributes)),
        V::ServerError(error) => bytes(server_error_text(error).len()),
        _ => 0,
    };
    payload.saturating_add(FRAMING)
}

/// Renders one RESP reply as JSON.
pub fn reply(value: redis::Value, base64: bool) -> Json {
    use redis::Value as V;
    let text = |bytes: &[u8]| -> Json {
        if base64 {
            Json::String(base64::engine::general_purpose::STANDARD.encode(bytes))
        } else {
            Json::String(String::from_utf8_lossy(bytes).into_owned())
        }
    };
    let list = |items: Vec<V>| Json::Array(items.into_iter().map(|item| reply(item, base64)).collect());
    match value {
        V::Nil => Json::Null,
        V::Int(n) => json!(n),
        V::Okay => json!("OK"),
        V::BulkString(bytes) => text(&bytes),
        V::SimpleString(s) => text(s.as_bytes()),
        V::VerbatimString { text: s, .. } => text(s.as_bytes()),
        V::BigNumber(digits) => text(&digits),
        V::Double(x) => json!(x),
        V::Boolean(b) => json!(i64::from(b)),
        V::Array(items) | V::Set(items) | V::Push { data: items, .. } => list(items),
        V::Map(pairs) => list(pairs.into_iter().flat_map(|(k, v)| [k, v]).collect()),
        V::Attribute { data, .. } => reply(*data, base64),
        // A nested error (a Lua table holding an error reply) has no JSON shape: rendered as its text, like any
        // string (base64 when asked).
        V::ServerError(error) => text(server_error_text(&error).as_bytes()),
        // `redis::Value` is non-exhaustive: a future type is rendered by its debug form rather than dropped.
        other => Json::String(format!("{other:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::Value as V;

    #[test]
    fn parses_commands_and_says_what_is_wrong() {
        assert_eq!(command(&json!(["SET", "k", 12])).unwrap(), vec![b"SET".to_vec(), b"k".to_vec(), b"12".to_vec()]);
        assert!(command(&json!({"cmd": "PING"})).unwrap_err().contains("JSON array"));
        assert!(command(&json!([])).unwrap_err().contains("empty"));
        assert!(commands(&json!([["PING"], [null]])).unwrap_err().starts_with("command 1"));
    }

    #[test]
    fn numbers_are_sent_as_the_digits_redis_reads_or_refused_when_json_lost_them() {
        let sent = |body: &str| {
            let words = command(&serde_json::from_str(body).unwrap()).map(|words| words[2].clone());
            words.map(|word| String::from_utf8(word).unwrap())
        };
        assert_eq!(sent(r#"["EXPIRE", "k", 1E2]"#).unwrap(), "100");
        assert_eq!(sent(r#"["SET", "k", 100.0]"#).unwrap(), "100");
        assert_eq!(sent(r#"["SET", "k", -0]"#).unwrap(), "0");
        assert_eq!(sent(r#"["SET", "k", -0.0]"#).unwrap(), "0");
        assert_eq!(sent(r#"["INCRBYFLOAT", "k", 1.5]"#).unwrap(), "1.5");
        assert_eq!(sent(r#"["SET", "k", 18446744073709551615]"#).unwrap(), "18446744073709551615");
        assert_eq!(sent(r#"["SET", "k", -9223372036854775808]"#).unwrap(), "-9223372036854775808");
        assert_eq!(sent(r#"["SET", "k", 9007199254740992.0]"#).unwrap(), "9007199254740992");
        let lost = sent(r#"["SET", "k", 123456789012345678901234567890]"#).unwrap_err();
        assert!(lost.contains("send it as a string"), "{lost}");
    }

    #[test]
    fn booleans_are_sent_as_their_text_and_null_objects_and_arrays_are_refused() {
        assert_eq!(
            command(&json!(["SET", "k", true])).unwrap(),
            vec![b"SET".to_vec(), b"k".to_vec(), b"true".to_vec()]
        );
        assert_eq!(command(&json!([false])).unwrap(), vec![b"false".to_vec()]);
        assert_eq!(
            commands(&json!([["SET", "a", false], ["GET", "a"]])).unwrap(),
            vec![vec![b"SET".to_vec(), b"a".to_vec(), b"false".to_vec()], vec![b"GET".to_vec(), b"a".to_vec()],]
        );
        for (bad, kind) in [(json!(null), "null"), (json!({"a": 1}), "an object"), (json!(["x"]), "an array")] {
            assert_eq!(
                command(&json!(["SET", "k", bad])).unwrap_err(),
                format!("argument 2 must be a string, a number or a boolean, got {kind}")
            );
        }
        assert_eq!(
            commands(&json!([["PING"], ["SET", "k", null]])).unwrap_err(),
            "command 1: argument 2 must be a string, a number or a boolean, got null"
        );
    }

    #[test]
    fn renders_resp_like_upstash() {
        let value = V::Array(vec![V::Nil, V::Int(-3), V::BulkString(b"hi".to_vec()), V::Okay]);
        assert_eq!(reply(value.clone(), false), json!([null, -3, "hi", "OK"]));
        assert_eq!(reply(value, true), json!([null, -3, "aGk=", "OK"]));
        assert_eq!(reply(V::SimpleString("PONG".into()), true), json!("UE9ORw=="));
        let map = V::Map(vec![(V::BulkString(b"a".to_vec()), V::Int(1))]);
        assert_eq!(reply(map, false), json!(["a", 1]));
    }

    #[test]
    fn a_nested_error_is_its_text_as_redis_wrote_it_encoded_like_any_string() {
        let value = redis::parse_redis_value(b"*4\r\n:1\r\n-E1 x\r\n-E2\r\n*1\r\n-ERR deep down\r\n").unwrap();
        assert_eq!(reply(value.clone(), false), json!([1, "E1 x", "E2", ["ERR deep down"]]));
        assert_eq!(reply(value.clone(), true), json!([1, "RTEgeA==", "RTI=", ["RVJSIGRlZXAgZG93bg=="]]));
        // Only a top-level error fails the command.
        assert!(top_level_error(value).is_ok());
        let error = top_level_error(redis::parse_redis_value(b"-E2\r\n").unwrap()).unwrap_err();
        assert_eq!(redis_error_text(&error).as_deref(), Some("E2"));
        let error = top_level_error(redis::parse_redis_value(b"-WRONGTYPE Operation\r\n").unwrap()).unwrap_err();
        assert_eq!(redis_error_text(&error).as_deref(), Some("WRONGTYPE Operation"));
        let io = redis::RedisError::from(std::io::Error::other("down"));
        assert_eq!(redis_error_text(&io), None);
    }

    #[test]
    fn wire_size_counts_payloads_and_framing() {
        assert_eq!(wire_size(&V::Nil), 8);
        assert_eq!(wire_size(&V::BulkString(vec![0; 100])), 108);
        let nested = V::Array(vec![V::Int(1), V::Array(vec![V::BulkString(b"abc".to_vec())])]);
        assert_eq!(wire_size(&nested), 8 + 8 + 8 + 11);
    }
}
