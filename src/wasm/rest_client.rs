//! `RestClient`: raw commands and scripts, for callers who want the REST protocol without a limiter.

use std::time::Duration;

use wasm_bindgen::prelude::*;

use super::to_js_error;
use super::values::{command, to_js_value, words};
use crate::rest;
use crate::script::Script;

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
