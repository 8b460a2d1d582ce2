//! `GateCore`: the Cloudflare Worker's engine (see [`crate::gate`]). It reads the Worker's `env` with the same
//! checked readers as the package's options, so a broken rule is refused at start, naming the offending field.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use wasm_bindgen::prelude::*;

use super::de::{field_of, read, Dur, Flag, OneOrMany, Parsed};
use super::limits::{as_config_error, Limits};
use super::{is_array, to_js, to_js_error};
use crate::error::{Error, Result};
use crate::gate::{Admission, Gate, KeySource, ListEntry, RequestMatch, Route, Rule};
use crate::limit::{KeyLayout, DEFAULT_PREFIX};
use crate::ratelimit::OnError;
use crate::rest::RestClient;

#[wasm_bindgen]
extern "C" {
    /// The Fetch API's `Headers` of the incoming request.
    pub type Headers;

    #[wasm_bindgen(method)]
    fn get(this: &Headers, name: &str) -> Option<String>;
}

/// A rule as `RULES` gives it (README, "Rules").
#[derive(Deserialize)]
#[serde(
    rename_all = "camelCase",
    deny_unknown_fields,
    expecting = "a rule like {\"name\": \"site\", \"limits\": […]}"
)]
struct RuleFields {
    name: String,
    #[serde(rename = "match")]
    request_match: Option<MatchFields>,
    key: Option<Parsed<KeySource>>,
    limits: Limits,
    allow: Option<OneOrMany<String>>,
    deny: Option<OneOrMany<String>>,
    dry_run: Option<Flag>,
    on_error: Option<Parsed<OnError>>,
    timeout: Option<Dur>,
    reserve: Option<Dur>,
}

/// Which requests a rule applies to; strings or arrays of them.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "an object like {\"path\": \"/api/\"}")]
struct MatchFields {
    host: Option<OneOrMany<String>>,
    path: Option<String>,
    pattern: Option<String>,
    methods: Option<OneOrMany<String>>,
}

/// Prefixes a config error's message with where it was found.
fn in_field(error: Error, what: &str) -> Error {
    match as_config_error(error) {
        Error::InvalidConfig(message) => Error::InvalidConfig(format!("{what}: {message}")),
        other => other,
    }
}

/// The strings of an optional string-or-array.
fn strings(value: Option<OneOrMany<String>>) -> Vec<String> {
    value.map_or_else(Vec::new, |strings| strings.0)
}

impl RuleFields {
    /// The rule, checked; `what` names it in errors (`RULES[0]`).
    fn rule(self, what: &str) -> Result<Rule> {
        let key = self.key.map_or(KeySource::IP, |key| key.0);
        let list = |entries: Option<OneOrMany<String>>, name: &str| -> Result<Vec<ListEntry>> {
            (strings(entries).iter())
                .map(|entry| ListEntry::parse(entry, &key).map_err(|e| in_field(e, &format!("{what}.{name}"))))
                .collect()
        };
        let mut rule = Rule::new(&self.name, key.clone(), self.limits.0);
        rule.allow = list(self.allow, "allow")?;
        rule.deny = list(self.deny, "deny")?;
        if let Some(fields) = self.request_match {
            rule.request_match = RequestMatch::new(
                strings(fields.host),
                fields.path,
                fields.pattern,
                strings(fields.methods),
            )
            .map_err(|e| in_field(e, &format!("{what}.match")))?;
        }
        rule.dry_run = self.dry_run.is_some_and(|flag| flag.0);
        if let Some(policy) = self.on_error {
            rule.on_error = policy.0;
        }
        rule.timeout = self.timeout.map(|timeout| timeout.0);
        rule.reserve = self.reserve.map(|length| length.0);
        Ok(rule)
    }
}

/// `RULES`: a JSON array of rules as a string (a `[vars]` string), or the array itself (a `[vars]` table).
fn rules(value: &JsValue) -> Result<Vec<Rule>> {
    let parsed = match value.as_string() {
        Some(text) => js_sys::JSON::parse(&text).map_err(|e| {
            let reason = js_sys::Error::from(e).message();
            Error::InvalidConfig(format!("RULES is not valid JSON: {reason}"))
        })?,
        None => value.clone(),
    };
    if !is_array(&parsed).unwrap_or(false) {
        return Err(Error::InvalidConfig(
            "RULES must be a JSON array of rules, like [{\"name\": \"site\", \"limits\": [{\"algorithm\": \
             \"slidingLog\", \"limit\": 5, \"interval\": \"10 s\"}]}]"
                .into(),
        ));
    }
    let rules = (read::<Vec<RuleFields>>(&parsed, "RULES")?.into_iter().enumerate())
        .map(|(i, rule)| rule.rule(&format!("RULES[{i}]")))
        .collect::<Result<Vec<_>>>()?;
    if rules.is_empty() {
        // A Worker with no rule limits nothing: far more often RULES lost on the way than a wish.
        return Err(Error::InvalidConfig(
            "RULES is empty: every request would reach the origin unlimited; give at least one rule (a rule with \
             \"dryRun\": true limits nothing but counts)"
                .into(),
        ));
    }
    Ok(rules)
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
    let url: String = required(
        env,
        "EDGELIMIT_URL",
        "put the REST endpoint's URL in wrangler.toml [vars]",
    )?;
    let token: String = required(
        env,
        "EDGELIMIT_TOKEN",
        "store the endpoint's token as a secret (`wrangler secret put EDGELIMIT_TOKEN`, or .dev.vars locally)",
    )?;
    let rules = match field_of(env, "RULES")? {
        value if value.is_undefined() => {
            return Err(Error::InvalidConfig(
                "RULES is not set: add the rules to wrangler.toml [vars]".into(),
            ))
        }
        value => rules(&value)?,
    };
    let prefix: Option<String> = setting(env, "EDGELIMIT_PREFIX")?;
    let layout = setting::<Parsed<KeyLayout>>(env, "EDGELIMIT_LAYOUT")?.map_or_else(KeyLayout::default, |l| l.0);
    let client = RestClient::new(&url, &token)?;
    Gate::new(client, rules, prefix.as_deref().unwrap_or(DEFAULT_PREFIX), layout)
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
    #[serde(
        skip_serializing_if = "JsValue::is_undefined",
        serialize_with = "serde_wasm_bindgen::preserve::serialize"
    )]
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
