//! The wasm-bindgen surface: what JavaScript (Workers, Node, browsers) sees of the core. The npm package's public
//! API is the hand-written layer in `js/` over these classes; their JS names end in `Core` where that layer wraps
//! them.
//!
//! | module | JS class |
//! |---|---|
//! | [`rest_client`] | `RestClient`: raw commands and scripts |
//! | [`gate`] | `GateCore`, `RouteCore`: the Cloudflare Worker's rules and verdicts |
//! | [`ratelimit`] | `RatelimitCore`: `Ratelimit`'s decisions, cache and failure policy |
//! | [`sliding_log`] | `RateLimiterCore`: the Redisson-style handle on a named sliding log |
//!
//! Errors cross into JS as `Error` objects whose `name` is `EdgelimitError` and whose `code` is [`Error::code`], so
//! JS callers branch on a stable string rather than on message text. Values from JS are read through the checked
//! readers below: a wrong type or range is an `EDGELIMIT_INVALID_ARGUMENT` naming the option, never a panic.

mod gate;
mod ratelimit;
mod rest_client;
mod sliding_log;

use std::time::Duration;

use wasm_bindgen::prelude::*;

use crate::decision::Decision;
use crate::duration::parse_duration;
use crate::error::{Error, Result};
use crate::rest::Command;
use crate::value::Value;

/// Runs when the module is instantiated, and again in each fresh instance after a trap. It has nothing to do: it
/// exists because wasm-bindgen's reset-state function (`__wbg_reset_state`, which the Worker calls after a trap)
/// always calls the module's start export, and a module built without reference types (scripts/build-wasm, for
/// Debian's wasm-opt) has one only when the crate declares a start function.
#[wasm_bindgen(start)]
fn start() {}

/// Turns a core error into a JS `Error` with a stable `code`, and `storeUnavailable`: whether it is one of the
/// failures a failure policy may absorb ([`Error::is_store_unavailable`]).
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

/// Largest integer a JS number holds exactly; larger replies become BigInt.
const MAX_SAFE_INTEGER: i64 = (1 << 53) - 1;

/// Turns a reply into the JS value `@upstash/redis` users expect: `null`, a number (BigInt beyond 2^53), a string
/// (a `Uint8Array` when the bytes are not UTF-8), or an array of those.
fn to_js_value(value: Value) -> JsValue {
    match value {
        Value::Nil => JsValue::NULL,
        Value::Int(n) if (-MAX_SAFE_INTEGER..=MAX_SAFE_INTEGER).contains(&n) => JsValue::from_f64(n as f64),
        Value::Int(n) => js_sys::BigInt::from(n).into(),
        Value::Bytes(bytes) => match String::from_utf8(bytes) {
            Ok(text) => text.into(),
            Err(e) => js_sys::Uint8Array::from(e.as_bytes()).into(),
        },
        Value::Array(items) => items.into_iter().map(to_js_value).collect::<js_sys::Array>().into(),
    }
}

/// Reads a JS array of strings and integers into words.
fn words(array: &js_sys::Array, what: &str) -> Result<Vec<String>, Error> {
    array
        .iter()
        .enumerate()
        .map(|(i, word)| match (word.as_string(), word.as_f64()) {
            (Some(text), _) => Ok(text),
            (None, Some(n)) if n.fract() == 0.0 && n.abs() <= MAX_SAFE_INTEGER as f64 => Ok(format!("{n:.0}")),
            _ => Err(Error::InvalidArgument(format!(
                "{what}[{i}] must be a string or an integer, got {}",
                describe(&word)
            ))),
        })
        .collect()
}

fn command(array: &js_sys::Array) -> Result<Command, Error> {
    let words = words(array, "command")?;
    let (name, args) = words
        .split_first()
        .ok_or_else(|| Error::InvalidArgument("a command needs at least its name, e.g. [\"PING\"]".into()))?;
    Ok(Command::new(name).args(args))
}

/// `object[name]`, `undefined` when absent.
fn field(object: &JsValue, name: &str) -> JsValue {
    js_sys::Reflect::get(object, &name.into()).unwrap_or(JsValue::UNDEFINED)
}

/// The value, or `None` when it is `undefined` (an option left out).
fn given(value: &JsValue) -> Option<&JsValue> {
    (!value.is_undefined()).then_some(value)
}

/// A JS number for a count or a time in ms (all far below 2^53, where numbers are exact).
fn number(n: u64) -> JsValue {
    JsValue::from_f64(n as f64)
}

/// How a JS value is named in an error message: its type, or the value itself when short.
fn describe(value: &JsValue) -> String {
    match (value.as_string(), value.as_f64()) {
        (Some(text), _) => format!("the string {text:?}"),
        (None, Some(n)) => format!("the number {n}"),
        _ if value.is_null() => "null".into(),
        _ => value.js_typeof().as_string().unwrap_or_default(),
    }
}

/// A string, or an invalid-argument error naming `what`.
fn string(value: &JsValue, what: &str) -> Result<String> {
    value
        .as_string()
        .ok_or_else(|| Error::InvalidArgument(format!("{what} must be a string, got {}", describe(value))))
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

/// Permits: a whole number from 1, `1` when `undefined`.
fn permits(value: &JsValue) -> Result<u32> {
    match given(value) {
        None => Ok(1),
        Some(value) => whole(value, "permits", 1, u32::MAX.into()).map(|n| n as u32),
    }
}

/// `options.permits` from an options object such as `{ permits: 2 }`; 1 when the options or the field are absent.
fn permits_in(options: &JsValue) -> Result<u32> {
    let Some(options) = given(options) else {
        return Ok(1);
    };
    if !options.is_object() {
        return Err(Error::InvalidArgument(format!(
            "options must be an object like {{ permits: 2 }}, got {}",
            describe(options)
        )));
    }
    permits(&field(options, "permits"))
}

/// A duration written with its unit (`"10 s"`, `"250ms"`). Numbers are refused: ms or s is what a rate limit must
/// not leave to a guess.
fn duration(value: &JsValue, what: &str) -> Result<Duration> {
    match value.as_string() {
        Some(text) => parse_duration(&text).map_err(|e| Error::InvalidArgument(format!("{what}: {e}"))),
        None => Err(Error::InvalidArgument(format!(
            "{what} must be a duration with a unit, like \"10 s\" or \"250ms\", got {}",
            describe(value)
        ))),
    }
}

/// Milliseconds given as a number (timeouts, as JS APIs take them).
fn milliseconds(value: &JsValue, what: &str) -> Result<Duration> {
    whole(value, &format!("{what} (ms)"), 0, u32::MAX.into()).map(Duration::from_millis)
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

/// A decision as JS sees it: `{success, limit, remaining, reset, retryAfter}`, plus `receipt` for a grant (what
/// `refund` takes to give it back).
fn decision_object(decision: &Decision) -> JsValue {
    let object = object(&[
        ("success", decision.success.into()),
        ("limit", number(decision.limit)),
        ("remaining", number(decision.remaining)),
        ("reset", number(decision.reset)),
        ("retryAfter", number(decision.retry_after)),
    ]);
    if let Some(receipt) = decision.receipt {
        let _ = js_sys::Reflect::set(&object, &"receipt".into(), &receipt.to_string().into());
    }
    object
}
