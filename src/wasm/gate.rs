//! `GateCore`: the Cloudflare Worker's engine (see [`crate::gate`]). It reads the Worker's `env` with the same
//! checked readers as the package's options, so a broken rule is refused at start, naming the offending field.

use wasm_bindgen::prelude::*;

use super::limits::{as_config_error, limits_of};
use super::{describe, duration, field, given, items, known_fields, object, string, to_js_error};
use crate::error::{Error, Result};
use crate::gate::{Admission, Gate, KeySource, ListEntry, RequestMatch, Route, Rule};
use crate::limit::{KeyLayout, DEFAULT_PREFIX};
use crate::rest::RestClient;

#[wasm_bindgen]
extern "C" {
    /// The Fetch API's `Headers` of the incoming request.
    pub type Headers;

    #[wasm_bindgen(method)]
    fn get(this: &Headers, name: &str) -> Option<String>;
}

/// The fields a rule may have: anything else is a typo to report, not to ignore.
const RULE_FIELDS: [&str; 10] = [
    "name", "match", "key", "limits", "allow", "deny", "dryRun", "onError", "timeout", "reserve",
];
const MATCH_FIELDS: [&str; 4] = ["host", "path", "pattern", "methods"];

/// A string, or an array of strings (`"GET"` or `["GET", "HEAD"]`); empty when absent.
fn strings(value: &JsValue, what: &str) -> Result<Vec<String>> {
    match given(value) {
        None => Ok(Vec::new()),
        Some(value) => match items(value, what)? {
            Some(items) => (items.iter().enumerate())
                .map(|(i, item)| string(item, &format!("{what}[{i}]")))
                .collect(),
            None => Ok(vec![string(value, what)?]),
        },
    }
}

fn optional_string(value: &JsValue, what: &str) -> Result<Option<String>> {
    given(value).map(|value| string(value, what)).transpose()
}

fn request_match(value: &JsValue, what: &str) -> Result<RequestMatch> {
    let Some(value) = given(value) else {
        return Ok(RequestMatch::default());
    };
    known_fields(value, &MATCH_FIELDS, what)?;
    RequestMatch::new(
        strings(&field(value, "host")?, &format!("{what}.host"))?,
        optional_string(&field(value, "path")?, &format!("{what}.path"))?,
        optional_string(&field(value, "pattern")?, &format!("{what}.pattern"))?,
        strings(&field(value, "methods")?, &format!("{what}.methods"))?,
    )
    .map_err(|e| in_field(e, what))
}

/// Prefixes a config error's message with where it was found.
fn in_field(error: Error, what: &str) -> Error {
    match as_config_error(error) {
        Error::InvalidConfig(message) => Error::InvalidConfig(format!("{what}: {message}")),
        other => other,
    }
}

fn rule(value: &JsValue, what: &str) -> Result<Rule> {
    known_fields(value, &RULE_FIELDS, what)?;
    let name = string(&field(value, "name")?, &format!("{what}.name"))?;
    let key: KeySource = match given(&field(value, "key")?) {
        None => KeySource::IP,
        Some(key) => string(key, &format!("{what}.key"))?
            .parse()
            .map_err(|e| in_field(e, &format!("{what}.key")))?,
    };
    let list = |name: &str| -> Result<Vec<ListEntry>> {
        let what = format!("{what}.{name}");
        strings(&field(value, name)?, &what)?
            .iter()
            .map(|entry| ListEntry::parse(entry, &key).map_err(|e| in_field(e, &what)))
            .collect()
    };
    let mut rule = Rule::new(
        &name,
        key.clone(),
        limits_of(&field(value, "limits")?, &format!("{what}.limits"))?,
    );
    rule.request_match = request_match(&field(value, "match")?, &format!("{what}.match"))?;
    rule.allow = list("allow")?;
    rule.deny = list("deny")?;
    if let Some(dry_run) = given(&field(value, "dryRun")?) {
        rule.dry_run = dry_run.as_bool().ok_or_else(|| {
            Error::InvalidConfig(format!(
                "{what}.dryRun must be true or false, got {}",
                describe(dry_run)
            ))
        })?;
    }
    if let Some(policy) = given(&field(value, "onError")?) {
        rule.on_error = string(policy, &format!("{what}.onError"))?
            .parse()
            .map_err(|e| in_field(e, what))?;
    }
    if let Some(timeout) = given(&field(value, "timeout")?) {
        rule.timeout = Some(duration(timeout, &format!("{what}.timeout"))?);
    }
    if let Some(length) = given(&field(value, "reserve")?) {
        rule.reserve = Some(duration(length, &format!("{what}.reserve"))?);
    }
    Ok(rule)
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
    let Some(items) = items(&parsed, "RULES")? else {
        return Err(Error::InvalidConfig(format!(
            "RULES must be a JSON array of rules, like [{{\"name\": \"site\", \"limits\": [{{\"algorithm\": \
             \"slidingLog\", \"limit\": 5, \"interval\": \"10 s\"}}]}}], got {}",
            describe(&parsed)
        )));
    };
    let rules: Vec<Rule> = (items.iter().enumerate())
        .map(|(i, item)| rule(item, &format!("RULES[{i}]")))
        .collect::<Result<_>>()?;
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

/// `env[name]`, or a config error saying how to set it.
fn setting(env: &JsValue, name: &str, hint: &str) -> Result<JsValue> {
    given(&field(env, name)?)
        .cloned()
        .ok_or_else(|| Error::InvalidConfig(format!("{name} is not set: {hint}")))
}

fn gate_of(env: &JsValue) -> Result<Gate> {
    let url = setting(
        env,
        "EDGELIMIT_URL",
        "put the REST endpoint's URL in wrangler.toml [vars]",
    )?;
    let token = setting(
        env,
        "EDGELIMIT_TOKEN",
        "store the endpoint's token as a secret (`wrangler secret put EDGELIMIT_TOKEN`, or .dev.vars locally)",
    )?;
    let rules = rules(&setting(env, "RULES", "add the rules to wrangler.toml [vars]")?)?;
    let prefix = optional_string(&field(env, "EDGELIMIT_PREFIX")?, "EDGELIMIT_PREFIX")?;
    let layout = match optional_string(&field(env, "EDGELIMIT_LAYOUT")?, "EDGELIMIT_LAYOUT")? {
        Some(layout) => layout.parse()?,
        None => KeyLayout::default(),
    };
    let client = RestClient::new(&string(&url, "EDGELIMIT_URL")?, &string(&token, "EDGELIMIT_TOKEN")?)?;
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

fn verdict_object(admission: Admission) -> JsValue {
    let headers: js_sys::Array = admission
        .headers
        .iter()
        .map(|(name, value)| js_sys::Array::of2(&name.into(), &value.into()))
        .collect();
    let mut properties = vec![
        ("allowed", admission.allowed.into()),
        ("reason", admission.reason.as_str().into()),
        ("status", admission.status.into()),
        ("headers", headers.into()),
    ];
    if let Some(body) = admission.body {
        properties.push(("body", body.into()));
    }
    if let Some(error) = admission.error {
        properties.push(("error", to_js_error(error)));
    }
    if let Some(rule) = admission.rule {
        properties.push(("rule", rule.into()));
    }
    object(&properties)
}
