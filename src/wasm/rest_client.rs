//! `RestClient`: raw commands and scripts, for callers who want the REST protocol without a limiter.

use std::time::Duration;

use wasm_bindgen::prelude::*;

use super::de::{read, Whole};
use super::to_js_error;
use super::values::{command, to_js_value, Words};
use crate::error::Result;
use crate::rest;
use crate::rest::Script;

/// The longest timeout a client takes, in ms.
const MAX_TIMEOUT_MS: u64 = rest::MAX_TIMEOUT.as_millis() as u64;

/// A client for an Upstash-compatible Redis REST endpoint. Every parameter is a checked JS value: with typed ones,
/// wasm-bindgen's glue would throw outside the returned promise (crashing Node) or trap on a non-string.
#[wasm_bindgen(js_name = RestClient)]
pub struct JsRestClient {
    inner: rest::RestClient,
}

#[wasm_bindgen(js_class = RestClient)]
impl JsRestClient {
    /// `new RestClient(url, token, timeoutMs?)`; the timeout defaults to 1000 ms.
    #[wasm_bindgen(constructor)]
    pub fn new(url: JsValue, token: JsValue, timeout_ms: JsValue) -> Result<JsRestClient, JsValue> {
        let client = || -> Result<rest::RestClient> {
            let inner = rest::RestClient::new(&read::<String>(&url, "url")?, &read::<String>(&token, "token")?)?;
            // `null` leaves the default too, as `undefined` does.
            match timeout_ms.is_null() {
                true => Ok(inner),
                false => match read::<Option<Whole<1, MAX_TIMEOUT_MS>>>(&timeout_ms, "timeoutMs")? {
                    None => Ok(inner),
                    Some(ms) => inner.with_timeout(Duration::from_millis(ms.0)),
                },
            }
        };
        Ok(JsRestClient { inner: client().map_err(to_js_error)? })
    }

    /// Runs one command, e.g. `await client.command(["SET", "k", "v"])`.
    pub async fn command(&self, command_words: JsValue) -> Result<JsValue, JsValue> {
        let command = command(&command_words).map_err(to_js_error)?;
        let reply = self.inner.command(&command).await.map_err(to_js_error)?;
        Ok(to_js_value(&reply))
    }

    /// Runs a script with `EVALSHA`, falling back to `EVAL` when Redis does not have it cached.
    pub async fn eval(&self, script: JsValue, keys: JsValue, args: JsValue) -> Result<JsValue, JsValue> {
        let call = || -> Result<(String, Vec<String>, Vec<String>)> {
            Ok((read::<String>(&script, "script")?, read::<Words>(&keys, "keys")?.0, read::<Words>(&args, "args")?.0))
        };
        let (script, keys, args) = call().map_err(to_js_error)?;
        let reply = Script::new(&script).run(&self.inner, &keys, &args).await.map_err(to_js_error)?;
        Ok(to_js_value(&reply))
    }
}
