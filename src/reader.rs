//! Reads configuration values into `#[derive(Deserialize)]` types ([`read`]), with messages that say where and what
//! (`RULES[0].limits[0].interval must be a duration with a unit, …, got the number 10`). One serde `Deserializer`
//! over two [`Source`]s: JS values (the npm package's options, src/wasm/de.rs) and JSON (the Worker's `RULES`, read
//! alike by the Worker and by `edgelimit rules check`). Unknown fields are refused (`deny_unknown_fields` fires), and
//! `null` is a value, not an absent option.

use std::fmt::Formatter;
use std::marker::PhantomData;
use std::str::FromStr;
use std::time::Duration;

use serde::de::{self, DeserializeOwned, Expected, IntoDeserializer, Unexpected, Visitor};
use serde::Deserialize;

use crate::duration::parse_duration;
use crate::error::Error;
use crate::limit::{Algorithm, Quota};
use crate::ratelimit::Limit;

/// Reads `value` as a `T`. Errors name where (`what`, then the path inside it: `limiter[1].interval`) and what was
/// expected; an unknown field is an `InvalidConfig`, anything else an `InvalidArgument`.
pub(crate) fn read<T: DeserializeOwned>(source: impl Source, what: &str) -> Result<T, Error> {
    serde_path_to_error::deserialize(Reader(source)).map_err(|error| {
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
pub(crate) struct ReadError {
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
            message: format!(" has an unknown field {field:?}; the fields are {}", expected.join(", ")),
            unknown_field: true,
        }
    }
}

impl ReadError {
    pub(crate) fn new(message: String) -> Self {
        ReadError { message, unknown_field: false }
    }
}

/// How a value is named in a message: its type, or the value itself when short.
fn describe(unexpected: &Unexpected<'_>) -> String {
    match unexpected {
        Unexpected::Str(text) => format!("the string {:?}", text.chars().take(200).collect::<String>()),
        Unexpected::Unsigned(n) => format!("the number {n}"),
        Unexpected::Signed(n) => format!("the number {n}"),
        Unexpected::Float(n) => format!("the number {}", number_text(*n)),
        Unexpected::Unit => "null".into(),
        Unexpected::Bool(_) => "boolean".into(),
        Unexpected::Other(other) => (*other).into(),
        _ => "object".into(),
    }
}

/// A number as JS prints it (`String(n)`). On wasm JS prints it: Rust's float printer stays out of the module.
fn number_text(n: f64) -> String {
    #[cfg(target_arch = "wasm32")]
    return js_sys::Number::from(n).to_string_with_radix(10).map(String::from).unwrap_or_default();
    #[cfg(not(target_arch = "wasm32"))]
    match n.abs() {
        a if a == 0.0 || (1e-6..1e21).contains(&a) => format!("{n}"),
        _ => format!("{n:e}").replace("e", "e+").replace("e+-", "e-"),
    }
}

/// What a value is, as the reader sees it.
pub(crate) enum Shape {
    /// `undefined`, or a key an object does not have.
    Absent,
    Null,
    Bool(bool),
    Number(f64),
    Text,
    Array,
    Object,
    /// A value JSON has no word for (`function`, `bigint`, `symbol`).
    #[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
    Other(&'static str),
}

/// Where values come from: what the reader asks of a value.
pub(crate) trait Source: Sized {
    /// What the value is (cheap: strings and arrays are read by `text` and `items`).
    fn shape(&self) -> Result<Shape, ReadError>;
    /// A string's text, checked.
    fn text(&self) -> Result<String, ReadError>;
    /// An array's items.
    fn items(&self) -> Result<Vec<Self>, ReadError>;
    /// An object's own keys.
    fn keys(&self) -> Result<Vec<String>, ReadError>;
    /// An object's own field, absent when it has none.
    fn field(&self, name: &str) -> Result<Self, ReadError>;
}

/// A JSON value; `None` is absent (a key the object does not have).
impl Source for Option<&serde_json::Value> {
    fn shape(&self) -> Result<Shape, ReadError> {
        use serde_json::Value;
        Ok(match self {
            None => Shape::Absent,
            Some(Value::Null) => Shape::Null,
            Some(Value::Bool(flag)) => Shape::Bool(*flag),
            // As JS reads JSON: every number an f64.
            Some(Value::Number(n)) => Shape::Number(n.as_f64().unwrap_or(f64::NAN)),
            Some(Value::String(_)) => Shape::Text,
            Some(Value::Array(_)) => Shape::Array,
            Some(Value::Object(_)) => Shape::Object,
        })
    }

    fn text(&self) -> Result<String, ReadError> {
        Ok(self.and_then(|value| value.as_str()).unwrap_or_default().to_owned())
    }

    fn items(&self) -> Result<Vec<Self>, ReadError> {
        Ok(self.and_then(|value| value.as_array()).map_or_else(Vec::new, |items| items.iter().map(Some).collect()))
    }

    fn keys(&self) -> Result<Vec<String>, ReadError> {
        Ok(self.and_then(|value| value.as_object()).map_or_else(Vec::new, |object| object.keys().cloned().collect()))
    }

    fn field(&self, name: &str) -> Result<Self, ReadError> {
        Ok(self.and_then(|value| value.get(name)))
    }
}

/// Largest integer a JS number holds exactly.
pub(crate) const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

/// The name of a newtype whose value may be one item or an array of them (see [`OneOrMany`]).
const ONE_OR_MANY: &str = "OneOrMany";

/// One `T`, or an array of them: `limiter: Ratelimit.gcra(…)` or `[…, …]`.
pub(crate) struct OneOrMany<T>(pub Vec<T>);

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

/// A value of a [`Source`] as a serde `Deserializer`.
pub(crate) struct Reader<S>(pub S);

impl<S: Source> Reader<S> {
    /// The error for this value where `expected` is needed.
    pub(crate) fn refused(&self, expected: &dyn Expected) -> ReadError {
        let mut text = None;
        let unexpected = match self.0.shape() {
            Err(error) => return error,
            Ok(Shape::Number(n)) => Unexpected::Float(n),
            Ok(Shape::Bool(flag)) => Unexpected::Bool(flag),
            Ok(Shape::Text) => match self.0.text() {
                Ok(read) => Unexpected::Str(text.insert(read).as_str()),
                Err(error) => return error,
            },
            Ok(Shape::Null) => Unexpected::Unit,
            Ok(Shape::Absent) => Unexpected::Other("undefined"),
            Ok(Shape::Array | Shape::Object) => Unexpected::Other("object"),
            Ok(Shape::Other(kind)) => Unexpected::Other(kind),
        };
        de::Error::invalid_type(unexpected, expected)
    }

    fn items(&self) -> Result<de::value::SeqDeserializer<std::vec::IntoIter<Reader<S>>, ReadError>, ReadError> {
        let items: Vec<Reader<S>> = self.0.items()?.into_iter().map(Reader).collect();
        Ok(de::value::SeqDeserializer::new(items.into_iter()))
    }
}

impl<'de, S: Source> de::Deserializer<'de> for Reader<S> {
    type Error = ReadError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ReadError> {
        match self.0.shape()? {
            // Whole numbers as integers (serde's integer visitors take no floats); -0 is 0.
            Shape::Number(n) if n.fract() == 0.0 && n.abs() <= MAX_SAFE_INTEGER && n >= 0.0 => {
                visitor.visit_u64(n as u64)
            }
            Shape::Number(n) if n.fract() == 0.0 && n.abs() <= MAX_SAFE_INTEGER => visitor.visit_i64(n as i64),
            Shape::Number(n) => visitor.visit_f64(n),
            Shape::Text => visitor.visit_string(self.0.text()?),
            Shape::Array => visitor.visit_seq(self.items()?),
            Shape::Bool(flag) => visitor.visit_bool(flag),
            Shape::Null => visitor.visit_unit(),
            _ => Err(self.refused(&visitor)),
        }
    }

    /// Absent is `None`; `null` is a value (a wrong one, unless the type takes it).
    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ReadError> {
        match self.0.shape()? {
            Shape::Absent => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, ReadError> {
        if name == ONE_OR_MANY && matches!(self.0.shape()?, Shape::Array) {
            return visitor.visit_seq(self.items()?);
        }
        visitor.visit_newtype_struct(self)
    }

    /// An object with only `fields` as its own keys; every field is read (absent when not there), so inherited
    /// fields and getters count as before, and a required field left out is named with what it must be.
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, ReadError> {
        if !matches!(self.0.shape()?, Shape::Object) {
            return Err(self.refused(&visitor));
        }
        // A misspelt or foreign field (`onerror`, `refillRate`) would otherwise be ignored, and the limit not be the
        // one meant.
        if let Some(key) = self.0.keys()?.iter().find(|key| !fields.contains(&key.as_str())) {
            return Err(de::Error::unknown_field(key, fields));
        }
        let values = (fields.iter())
            .map(|&name| Ok((name, Reader(self.0.field(name)?))))
            .collect::<Result<Vec<_>, ReadError>>()?;
        visitor.visit_map(de::value::MapDeserializer::new(values.into_iter()))
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, ReadError> {
        match self.0.shape()? {
            Shape::Text => visitor.visit_enum(self.0.text()?.into_deserializer()),
            _ => Err(self.refused(&visitor)),
        }
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf unit unit_struct seq
        tuple tuple_struct map identifier ignored_any
    }
}

impl<S: Source> IntoDeserializer<'_, ReadError> for Reader<S> {
    type Deserializer = Reader<S>;
    fn into_deserializer(self) -> Reader<S> {
        self
    }
}

/// The message of a core error, for a reader's error that says where it happened.
pub(crate) fn message_of(error: Error) -> String {
    match error {
        Error::InvalidArgument(message) | Error::InvalidConfig(message) => message,
        other => other.to_string(),
    }
}

/// A whole number from `LOW` to `HIGH`.
pub(crate) struct Whole<const LOW: u64, const HIGH: u64>(pub u64);

/// A count of permits, limits or entries: `1..=u32::MAX`.
pub(crate) type Count = Whole<1, { u32::MAX as u64 }>;

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
pub(crate) struct Dur(pub Duration);

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
pub(crate) struct Parsed<T>(pub T);

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
pub(crate) struct Flag(pub bool);

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

/// Options errors are the configuration's: report them as such.
pub(crate) fn as_config_error(error: Error) -> Error {
    match error {
        Error::InvalidArgument(message) => Error::InvalidConfig(message),
        other => other,
    }
}

/// A limit as the factories (`Ratelimit.slidingWindow(10, "1 s")`, …) build it.
#[derive(Deserialize)]
#[serde(try_from = "LimitFields")]
struct LimitOf(Limit);

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a limiter from a factory, like Ratelimit.slidingWindow(10, \"1 s\")")]
struct LimitFields {
    algorithm: Parsed<Algorithm>,
    limit: Count,
    interval: Dur,
    rate: Option<Count>,
    name: Option<String>,
}

impl TryFrom<LimitFields> for LimitOf {
    type Error = String;

    fn try_from(fields: LimitFields) -> Result<LimitOf, String> {
        let (algorithm, limit) = (fields.algorithm.0, fields.limit.0 as u32);
        let rate = match fields.rate {
            None => limit,
            // A rate where the algorithm has none would be ignored: the limit would not be the one meant.
            Some(_) if !matches!(algorithm, Algorithm::TokenBucket | Algorithm::Gcra) => {
                return Err(format!(
                    ".rate: a {algorithm} limit has no rate (only tokenBucket and gcra refill at one): it allows \
                     `limit` per `interval`; leave rate out"
                ))
            }
            Some(rate) => rate.0 as u32,
        };
        let quota = Quota::new(algorithm, limit, fields.interval.0, rate).map_err(message_of)?;
        Ok(LimitOf(Limit { quota, name: fields.name }))
    }
}

/// One limit, or an array of them.
#[derive(Deserialize)]
#[serde(from = "OneOrMany<LimitOf>")]
pub(crate) struct Limits(pub Vec<Limit>);

impl From<OneOrMany<LimitOf>> for Limits {
    fn from(limits: OneOrMany<LimitOf>) -> Limits {
        Limits(limits.0.into_iter().map(|limit| limit.0).collect())
    }
}
