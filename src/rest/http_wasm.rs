//! HTTP in wasm: the runtime's global `fetch`, one call of `fetch.js` per request. Not reqwest's wasm client: it
//! always follows redirects (reqwest#2071), and whatever answered elsewhere would be read as the store's decision.

use std::time::Duration;

use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;

use super::Failure;

#[wasm_bindgen(module = "/src/rest/fetch.js")]
extern "C" {
    /// See fetch.js. Resolves to `[status, body]`.
    #[wasm_bindgen(catch, js_name = post)]
    fn fetch_post(
        url: &str,
        authorization: &str,
        body: String,
        timeout_ms: f64,
        deadline_header: &str,
    ) -> Result<js_sys::Promise, JsValue>;

    /// Why `url` is not a URL a request can go to, if it is not, read by the runtime's own `URL` as `fetch` will.
    #[wasm_bindgen(js_name = urlProblem)]
    pub(crate) fn url_problem(url: &str) -> Option<String>;

    /// Whether `url` (one `url_problem` accepts) names a user or password.
    #[wasm_bindgen(js_name = urlHasCredentials)]
    pub(crate) fn url_has_credentials(url: &str) -> bool;
}

#[derive(Debug, Clone, Default)]
pub(crate) struct Http;

impl Http {
    /// POSTs `body` (JSON) with the bearer `token`, asking for base64-encoded replies; the status and the body.
    pub(crate) async fn post(
        &self,
        url: &str,
        token: &str,
        body: String,
        timeout: Duration,
    ) -> Result<(u16, String), Failure> {
        let authorization = format!("Bearer {token}");
        let timeout_ms = timeout.as_millis() as f64;
        let promise = fetch_post(url, &authorization, body, timeout_ms, super::DEADLINE_HEADER).map_err(failure)?;
        let reply: js_sys::Array = JsFuture::from(promise).await.map_err(failure)?.unchecked_into();
        // fetch.js resolves to [status, text]: a status is 200 to 599, and text() gives a string.
        let status = reply.get(0).as_f64().unwrap_or(0.0) as u16;
        Ok((status, reply.get(1).as_string().unwrap_or_default()))
    }
}

/// False in Cloudflare Workers (known by `WebSocketPair` or their user agent), true in Node and browsers: in workerd
/// a request woken by another request's call is cancelled when that other request ends (see `limit::Reserved`).
pub(crate) fn requests_may_wait_on_each_other() -> bool {
    let global = js_sys::global();
    let agent = js_sys::Reflect::get(&global, &"navigator".into())
        .and_then(|navigator| js_sys::Reflect::get(&navigator, &"userAgent".into()))
        .ok()
        .and_then(|agent| agent.as_string());
    let workers = agent.as_deref() == Some("Cloudflare-Workers")
        || js_sys::Reflect::has(&global, &"WebSocketPair".into()).unwrap_or(false);
    !workers
}

/// fetch.js rejects with `{kind, message}`; anything else (fetch.js itself failed) is local.
fn failure(error: JsValue) -> Failure {
    let property = |name: &str| js_sys::Reflect::get(&error, &name.into()).ok().and_then(|v| v.as_string());
    let message = property("message").unwrap_or_else(|| format!("{error:?}"));
    match property("kind").as_deref() {
        Some("timeout") => Failure::Timeout,
        // As text: a JS value cannot cross threads.
        Some("network") => Failure::Network(message.into()),
        _ => Failure::Local(message),
    }
}

/// Runs `task` on the JS event loop, after the current turn's synchronous code.
pub(crate) fn spawn(task: impl std::future::Future<Output = ()> + 'static) {
    wasm_bindgen_futures::spawn_local(task);
}
