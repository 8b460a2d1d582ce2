//! The npm package's conversions between JS values and the core's: replies as `@upstash/redis` returns them,
//! commands, permits, durations in ms, decisions. The Worker's build has none.

use std::time::Duration;

use wasm_bindgen::prelude::*;

use super::{describe, field, given, items, text, whole};
use crate::decision::Decision;
use crate::error::{Error, Result};
use crate::rest::Command;
use crate::value::Value;

/// Largest integer a JS number holds exactly; larger replies become BigInt.
pub(super) const MAX_SAFE_INTEGER: i64 = (1 << 53) - 1;

/// Turns a reply into the JS value `@upstash/redis` users expect: `null`, a number (BigInt beyond 2^53), a string
/// (a `Uint8Array` when the bytes are not UTF-8), or an array of those.
pub(super) fn to_js_value(value: Value) -> JsValue {
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

/// Reads a JS array of strings and integers into words. Anything but an array is refused: read as one, a string
/// would be its characters (a key "mykey" five keys) and a number no words at all.
pub(super) fn words(value: &JsValue, what: &str) -> Result<Vec<String>, Error> {
    let Some(items) = items(value, what)? else {
        return Err(Error::InvalidArgument(format!(
            "{what} must be an array of strings or integers, e.g. [\"GET\", \"key\"], got {}",
            describe(value)
        )));
    };
    (items.iter().enumerate())
        .map(
            |(i, word)| match (text(word, || format!("{what}[{i}]"))?, word.as_f64()) {
                (Some(text), _) => Ok(text),
                // A whole number within ±2^53 converts to i64 exactly (-0 to "0", as JS's String(-0)), and printing an
                // integer keeps Rust's float printer out of the module.
                (None, Some(n)) if n.fract() == 0.0 && n.abs() <= MAX_SAFE_INTEGER as f64 => Ok((n as i64).to_string()),
                _ => Err(Error::InvalidArgument(format!(
                    "{what}[{i}] must be a string or an integer, got {}",
                    describe(word)
                ))),
            },
        )
        .collect()
}

pub(super) fn command(value: &JsValue) -> Result<Command, Error> {
    let words = words(value, "command")?;
    let (name, args) = words
        .split_first()
        .ok_or_else(|| Error::InvalidArgument("a command needs at least its name, e.g. [\"PING\"]".into()))?;
    Ok(Command::new(name).args(args))
}

/// A JS number for a count or a time in ms (all far below 2^53, where numbers are exact).
pub(super) fn number(n: u64) -> JsValue {
    JsValue::from_f64(n as f64)
}

/// Permits: a whole number from 1, `1` when `undefined`.
pub(super) fn permits(value: &JsValue) -> Result<u32> {
    match given(value) {
        None => Ok(1),
        Some(value) => whole(value, "permits", 1, u32::MAX.into()).map(|n| n as u32),
    }
}

/// `options.permits` from an options object such as `{ permits: 2 }`; 1 when the options or the field are absent.
pub(super) fn permits_in(options: &JsValue) -> Result<u32> {
    let Some(options) = given(options) else {
        return Ok(1);
    };
    if !options.is_object() {
        return Err(Error::InvalidArgument(format!(
            "options must be an object like {{ permits: 2 }}, got {}",
            describe(options)
        )));
    }
    // A misspelt `permit: 5` would otherwise take 1 permit. A call's argument: INVALID_ARGUMENT.
    super::known_fields(options, &["permits"], "options").map_err(|error| match error {
        Error::InvalidConfig(message) => Error::InvalidArgument(message),
        other => other,
    })?;
    permits(&field(options, "permits")?)
}

/// Milliseconds given as a number (timeouts, as JS APIs take them).
pub(super) fn milliseconds(value: &JsValue, what: &str) -> Result<Duration> {
    whole(value, &format!("{what} (ms)"), 0, u32::MAX.into()).map(Duration::from_millis)
}

#[wasm_bindgen(module = "/src/wasm/objects.js")]
extern "C" {
    /// See objects.js: why results are built there.
    #[wasm_bindgen(js_name = decision)]
    fn decision_literal(
        success: bool,
        limit: f64,
        remaining: f64,
        reset: f64,
        retry_after: f64,
        receipt: Option<String>,
    ) -> JsValue;

    #[wasm_bindgen(js_name = outcome)]
    #[allow(clippy::too_many_arguments)]
    fn outcome_literal(
        success: bool,
        limit: f64,
        remaining: f64,
        reset: f64,
        retry_after: f64,
        receipt: Option<String>,
        reason: &str,
        results: js_sys::Array,
        error: JsValue,
    ) -> JsValue;
}

/// A decision as JS sees it: `{success, limit, remaining, reset, retryAfter}`, plus `receipt` for a grant (what
/// `refund` takes to give it back).
pub(super) fn decision_object(decision: &Decision) -> JsValue {
    decision_literal(
        decision.success,
        decision.limit as f64,
        decision.remaining as f64,
        decision.reset as f64,
        decision.retry_after as f64,
        decision.receipt.map(|receipt| receipt.to_string()),
    )
}

/// A decision with what `Ratelimit` adds to it: `reason`, each limit's own decision in `results`, and the absorbed
/// error (`undefined` when none).
pub(super) fn outcome_object(decision: &Decision, reason: &str, results: js_sys::Array, error: JsValue) -> JsValue {
    outcome_literal(
        decision.success,
        decision.limit as f64,
        decision.remaining as f64,
        decision.reset as f64,
        decision.retry_after as f64,
        decision.receipt.map(|receipt| receipt.to_string()),
        reason,
        results,
        error,
    )
}
