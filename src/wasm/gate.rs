//! `GateCore`: the Cloudflare Worker's engine (see [`crate::gate`]). It reads the Worker's `env` with the same
//! checked readers as the package's options and `RULES` with [`crate::gate::config`] (as `edgelimit rules check`
//! does), so a broken rule is refused at start, naming the offending field.

use serde::de::DeserializeOwned;
use serde::Serialize;
use wasm_bindgen::prelude::*;

use super::de::{field_of, read};
use super::{to_js, to_js_error};
use crate::error::{Error, Result};
use crate::gate::{config, Admission, Gate, Route};
use crate::reader::as_config_error;
use crate::rest::RestClient;

#[wasm_bindgen]
extern "C" {
    /// The Fetch API's `Headers` of the incoming request.
    pub type Headers;

    #[wasm_bindgen(method)]
    fn get(this: &Headers, name: &str) -> Option<String>;
}

/// `env[name]` as a `T`, `None` when not set.
fn setting<T: DeserializeOwned>(env: &JsValue, name: &str) -> Result<Option<T>> {
    read(&field_of(env, name)?, name)
}

/// `env[name]` as a `T`, or a config error saying how to set it.
fn required<T: DeserializeOwned>(env: &JsValue, name: &str, hint: &str) -> Result<T> {
    setting(env, name)?.ok_or_else(|| Error::InvalidConfig(format!("{name} is not set: {hint}")))
}

fn gate_of(env: &JsValue) -> Result<Gate> {
    let url: String = required(env, "EDGELIMIT_URL", "put the REST endpoint's URL in wrangler.toml [vars]")?;
    let token: String = required(
        env,
        "EDGELIMIT_TOKEN",
        "store the endpoint's token as a secret (`wrangler secret put EDGELIMIT_TOKEN`, or .dev.vars locally)",
    )?;
    // The rest as JSON, read as `edgelimit rules check` reads wrangler.toml's [vars].
    let mut vars = serde_json::Map::new();
    for name in ["RULES", "EDGELIMIT_PREFIX", "EDGELIMIT_LAYOUT"] {
        let value = field_of(env, name)?;
        if !value.is_undefined() {
            vars.insert(name.into(), json_of(&value, name)?);
        }
    }
    config::from_vars(&vars.into(), || RestClient::new(&url, &token))
}

/// A setting as JSON: a string as it is, anything else (a wrangler.toml array or table) through `JSON.stringify`.
fn json_of(value: &JsValue, name: &str) -> Result<serde_json::Value> {
    if value.is_string() {
        return read(value, name).map(serde_json::Value::String);
    }
    let text = js_sys::JSON::stringify(value).ok().and_then(|text| text.as_string());
    serde_json::from_str(text.as_deref().unwrap_or("null"))
        .map_err(|e| Error::InvalidConfig(format!("{name} is not valid JSON: {e}")))
}

/// The Worker's rules, ready to route requests.
#[wasm_bindgen(js_name = GateCore)]
pub struct JsGate {
    inner: Gate,
}

#[wasm_bindgen(js_class = GateCore)]
impl JsGate {
    /// `new GateCore(env)`: checks `EDGELIMIT_URL`, `EDGELIMIT_TOKEN`, `RULES` and `EDGELIMIT_PREFIX`.
    #[wasm_bindgen(constructor)]
    pub fn new(env: JsValue) -> Result<JsGate, JsValue> {
        let inner = gate_of(&env).map_err(as_config_error).map_err(to_js_error)?;
        Ok(JsGate { inner })
    }

    /// The rule this request falls under, or `undefined` when none does. `target`: the URL's path and query
    /// (`url.pathname + url.search`).
    pub fn route(&self, method: &str, host: &str, target: &str, headers: &Headers) -> Option<JsRoute> {
        let route = self.inner.route(method, host, target, |name| headers.get(name))?;
        Some(JsRoute { inner: route })
    }
}

/// A request under a rule.
#[wasm_bindgen(js_name = RouteCore)]
pub struct JsRoute {
    inner: Route,
}

#[wasm_bindgen(js_class = RouteCore)]
impl JsRoute {
    /// The rule's name.
    #[wasm_bindgen(getter)]
    pub fn rule(&self) -> String {
        self.inner.rule().to_owned()
    }

    /// Whether the rule only counts and logs.
    #[wasm_bindgen(getter, js_name = dryRun)]
    pub fn dry_run(&self) -> bool {
        self.inner.dry_run()
    }

    /// For a dry-run rule, the first rule after it that matches the request and enforces (`undefined` when none):
    /// it decides the request while the dry run only counts.
    #[wasm_bindgen(getter)]
    pub fn next(&self) -> Option<JsRoute> {
        (self.inner.next().cloned()).map(|inner| JsRoute { inner })
    }

    /// The identifier the request counts under (`ip:203.0.113.7`, `header:x-api-key:<sha1>`, …).
    #[wasm_bindgen(getter)]
    pub fn key(&self) -> String {
        self.inner.key().id.clone()
    }

    /// `{allowed, reason, status, headers: [[name, value]…], body?, error?}`; never rejects.
    pub async fn decide(&self) -> JsValue {
        verdict_object(self.inner.decide(js_sys::Date::now() as u64).await)
    }
}

/// A verdict as the Worker's script reads it.
#[derive(Serialize)]
struct Verdict<'a> {
    allowed: bool,
    reason: &'static str,
    status: u16,
    /// `[name, value]` pairs, as `new Headers(…)` takes them.
    headers: &'a [(String, String)],
    #[serde(skip_serializing_if = "Option::is_none")]
    body: Option<&'a str>,
    #[serde(skip_serializing_if = "JsValue::is_undefined", serialize_with = "serde_wasm_bindgen::preserve::serialize")]
    error: JsValue,
    #[serde(skip_serializing_if = "Option::is_none")]
    rule: Option<&'a str>,
}

fn verdict_object(admission: Admission) -> JsValue {
    to_js(&Verdict {
        allowed: admission.allowed,
        reason: admission.reason.as_str(),
        status: admission.status,
        headers: &admission.headers,
        body: admission.body.as_deref(),
        error: admission.error.map_or(JsValue::UNDEFINED, to_js_error),
        rule: admission.rule.as_deref(),
    })
}
