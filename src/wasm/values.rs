//! The npm package's values: replies as `@upstash/redis` returns them, commands, permits, timeouts in ms,
//! decisions. The Worker's build has none.

use std::fmt::Formatter;
use std::time::Duration;

use serde::de::{self, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use wasm_bindgen::prelude::*;

use super::de::{read, Count, MAX_SAFE_INTEGER};
use super::to_js;
use crate::decision::Decision;
use crate::error::{Error, Result};
use crate::rest::Command;
use crate::value::Value;

/// A reply as `@upstash/redis` users expect it: `null`, a number (BigInt beyond 2^53), a string (a `Uint8Array`
/// when the bytes are not UTF-8), or an array of those.
struct Reply<'a>(&'a Value);

impl Serialize for Reply<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Value::Nil => serializer.serialize_none(),
            Value::Int(n) if n.unsigned_abs() <= MAX_SAFE_INTEGER as u64 => serializer.serialize_i64(*n),
            Value::Int(n) => serializer.serialize_i128((*n).into()),
            Value::Bytes(bytes) => match std::str::from_utf8(bytes) {
                Ok(text) => serializer.serialize_str(text),
                Err(_) => serializer.serialize_bytes(bytes),
            },
            Value::Array(items) => serializer.collect_seq(items.iter().map(Reply)),
        }
    }
}

pub(super) fn to_js_value(value: &Value) -> JsValue {
    to_js(&Reply(value))
}

/// An array of strings and integers (sent as their digits). Anything but an array is refused: read as one, a
/// string would be its characters (a key "mykey" five keys) and a number no words at all.
pub(super) struct Words(pub Vec<String>);

impl<'de> Deserialize<'de> for Words {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Array;
        impl<'de> Visitor<'de> for Array {
            type Value = Words;
            fn expecting(&self, f: &mut Formatter<'_>) -> std::fmt::Result {
                f.write_str("an array of strings or integers, e.g. [\"GET\", \"key\"]")
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut items: A) -> Result<Words, A::Error> {
                let mut words = Vec::new();
                while let Some(Word(word)) = items.next_element()? {
                    words.push(word);
                }
                Ok(Words(words))
            }
        }
        deserializer.deserialize_seq(Array)
    }
}

/// A string, or a whole number within ±2^53 (which the reader gives as an integer, -0 as 0).
struct Word(String);

impl<'de> Deserialize<'de> for Word {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Text;
        impl Visitor<'_> for Text {
            type Value = Word;
            fn expecting(&self, f: &mut Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string or an integer")
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<Word, E> {
                Ok(Word(text.to_owned()))
            }
            fn visit_string<E: de::Error>(self, text: String) -> Result<Word, E> {
                Ok(Word(text))
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Word, E> {
                Ok(Word(n.to_string()))
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<Word, E> {
                Ok(Word(n.to_string()))
            }
        }
        deserializer.deserialize_any(Text)
    }
}

pub(super) fn command(value: &JsValue) -> Result<Command> {
    let Words(words) = read(value, "command")?;
    let (name, args) = words
        .split_first()
        .ok_or_else(|| Error::InvalidArgument("a command needs at least its name, e.g. [\"PING\"]".into()))?;
    Ok(Command::new(name).args(args))
}

/// Permits: a whole number from 1, `1` when `undefined`.
pub(super) fn permits(value: &JsValue) -> Result<u32> {
    Ok(read::<Option<Count>>(value, "permits")?.map_or(1, |n| n.0 as u32))
}

/// A call's options, such as `{ permits: 2 }`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "an object like { permits: 2 }")]
struct PermitOptions {
    permits: Option<Count>,
}

/// `options.permits`; 1 when the options or the field are absent. A misspelt `permit: 5` is refused (it would take
/// 1 permit), as an invalid argument: these are a call's.
pub(super) fn permits_in(options: &JsValue) -> Result<u32> {
    let options = read::<Option<PermitOptions>>(options, "options").map_err(|error| match error {
        Error::InvalidConfig(message) => Error::InvalidArgument(message),
        other => other,
    })?;
    Ok(options.and_then(|options| options.permits).map_or(1, |n| n.0 as u32))
}

/// A timeout in ms, as JS APIs take them: a whole number from 0 to 2^32 − 1.
pub(super) struct Milliseconds(pub Duration);

impl<'de> Deserialize<'de> for Milliseconds {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Number;
        impl Visitor<'_> for Number {
            type Value = Milliseconds;
            fn expecting(&self, f: &mut Formatter<'_>) -> std::fmt::Result {
                f.write_str("a whole number of ms from 0 to 4294967295")
            }
            fn visit_u64<E: de::Error>(self, ms: u64) -> Result<Milliseconds, E> {
                match ms <= u32::MAX.into() {
                    true => Ok(Milliseconds(Duration::from_millis(ms))),
                    false => Err(E::invalid_value(de::Unexpected::Unsigned(ms), &self)),
                }
            }
        }
        deserializer.deserialize_u64(Number)
    }
}

/// Milliseconds given as a number (timeouts, as JS APIs take them).
pub(super) fn milliseconds(value: &JsValue, what: &str) -> Result<Duration> {
    Ok(read::<Milliseconds>(value, what)?.0)
}

/// A decision as JS sees it: `{success, limit, remaining, reset, retryAfter}`, plus `receipt` for a grant (what
/// `refund` takes to give it back). Counts and times are JS numbers (all far below 2^53, where they are exact).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct JsDecision {
    success: bool,
    limit: f64,
    remaining: f64,
    reset: f64,
    retry_after: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    receipt: Option<String>,
}

impl From<&Decision> for JsDecision {
    fn from(decision: &Decision) -> JsDecision {
        JsDecision {
            success: decision.success,
            limit: decision.limit as f64,
            remaining: decision.remaining as f64,
            reset: decision.reset as f64,
            retry_after: decision.retry_after as f64,
            receipt: decision.receipt.map(|receipt| receipt.to_string()),
        }
    }
}

pub(super) fn decision_object(decision: &Decision) -> JsValue {
    to_js(&JsDecision::from(decision))
}
