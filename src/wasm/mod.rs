//! The wasm-bindgen surface: what JavaScript (Workers, Node, browsers) sees of the core. The npm package's public
//! API is the hand-written layer in `js/` over these classes; JS names end in `Core` where that layer wraps them.
//!
//! | module | JS class |
//! |---|---|
//! | [`rest_client`] | `RestClient`: raw commands and scripts |
//! | [`gate`] | `GateCore`, `RouteCore`: the Cloudflare Worker's rules and verdicts |
//! | [`limits`] | (no class) limits as JS describes them, for `Ratelimit` and the Worker's rules |
//! | [`values`] | (no class) the package's conversions: replies, commands, permits, decisions |
//! | [`ratelimit`] | `RatelimitCore`: `Ratelimit`'s decisions, cache and failure policy |
//! | [`redisson`] | `RateLimiterCore`: the Redisson-layout handle on a named sliding log |
//!
//! Errors cross into JS as `Error`s named `EdgelimitError` with a stable `code` ([`Error::code`]). Values from JS go
//! through the checked readers below: a wrong type or range is an `EDGELIMIT_INVALID_ARGUMENT`, never a panic.

mod gate;
mod limits;
// The npm package's classes. The Worker's build (`--no-default-features`) leaves them out: it needs only the gate.
#[cfg(feature = "package")]
mod ratelimit;
#[cfg(feature = "package")]
mod redisson;
#[cfg(feature = "package")]
mod rest_client;
#[cfg(feature = "package")]
mod values;

use std::time::Duration;

use wasm_bindgen::prelude::*;

use crate::duration::parse_duration;
use crate::error::{Error, Result};

/// Does nothing, but must exist: wasm-bindgen's reset after a trap (`__wbg_reset_state`) calls the start export,
/// which a module built without reference types (scripts/build-wasm) has only when the crate declares one.
#[wasm_bindgen(start)]
fn start() {}

/// Turns a core error into a JS `Error` with a stable `code`, and `storeUnavailable`: whether a failure policy may
/// absorb it ([`Error::is_store_unavailable`]).
fn to_js_error(error: Error) -> JsValue {
    let js_error = js_sys::Error::new(&error.to_string());
    js_error.set_name("EdgelimitError");
    // Reflect::set only fails on frozen objects; a fresh Error is not one.
    let _ = js_sys::Reflect::set(&js_error, &"code".into(), &error.code().into());
    let _ = js_sys::Reflect::set(
        &js_error,
        &"storeUnavailable".into(),
        &error.is_store_unavailable().into(),
    );
    js_error.into()
}

/// `object[name]`, `undefined` when absent. A getter (or Proxy) that throws is the caller's error, never read as
/// absent: `{ get permits() { throw … } }` would otherwise take one permit.
fn field(object: &JsValue, name: &str) -> Result<JsValue> {
    // Not an object (options left out, a primitive): no fields; the callers check the types they need.
    if !object.is_object() && !object.is_function() {
        return Ok(JsValue::UNDEFINED);
    }
    js_sys::Reflect::get(object, &name.into()).map_err(|thrown| {
        Error::InvalidArgument(format!(
            "reading {name:?} of the object given threw: {}",
            printed(&thrown)
        ))
    })
}

/// Arrays claiming more items than this are refused before any is read: a Proxy may claim 2^32 − 1, and reading
/// each would hang the caller.
const MAX_ARRAY_ITEMS: u64 = 1 << 20;

/// `value`'s items if it is an array (a Proxy of one included), read one by one through `Reflect`. A getter that
/// throws, or a revoked Proxy, is the caller's error: an exception escaping an async call is uncaught (it ends a
/// Node process) and the caller's promise never settles.
fn items(value: &JsValue, what: &str) -> Result<Option<Vec<JsValue>>> {
    let threw = |thrown: JsValue| Error::InvalidArgument(format!("reading {what} threw: {}", printed(&thrown)));
    if !is_array(value).map_err(threw)? {
        return Ok(None);
    }
    let length = whole(&field(value, "length")?, &format!("{what}.length"), 0, MAX_ARRAY_ITEMS)?;
    (0..length as u32)
        .map(|i| js_sys::Reflect::get_u32(value, i).map_err(threw))
        .collect::<Result<_>>()
        .map(Some)
}

/// `String(value)` cut to 200 characters, or a placeholder when that throws: for error messages, which must not
/// throw.
fn printed(value: &JsValue) -> String {
    js_string(value)
        .unwrap_or_else(|_| "a value String() cannot print".into())
        .chars()
        .take(200)
        .collect()
}

/// The value, or `None` when it is `undefined` (an option left out).
fn given(value: &JsValue) -> Option<&JsValue> {
    (!value.is_undefined()).then_some(value)
}

#[wasm_bindgen]
extern "C" {
    /// JS's `String(value)`: numbers in messages are printed by JS, so Rust's float printer is not linked in.
    #[wasm_bindgen(catch, js_name = String)]
    fn js_string(value: &JsValue) -> std::result::Result<String, JsValue>;

    /// `Array.isArray`, which throws on a revoked Proxy (js_sys's does not catch).
    #[wasm_bindgen(catch, js_namespace = Array, js_name = isArray)]
    fn is_array(value: &JsValue) -> std::result::Result<bool, JsValue>;

    /// `Object.keys`, which runs a Proxy's traps, and they may throw (js_sys's does not catch).
    #[wasm_bindgen(catch, js_namespace = Object, js_name = keys)]
    fn own_keys(value: &JsValue) -> std::result::Result<js_sys::Array, JsValue>;
}

/// Refuses anything but an object whose fields are all in `known`: a misspelt or foreign field (`refillRate`,
/// @upstash/ratelimit's name for the rate) would otherwise be ignored, and the limit not be the one meant.
pub(super) fn known_fields(value: &JsValue, known: &[&str], what: &str) -> Result<()> {
    let threw = |thrown: JsValue| Error::InvalidConfig(format!("reading {what} threw: {}", printed(&thrown)));
    if !value.is_object() || is_array(value).map_err(threw)? {
        return Err(Error::InvalidConfig(format!(
            "{what} must be an object, got {}",
            describe(value)
        )));
    }
    for name in own_keys(value)
        .map_err(threw)?
        .iter()
        .filter_map(|name| name.as_string())
    {
        if !known.contains(&name.as_str()) {
            return Err(Error::InvalidConfig(format!(
                "{what} has an unknown field {name:?}; the fields are {}",
                known.join(", ")
            )));
        }
    }
    Ok(())
}

/// How a JS value is named in an error message: its type, or the value itself when short.
fn describe(value: &JsValue) -> String {
    match (value.as_string(), value.as_f64()) {
        (Some(text), _) => format!("the string {text:?}"),
        (None, Some(_)) => format!("the number {}", printed(value)),
        _ if value.is_null() => "null".into(),
        _ => value.js_typeof().as_string().unwrap_or_default(),
    }
}

/// A string, or an invalid-argument error naming `what`.
fn string(value: &JsValue, what: &str) -> Result<String> {
    text(value, || what.to_owned())?
        .ok_or_else(|| Error::InvalidArgument(format!("{what} must be a string, got {}", describe(value))))
}

/// `value`'s text if it is a string. A lone surrogate is refused (`what` is made only then): Rust would hold it as
/// U+FFFD, another string's spelling (two names sharing one state). Identifiers are read apart, as UTF-16.
fn text(value: &JsValue, what: impl FnOnce() -> String) -> Result<Option<String>> {
    let Some(text) = value.as_string() else {
        return Ok(None);
    };
    // Only a string with U+FFFD may have held a lone surrogate: the code-unit check runs on those alone.
    if text.contains('\u{FFFD}') && !value.unchecked_ref::<js_sys::JsString>().is_valid_utf16() {
        return Err(Error::InvalidArgument(format!(
            "{} holds a lone surrogate (it is not well-formed UTF-16), which would be read as U+FFFD and name \
             another string: fix the text (String.prototype.toWellFormed shows what it would become)",
            what()
        )));
    }
    Ok(Some(text))
}

/// A whole number within `low..=high`, or an invalid-argument error naming `what` and the range.
fn whole(value: &JsValue, what: &str, low: u64, high: u64) -> Result<u64> {
    match value.as_f64() {
        Some(n) if n.fract() == 0.0 && n >= low as f64 && n <= high as f64 => Ok(n as u64),
        _ => Err(Error::InvalidArgument(format!(
            "{what} must be a whole number from {low} to {high}, got {}",
            describe(value)
        ))),
    }
}

/// A duration written with its unit (`"10 s"`, `"250ms"`). Numbers are refused: ms or s must not be a guess.
fn duration(value: &JsValue, what: &str) -> Result<Duration> {
    match value.as_string() {
        Some(text) => parse_duration(&text).map_err(|e| Error::InvalidArgument(format!("{what}: {e}"))),
        None => Err(Error::InvalidArgument(format!(
            "{what} must be a duration with a unit, like \"10 s\" or \"250ms\", got {}",
            describe(value)
        ))),
    }
}

/// A plain object with these properties.
fn object(properties: &[(&str, JsValue)]) -> JsValue {
    let object = js_sys::Object::new();
    for (name, value) in properties {
        // Reflect::set only fails on frozen objects; a fresh one is not.
        let _ = js_sys::Reflect::set(&object, &(*name).into(), value);
    }
    object.into()
}
