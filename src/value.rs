//! Redis replies as they arrive over the REST protocol, and their checked decoding.
//!
//! The REST endpoint maps RESP to JSON: integers become numbers, bulk and simple strings become strings (base64 when
//! the client asked for `Upstash-Encoding: base64`), nil and a Lua `false` become `null`, arrays nest. [`Value`] is
//! that mapping, and every accessor checks the shape instead of assuming it, so a reply that is not what a script
//! promises becomes [`Error::MalformedReply`], never a panic.

use crate::error::{Error, Result};
use crate::rest::json::Json;

/// One decoded Redis reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// Redis nil (also what a Lua `false` becomes).
    Nil,
    /// A Redis integer (also what a Lua `true` becomes: 1).
    Int(i64),
    /// A bulk or simple string, as bytes: script members may be binary (Redisson packs them with `struct.pack`).
    Bytes(Vec<u8>),
    /// A multi-bulk reply.
    Array(Vec<Value>),
}

impl Value {
    /// Decodes one JSON reply value. With `base64` every string but the literal `OK` is base64, as Upstash sends
    /// it (`OK` is never valid base64 output, whose length is a multiple of four, so the exception is unambiguous).
    pub(crate) fn from_json(json: &Json, base64: bool) -> Result<Value> {
        match json {
            Json::Null => Ok(Value::Nil),
            Json::Number(number) => number
                .parse()
                .map(Value::Int)
                .map_err(|_| Error::malformed("an integer that fits in 64 bits", number)),
            Json::String(text) if base64 && text != "OK" => decode_base64(text)
                .map(Value::Bytes)
                .ok_or_else(|| Error::malformed("a base64 string", json)),
            Json::String(text) => Ok(Value::Bytes(text.clone().into_bytes())),
            Json::Array(items) => items
                .iter()
                .map(|item| Value::from_json(item, base64))
                .collect::<Result<_>>()
                .map(Value::Array),
            Json::Bool(_) | Json::Object(_) => {
                Err(Error::malformed("a Redis reply (null, number, string or array)", json))
            }
        }
    }

    /// The reply as an integer.
    pub fn into_int(self) -> Result<i64> {
        match self {
            Value::Int(n) => Ok(n),
            other => Err(Error::malformed("an integer", other)),
        }
    }

    /// The reply as a non-negative integer: every count, time and wait a script returns.
    pub fn into_u64(self) -> Result<u64> {
        let n = self.into_int()?;
        u64::try_from(n).map_err(|_| Error::malformed("a non-negative integer", n))
    }

    /// A string reply holding a number, as Redis stores numbers in hashes (`what` names it in the error): a text
    /// that is not a number of type `T`, or out of its range, is malformed.
    pub fn into_number<T: std::str::FromStr>(self, what: &str) -> Result<T> {
        let text = self.into_string()?;
        text.parse().map_err(|_| {
            Error::malformed(
                format!("a whole number ({}) for {what}", std::any::type_name::<T>()),
                text,
            )
        })
    }

    /// The reply as a UTF-8 string.
    pub fn into_string(self) -> Result<String> {
        match self {
            Value::Bytes(bytes) => {
                String::from_utf8(bytes).map_err(|e| Error::malformed("a UTF-8 string", Value::Bytes(e.into_bytes())))
            }
            other => Err(Error::malformed("a string", other)),
        }
    }

    /// The reply as raw bytes.
    pub fn into_bytes(self) -> Result<Vec<u8>> {
        match self {
            Value::Bytes(bytes) => Ok(bytes),
            other => Err(Error::malformed("a string", other)),
        }
    }

    /// The reply as an array.
    pub fn into_array(self) -> Result<Vec<Value>> {
        match self {
            Value::Array(items) => Ok(items),
            other => Err(Error::malformed("an array", other)),
        }
    }

    /// The reply as an array of exactly `N` items: the shape every script decision has.
    pub fn into_tuple<const N: usize>(self) -> Result<[Value; N]> {
        let items = self.into_array()?;
        let len = items.len();
        <[Value; N]>::try_from(items).map_err(|items| {
            Error::malformed(
                format!("an array of {N} items"),
                format!("{len} items: {}", Value::Array(items)),
            )
        })
    }

    /// `None` for nil, otherwise the reply itself.
    pub fn into_option(self) -> Option<Value> {
        match self {
            Value::Nil => None,
            other => Some(other),
        }
    }
}

/// Standard base64 (`+`, `/`, `=` padding) as the REST protocol's base64 encoding writes it, decoded strictly: a
/// length that is not a multiple of four, a byte outside the alphabet, padding anywhere but the end, or bits after
/// the last byte that are not zero is `None`, as the base64 crate's `STANDARD` engine refused them. Written here
/// instead of taken from that crate, which was 3 KB of the wasm module for this one function.
fn decode_base64(text: &str) -> Option<Vec<u8>> {
    let bytes = text.as_bytes();
    if bytes.len() % 4 != 0 {
        return None;
    }
    let mut decoded = Vec::with_capacity(bytes.len() / 4 * 3);
    for (i, chunk) in bytes.chunks(4).enumerate() {
        let padding = chunk.iter().rev().take_while(|&&byte| byte == b'=').count();
        if padding > 2 || (padding > 0 && (i + 1) * 4 != bytes.len()) {
            return None;
        }
        let mut group = 0u32;
        for &byte in &chunk[..4 - padding] {
            let sextet = match byte {
                b'A'..=b'Z' => byte - b'A',
                b'a'..=b'z' => byte - b'a' + 26,
                b'0'..=b'9' => byte - b'0' + 52,
                b'+' => 62,
                b'/' => 63,
                _ => return None,
            };
            group = group << 6 | u32::from(sextet);
        }
        // [0, byte 1, byte 2, byte 3] of the group, with the padded sextets as zeros.
        let group = (group << (6 * padding)).to_be_bytes();
        let kept = 3 - padding;
        if group[1 + kept..].iter().any(|&byte| byte != 0) {
            return None;
        }
        decoded.extend_from_slice(&group[1..1 + kept]);
    }
    Some(decoded)
}

/// A compact, Redis-CLI-like rendering, used in error messages.
impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::Nil => f.write_str("(nil)"),
            Value::Int(n) => write!(f, "(integer) {n}"),
            Value::Bytes(bytes) => write!(f, "{:?}", String::from_utf8_lossy(bytes)),
            Value::Array(items) => {
                f.write_str("[")?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{item}")?;
                }
                f.write_str("]")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(text: &str) -> Json {
        Json::parse(text).unwrap()
    }

    #[test]
    fn maps_every_json_shape_of_the_protocol() {
        let reply = json(r#"[null, 7, "abc", ["x", -1]]"#);
        assert_eq!(
            Value::from_json(&reply, false).unwrap(),
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
            Value::from_json(&reply, true).unwrap(),
            Value::Array(vec![
                Value::Bytes(b"OK".to_vec()),
                Value::Bytes(b"OK".to_vec()),
                Value::Bytes(vec![0, 255]),
            ])
        );
    }

    #[test]
    fn rejects_what_redis_never_sends() {
        for bad in [
            "1.5",
            "1e3",
            "-0.0",
            "true",
            r#"{"a": 1}"#,
            "18446744073709551615",
            "[1, [false]]",
        ] {
            let err = Value::from_json(&json(bad), false).unwrap_err();
            assert_eq!(err.code(), "EDGELIMIT_MALFORMED_REPLY", "{bad}");
        }
        let err = Value::from_json(&json(r#""not base64!""#), true).unwrap_err();
        assert!(err.to_string().contains(r#"got "not base64!""#), "{err}");
    }

    #[test]
    fn base64_is_decoded_exactly_as_the_base64_crate_decodes_it() {
        use base64::Engine as _;
        let engine = base64::engine::general_purpose::STANDARD;
        // Every length up to 7 across a spread of byte values, and every byte value.
        let mut inputs: Vec<Vec<u8>> = (0..8)
            .flat_map(|len| (0..=255u8).step_by(17).map(move |b| vec![b; len]))
            .collect();
        inputs.push((0..=255).collect());
        for bytes in inputs {
            let text = engine.encode(&bytes);
            assert_eq!(decode_base64(&text), Some(bytes), "{text}");
        }
        for bad in [
            "A",
            "AA",
            "AAA",
            "AAAAA",
            "A===",
            "====",
            "AA=A",
            "=AAA",
            "AA==AAAA",
            "QR==",
            "QUJ=",
            "AA AA",
            "AA-_",
            "AAA\n",
            "QQ=",
            "Zm9v\u{e9}AAA",
            "ZmO=",
        ] {
            assert_eq!(decode_base64(bad), None, "{bad:?}");
            assert!(engine.decode(bad).is_err(), "{bad:?}");
        }
        assert_eq!(decode_base64(""), Some(Vec::new()));
    }

    #[test]
    fn numbers_are_checked_for_sign_type_and_range() {
        assert_eq!(Value::Int(7).into_u64().unwrap(), 7);
        assert!(Value::Int(-1).into_u64().is_err());
        assert!(Value::Bytes(b"7".to_vec()).into_u64().is_err());
        assert_eq!(
            Value::Bytes(b"4294967295".to_vec())
                .into_number::<u32>("a rate")
                .unwrap(),
            u32::MAX
        );
        let too_large = Value::Bytes(b"4294967296".to_vec())
            .into_number::<u32>("a rate")
            .unwrap_err();
        assert_eq!(too_large.code(), "EDGELIMIT_MALFORMED_REPLY");
        assert!(too_large.to_string().contains("for a rate"), "{too_large}");
        assert!(Value::Bytes(b"ten".to_vec()).into_number::<u64>("an interval").is_err());
        assert!(Value::Int(10).into_number::<u64>("an interval").is_err());
    }

    #[test]
    fn typed_accessors_check_instead_of_assuming() {
        assert_eq!(Value::Int(3).into_int().unwrap(), 3);
        assert!(Value::Nil.into_int().is_err());
        assert!(Value::Bytes(vec![0xff]).into_string().is_err());
        assert!(Value::Array(vec![Value::Int(1)]).into_tuple::<2>().is_err());
        let [a, b] = Value::Array(vec![Value::Int(1), Value::Nil]).into_tuple::<2>().unwrap();
        assert_eq!((a, b.into_option()), (Value::Int(1), None));
    }
}
