//! The wasm-bindgen surface: what JavaScript (Workers, Node, browsers) sees of the core.
//!
//! Errors cross into JS as `Error` objects whose `name` is `EdgelimitError` and whose `code` is [`Error::code`], so
//! JS callers branch on a stable string rather than on message text.

use std::time::Duration;

use wasm_bindgen::prelude::*;

use crate::error::Error;
use crate::rest::{self, Command};
use crate::script::Script;
use crate::value::Value;

/// Turns a core error into a JS `Error` with a stable `code`.
fn to_js_error(error: Error) -> JsValue {
    let js_error = js_sys::Error::new(&error.to_string());
    js_error.set_name("EdgelimitError");
    // Reflect::set only fails on frozen objects; a fresh Error is not one.
    let _ = js_sys::Reflect::set(&js_error, &"code".into(), &error.code().into());
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
            (None, Some(n)) => Err(Error::InvalidArgument(format!(
                "{what}[{i}] must be a string or an integer, got the number {n}"
            ))),
            (None, None) => Err(Error::InvalidArgument(format!(
                "{what}[{i}] must be a string or an integer, got {}",
                if word.is_null() {
                    "null".into()
                } else {
                    word.js_typeof().as_string().unwrap_or_default()
                }
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

/// A client for an Upstash-compatible Redis REST endpoint.
#[wasm_bindgen(js_name = RestClient)]
pub struct JsRestClient {
    inner: rest::RestClient,
}

#[wasm_bindgen(js_class = RestClient)]
impl JsRestClient {
    /// `new RestClient(url, token, timeoutMs?)`; the timeout defaults to 1000 ms.
    #[wasm_bindgen(constructor)]
    pub fn new(url: &str, token: &str, timeout_ms: Option<u32>) -> Result<JsRestClient, JsValue> {
        let mut inner = rest::RestClient::new(url, token).map_err(to_js_error)?;
        if let Some(ms) = timeout_ms {
            inner = inner
                .with_timeout(Duration::from_millis(ms.into()))
                .map_err(to_js_error)?;
        }
        Ok(JsRestClient { inner })
    }

    /// Runs one command, e.g. `await client.command(["SET", "k", "v"])`.
    pub async fn command(&self, command_words: js_sys::Array) -> Result<JsValue, JsValue> {
        let command = command(&command_words).map_err(to_js_error)?;
        let reply = self.inner.command(&command).await.map_err(to_js_error)?;
        Ok(to_js_value(reply))
    }

    /// Runs a script with `EVALSHA`, falling back to `EVAL` when Redis does not have it cached.
    pub async fn eval(&self, script: &str, keys: js_sys::Array, args: js_sys::Array) -> Result<JsValue, JsValue> {
        let keys = words(&keys, "keys").map_err(to_js_error)?;
        let args = words(&args, "args").map_err(to_js_error)?;
        let reply = Script::new(script)
            .run(&self.inner, &keys, &args)
            .await
            .map_err(to_js_error)?;
        Ok(to_js_value(reply))
    }
}
