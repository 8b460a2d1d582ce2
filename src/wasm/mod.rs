//! The wasm-bindgen surface: what JavaScript (Workers, Node, browsers) sees of the core. The npm package's public
//! API is the hand-written layer in `js/` over these classes; JS names end in `Core` where that layer wraps them.
//!
//! | module | JS class |
//! |---|---|
//! | [`rest_client`] | `RestClient`: raw commands and scripts |
//! | [`gate`] | `GateCore`, `RouteCore`: the Cloudflare Worker's rules and verdicts |
//! | [`values`] | (no class) the package's conversions: replies, commands, permits, decisions |
//! | [`ratelimit`] | `RatelimitCore`: `Ratelimit`'s decisions, cache and failure policy |
//! | [`redisson`] | `RateLimiterCore`: the Redisson-layout handle on a named sliding log |
//!
//! Errors cross into JS as `Error`s named `EdgelimitError` with a stable `code` ([`Error::code`]). Values from JS go
//! through [`de::read`] ([`crate::reader`]) into derived types: a wrong type or range is an `EDGELIMIT_INVALID_ARGUMENT`, never a panic.

mod de;
mod gate;
// The npm package's classes. The Worker's build (`--no-default-features`) leaves them out: it needs only the gate.
#[cfg(feature = "package")]
mod ratelimit;
#[cfg(feature = "package")]
mod redisson;
#[cfg(feature = "package")]
mod rest_client;
#[cfg(feature = "package")]
mod values;

use wasm_bindgen::prelude::*;

use crate::error::Error;

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
    let _ = js_sys::Reflect::set(&js_error, &"storeUnavailable".into(), &error.is_store_unavailable().into());
    js_error.into()
}

/// `String(value)` cut to 200 characters, or a placeholder when that throws: for error messages, which must not
/// throw.
fn printed(value: &JsValue) -> String {
    js_string(value).unwrap_or_else(|_| "a value String() cannot print".into()).chars().take(200).collect()
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

/// What Rust answers, as JS values: plain objects, arrays, `null` for `None`, `Uint8Array` for bytes.
fn to_js<T: serde::Serialize>(value: &T) -> JsValue {
    const SERIALIZER: serde_wasm_bindgen::Serializer =
        serde_wasm_bindgen::Serializer::json_compatible().serialize_bytes_as_arrays(false);
    // Cannot fail for the boundary's types: their numbers are f64, or i128 (a BigInt), and their map keys strings.
    value.serialize(&SERIALIZER).unwrap_or(JsValue::UNDEFINED)
}
