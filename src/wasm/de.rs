//! JS values as a [`Source`] of the shared reader ([`crate::reader`]), for the npm package's options and the
//! Worker's `env`. Not serde-wasm-bindgen: that one reads fields through getters and Proxies without catching what
//! they throw (the exception escapes the module), reads arrays of any claimed length, sees only a struct's declared
//! fields (so `deny_unknown_fields` never fires), reads `null` as an absent option and a lone surrogate as U+FFFD.

use serde::de::{self, DeserializeOwned};
use wasm_bindgen::prelude::*;

use super::{is_array, own_keys, printed};
use crate::error::Error;
use crate::reader::{ReadError, Reader, Shape, Source};
// The field types, for the package's classes.
#[cfg(feature = "package")]
pub(super) use crate::reader::{Count, Dur, Whole, MAX_SAFE_INTEGER};

/// Reads `value` as a `T` ([`crate::reader::read`]).
pub(super) fn read<T: DeserializeOwned>(value: &JsValue, what: &str) -> Result<T, Error> {
    crate::reader::read(Js(value.clone()), what)
}

/// Arrays claiming more items than this are refused before any is read: a Proxy may claim 2^32 − 1, and reading
/// each would hang the caller.
const MAX_ARRAY_ITEMS: u32 = 1 << 20;

/// A JS value, read through its own properties only.
struct Js(JsValue);

fn threw(thrown: JsValue, what: &str) -> ReadError {
    de::Error::custom(format!("reading {what} threw: {}", printed(&thrown)))
}

impl Source for Js {
    fn shape(&self) -> Result<Shape, ReadError> {
        let value = &self.0;
        Ok(match value.as_f64() {
            Some(n) => Shape::Number(n),
            None if value.is_string() => Shape::Text,
            None if is_array(value).map_err(|thrown| threw(thrown, "it"))? => Shape::Array,
            None => match value.as_bool() {
                Some(flag) => Shape::Bool(flag),
                None if value.is_null() => Shape::Null,
                None if value.is_undefined() => Shape::Absent,
                None if value.is_object() => Shape::Object,
                None => Shape::Other(match value.js_typeof().as_string().as_deref() {
                    Some("function") => "function",
                    Some("bigint") => "bigint",
                    Some("symbol") => "symbol",
                    _ => "object",
                }),
            },
        })
    }

    /// A lone surrogate is refused: read as U+FFFD, it would be another string's spelling (two names sharing one
    /// state).
    fn text(&self) -> Result<String, ReadError> {
        let text = self.0.as_string().unwrap_or_default();
        // Only a string with U+FFFD may have held a lone surrogate: the code-unit check runs on those alone.
        if text.contains('\u{FFFD}') && !self.0.unchecked_ref::<js_sys::JsString>().is_valid_utf16() {
            return Err(ReadError::new(
                " holds a lone surrogate (it is not well-formed UTF-16), which would be read as U+FFFD and name \
                 another string: fix the text (String.prototype.toWellFormed shows what it would become)"
                    .into(),
            ));
        }
        Ok(text)
    }

    /// Read one by one, the length checked first.
    fn items(&self) -> Result<Vec<Js>, ReadError> {
        let length = field(&self.0, "length")?;
        let length = match length.as_f64() {
            Some(n) if n.fract() == 0.0 && (0.0..=MAX_ARRAY_ITEMS as f64).contains(&n) => n as u32,
            _ => {
                let expected = format!("an array of at most {MAX_ARRAY_ITEMS} items");
                return Err(Reader(Js(length)).refused(&expected.as_str()));
            }
        };
        (0..length)
            .map(|i| (js_sys::Reflect::get_u32(&self.0, i).map(Js)).map_err(|thrown| threw(thrown, &format!("[{i}]"))))
            .collect()
    }

    fn keys(&self) -> Result<Vec<String>, ReadError> {
        let keys = own_keys(&self.0).map_err(|thrown| threw(thrown, "its keys"))?;
        Ok(keys.iter().filter_map(|key| key.as_string()).collect())
    }

    fn field(&self, name: &str) -> Result<Js, ReadError> {
        field(&self.0, name).map(Js)
    }
}

/// `object[name]` when it is the object's own property, else `undefined`: an inherited one is not the caller's
/// (`Object.prototype.timeout = 1` elsewhere in the process would fail every call locally). A getter (or Proxy)
/// that throws is the caller's error, never read as absent: `{ get permits() { throw … } }` would take one permit.
fn field(object: &JsValue, name: &str) -> Result<JsValue, ReadError> {
    let threw = |thrown: JsValue| {
        de::Error::custom(format!("reading {name:?} of the object given threw: {}", printed(&thrown)))
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
    Error::InvalidArgument(format!("{what}{}", Reader(Js(value.clone())).refused(&expected)))
}

/// `object[name]`, for a value read apart (the Worker's `env`).
pub(super) fn field_of(object: &JsValue, name: &str) -> Result<JsValue, Error> {
    field(object, name).map_err(|error| Error::InvalidArgument(format!("{name}{error}")))
}
