//! Reads JS values into `#[derive(Deserialize)]` types ([`read`]). A serde `Deserializer` of its own, not
//! serde-wasm-bindgen's: that one reads fields through getters and Proxies without catching what they throw (the
//! exception escapes the module), reads arrays of any claimed length, sees only a struct's declared fields (so
//! `deny_unknown_fields` never fires), reads `null` as an absent option and a lone surrogate as U+FFFD.

use std::fmt::Formatter;
use std::marker::PhantomData;
use std::str::FromStr;
use std::time::Duration;

use serde::de::{self, DeserializeOwned, Expected, IntoDeserializer, Unexpected, Visitor};
use wasm_bindgen::prelude::*;

use super::{is_array, own_keys, printed};
use crate::duration::parse_duration;
use crate::error::Error;

/// Reads `value` as a `T`. Errors name where (`what`, then the path inside it: `limiter[1].interval`) and what was
/// expected; an unknown field is an `InvalidConfig`, anything else an `InvalidArgument`.
pub(super) fn read<T: DeserializeOwned>(value: &JsValue, what: &str) -> Result<T, Error> {
    serde_path_to_error::deserialize(Reader(value.clone())).map_err(|error| {
        let path = error.path().to_string();
        let place = match path.as_str() {
            "." => what.to_owned(),
            index if index.starts_with('[') => format!("{what}{index}"),
            field => field.to_owned(),
        };
        let ReadError { message, unknown_field } = error.into_inner();
        let message = format!("{place}{message}");
        if unknown_field {
            Error::InvalidConfig(message)
        } else {
            Error::InvalidArgument(message)
        }
    })
}

/// A reader's error: the rest of a sentence that starts with where it happened (" must be …", ": …").
#[derive(Debug)]
pub(super) struct ReadError {
    message: String,
    unknown_field: bool,
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ReadError {}

impl de::Error for ReadError {
    /// A message starting with `.` names a field inside the value (`.rate: …`); any other follows a colon.
    fn custom<T: std::fmt::Display>(message: T) -> Self {
        let message = message.to_string();
        match message.starts_with('.') {
            true => ReadError::new(message),
            false => ReadError::new(format!(": {message}")),
        }
    }

    fn invalid_type(unexpected: Unexpected<'_>, expected: &dyn Expected) -> Self {
        ReadError::new(format!(" must be {expected}, got {}", describe(&unexpected)))
    }

    fn invalid_value(unexpected: Unexpected<'_>, expected: &dyn Expected) -> Self {
        Self::invalid_type(unexpected, expected)
    }

    fn unknown_variant(variant: &str, expected: &'static [&'static str]) -> Self {
        let quoted: Vec<String> = expected.iter().map(|name| format!("{name:?}")).collect();
        let choices = match quoted.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
            _ => quoted.join(""),
        };
        ReadError::new(format!(" must be {choices}, got the string {variant:?}"))
    }

    fn unknown_field(field: &str, expected: &'static [&'static str]) -> Self {
        ReadError {
            message: format!(
                " has an unknown field {field:?}; the fields are {}",
                expected.join(", ")
            ),
            unknown_field: true,
        }
    }
}

impl ReadError {
    fn new(message: String) -> Self {
        ReadError {
            message,
            unknown_field: false,
        }
    }

    /// `value` is not what `expected` says.
    fn refused(value: &JsValue, expected: &dyn Expected) -> Self {
        let text = value.as_string();
        let unexpected = match (value.as_f64(), value.as_bool(), &text) {
            (Some(n), _, _) => Unexpected::Float(n),
            (_, Some(flag), _) => Unexpected::Bool(flag),
            (_, _, Some(text)) => Unexpected::Str(text),
            _ if value.is_null() => Unexpected::Unit,
            _ => Unexpected::Other(match value.js_typeof().as_string().as_deref() {
                Some("undefined") => "undefined",
                Some("function") => "function",
                Some("bigint") => "bigint",
                Some("symbol") => "symbol",
                _ => "object",
            }),
        };
        de::Error::invalid_type(unexpected, expected)
    }

    fn threw(thrown: JsValue, what: &str) -> Self {
        de::Error::custom(format!("reading {what} threw: {}", printed(&thrown)))
    }
}

/// How a value is named in a message: its type, or the value itself when short.
fn describe(unexpected: &Unexpected<'_>) -> String {
    match unexpected {
        Unexpected::Str(text) => format!("the string {:?}", text.chars().take(200).collect::<String>()),
        Unexpected::Unsigned(n) => format!("the number {n}"),
        Unexpected::Signed(n) => format!("the number {n}"),
        // JS prints the number: Rust's float printer stays out of the module.
        Unexpected::Float(n) => format!("the number {}", printed(&JsValue::from_f64(*n))),
        Unexpected::Unit => "null".into(),
        Unexpected::Bool(_) => "boolean".into(),
        Unexpected::Other(other) => (*other).into(),
        _ => "object".into(),
    }
}

/// Arrays claiming more items than this are refused before any is read: a Proxy may claim 2^32 − 1, and reading
/// each would hang the caller.
const MAX_ARRAY_ITEMS: u32 = 1 << 20;

/// Largest integer a JS number holds exactly.
pub(super) const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

/// The name of a newtype whose value may be one item or an array of them (see [`OneOrMany`]).
const ONE_OR_MANY: &str = "OneOrMany";

/// One `T`, or an array of them: `limiter: Ratelimit.gcra(…)` or `[…, …]`.
pub(super) struct OneOrMany<T>(pub Vec<T>);

impl<'de, T: de::Deserialize<'de>> de::Deserialize<'de> for OneOrMany<T> {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Items<T>(PhantomData<T>);
        impl<'de, T: de::Deserialize<'de>> Visitor<'de> for Items<T> {
            type Value = OneOrMany<T>;
            fn expecting(&self, f: &mut Formatter<'_>) -> std::fmt::Result {
                f.write_str("one item or an array of them")
            }
            fn visit_newtype_struct<D: de::Deserializer<'de>>(self, one: D) -> Result<Self::Value, D::Error> {
                Ok(OneOrMany(vec![T::deserialize(one)?]))
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut items: A) -> Result<Self::Value, A::Error> {
                let mut all = Vec::new();
                while let Some(item) = items.next_element()? {
                    all.push(item);
                }
                Ok(OneOrMany(all))
            }
        }
        deserializer.deserialize_newtype_struct(ONE_OR_MANY, Items(PhantomData))
    }
}

/// A JS value as a serde `Deserializer`.
struct Reader(JsValue);

impl Reader {
    /// The value's items if it is an array (a Proxy of one included), read one by one and checked.
    fn items(&self) -> Result<Option<Vec<JsValue>>, ReadError> {
        if !is_array(&self.0).map_err(|thrown| ReadError::threw(thrown, "it"))? {
            return Ok(None);
        }
        let length = field(&self.0, "length")?;
        let length = match length.as_f64() {
            Some(n) if n.fract() == 0.0 && (0.0..=MAX_ARRAY_ITEMS as f64).contains(&n) => n as u32,
            _ => {
                let expected = format!("an array of at most {MAX_ARRAY_ITEMS} items");
                return Err(ReadError::refused(&length, &expected.as_str()));
            }
        };
        (0..length)
            .map(|i| js_sys::Reflect::get_u32(&self.0, i).map_err(|thrown| ReadError::threw(thrown, &format!("[{i}]"))))
            .collect::<Result<_, _>>()
            .map(Some)
    }

    /// The value's text if it is a string. A lone surrogate is refused: read as U+FFFD, it would be another string's
    /// spelling (two names sharing one state).
    fn text(&self) -> Result<Option<String>, ReadError> {
        let Some(text) = self.0.as_string() else {
            return Ok(None);
        };
        // Only a string with U+FFFD may have held a lone surrogate: the code-unit check runs on those alone.
        if text.contains('\u{FFFD}') && !self.0.unchecked_ref::<js_sys::JsString>().is_valid_utf16() {
            return Err(ReadError::new(
                " holds a lone surrogate (it is not well-formed UTF-16), which would be read as U+FFFD and name \
                 another string: fix the text (String.prototype.toWellFormed shows what it would become)"
                    .into(),
            ));
        }
        Ok(Some(text))
    }
}

/// `object[name]` when it is the object's own property, else `undefined`: an inherited one is not the caller's
/// (`Object.prototype.timeout = 1` elsewhere in the process would fail every call locally). A getter (or Proxy)
/// that throws is the caller's error, never read as absent: `{ get permits() { throw … } }` would take one permit.
pub(super) fn field(object: &JsValue, name: &str) -> Result<JsValue, ReadError> {
    let threw = |thrown: JsValue| {
        de::Error::custom(format!(
            "reading {name:?} of the object given threw: {}",
            printed(&thrown)
        ))
    };
    if !has_own(object, name).map_err(threw)? {
        return Ok(JsValue::UNDEFINED);
    }
    js_sys::Reflect::get(object, &name.into()).map_err(threw)
}

#[wasm_bindgen]
extern "C" {
    /// `Object.hasOwn`, which runs a Proxy's traps, and they may throw (js_sys's does not catch).
    #[wasm_bindgen(catch, js_namespace = Object, js_name = hasOwn)]
    fn has_own(object: &JsValue, name: &str) -> Result<bool, JsValue>;
}

/// The error for `value` given as `what` where `expected` is needed, for a value read apart (identifiers).
#[cfg(feature = "package")]
pub(super) fn refuse(value: &JsValue, what: &str, expected: &str) -> Error {
    Error::InvalidArgument(format!("{what}{}", ReadError::refused(value, &expected)))
}

/// `object[name]`, for a value read apart (the Worker's `env`).
pub(super) fn field_of(object: &JsValue, name: &str) -> Result<JsValue, Error> {
    field(object, name).map_err(|error| Error::InvalidArgument(format!("{name}{error}")))
}

impl<'de> de::Deserializer<'de> for Reader {
    type Error = ReadError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ReadError> {
        if let Some(n) = self.0.as_f64() {
            // Whole numbers as integers (serde's integer visitors take no floats); -0 is 0.
            return match n {
                n if n.fract() == 0.0 && n.abs() <= MAX_SAFE_INTEGER && n >= 0.0 => visitor.visit_u64(n as u64),
                n if n.fract() == 0.0 && n.abs() <= MAX_SAFE_INTEGER => visitor.visit_i64(n as i64),
                n => visitor.visit_f64(n),
            };
        }
        if let Some(text) = self.text()? {
            return visitor.visit_string(text);
        }
        if let Some(items) = self.items()? {
            return visitor.visit_seq(de::value::SeqDeserializer::new(items.into_iter().map(Reader)));
        }
        match self.0.as_bool() {
            Some(flag) => visitor.visit_bool(flag),
            None if self.0.is_null() => visitor.visit_unit(),
            None => Err(ReadError::refused(&self.0, &visitor)),
        }
    }

    /// `undefined` is absent; `null` is a value (a wrong one, unless the type takes it).
    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ReadError> {
        if self.0.is_undefined() {
            visitor.visit_none()
        } else {
            visitor.visit_some(self)
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, ReadError> {
        if name == ONE_OR_MANY {
            if let Some(items) = self.items()? {
                return visitor.visit_seq(de::value::SeqDeserializer::new(items.into_iter().map(Reader)));
            }
        }
        visitor.visit_newtype_struct(self)
    }

    /// An object with only `fields` as its own keys; every field is read (`undefined` when absent), so inherited
    /// fields and getters count as before, and a required field left out is named with what it must be.
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, ReadError> {
        let not_object = !self.0.is_object() || is_array(&self.0).map_err(|thrown| ReadError::threw(thrown, "it"))?;
        if not_object {
            return Err(ReadError::refused(&self.0, &visitor));
        }
        // A misspelt or foreign field (`onerror`, `refillRate`) would otherwise be ignored, and the limit not be the
        // one meant.
        let keys = own_keys(&self.0).map_err(|thrown| ReadError::threw(thrown, "its keys"))?;
        if let Some(key) = keys
            .iter()
            .filter_map(|key| key.as_string())
            .find(|key| !fields.contains(&key.as_str()))
        {
            return Err(de::Error::unknown_field(&key, fields));
        }
        let values = (fields.iter())
            .map(|&name| Ok((name, Reader(field(&self.0, name)?))))
            .collect::<Result<Vec<_>, ReadError>>()?;
        visitor.visit_map(de::value::MapDeserializer::new(values.into_iter()))
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, ReadError> {
        match self.text()? {
            Some(text) => visitor.visit_enum(text.into_deserializer()),
            None => Err(ReadError::refused(&self.0, &visitor)),
        }
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf unit unit_struct seq
        tuple tuple_struct map identifier ignored_any
    }
}

impl IntoDeserializer<'_, ReadError> for Reader {
    type Deserializer = Reader;
    fn into_deserializer(self) -> Reader {
        self
    }
}

/// The message of a core error, for a reader's error that says where it happened.
pub(super) fn message_of(error: Error) -> String {
    match error {
        Error::InvalidArgument(message) | Error::InvalidConfig(message) => message,
        other => other.to_string(),
    }
}

/// A whole number from `LOW` to `HIGH`.
pub(super) struct Whole<const LOW: u64, const HIGH: u64>(pub u64);

/// A count of permits, limits or entries: `1..=u32::MAX`.
pub(super) type Count = Whole<1, { u32::MAX as u64 }>;

impl<'de, const LOW: u64, const HIGH: u64> de::Deserialize<'de> for Whole<LOW, HIGH> {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Number<const LOW: u64, const HIGH: u64>;
        impl<const LOW: u64, const HIGH: u64> Visitor<'_> for Number<LOW, HIGH> {
            type Value = Whole<LOW, HIGH>;
            fn expecting(&self, f: &mut Formatter<'_>) -> std::fmt::Result {
                write!(f, "a whole number from {LOW} to {HIGH}")
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Self::Value, E> {
                match (LOW..=HIGH).contains(&n) {
                    true => Ok(Whole(n)),
                    false => Err(E::invalid_value(Unexpected::Unsigned(n), &self)),
                }
            }
        }
        deserializer.deserialize_u64(Number)
    }
}

/// A duration written with its unit (`"10 s"`, `"250ms"`). Numbers are refused: ms or s must not be a guess.
pub(super) struct Dur(pub Duration);

impl<'de> de::Deserialize<'de> for Dur {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Text;
        impl Visitor<'_> for Text {
            type Value = Dur;
            fn expecting(&self, f: &mut Formatter<'_>) -> std::fmt::Result {
                f.write_str("a duration with a unit, like \"10 s\" or \"250ms\"")
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<Dur, E> {
                parse_duration(text).map(Dur).map_err(|e| E::custom(message_of(e)))
            }
        }
        deserializer.deserialize_str(Text)
    }
}

/// A string read with `T`'s `FromStr` (an algorithm, a failure policy, a key source…).
pub(super) struct Parsed<T>(pub T);

impl<'de, T: FromStr<Err = Error>> de::Deserialize<'de> for Parsed<T> {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Text<T>(PhantomData<T>);
        impl<T: FromStr<Err = Error>> Visitor<'_> for Text<T> {
            type Value = Parsed<T>;
            fn expecting(&self, f: &mut Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<Parsed<T>, E> {
                text.parse().map(Parsed).map_err(|e| E::custom(message_of(e)))
            }
        }
        deserializer.deserialize_str(Text(PhantomData))
    }
}

/// `true` or `false`.
pub(super) struct Flag(pub bool);

impl<'de> de::Deserialize<'de> for Flag {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Boolean;
        impl Visitor<'_> for Boolean {
            type Value = Flag;
            fn expecting(&self, f: &mut Formatter<'_>) -> std::fmt::Result {
                f.write_str("true or false")
            }
            fn visit_bool<E: de::Error>(self, flag: bool) -> Result<Flag, E> {
                Ok(Flag(flag))
            }
        }
        deserializer.deserialize_bool(Boolean)
    }
}
