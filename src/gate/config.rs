//! The Worker's configuration: `RULES`, `EDGELIMIT_PREFIX` and `EDGELIMIT_LAYOUT` as JSON, read into a [`Gate`]
//! with the messages the Worker starts with. The Worker (src/wasm/gate.rs) and `edgelimit rules check` both read
//! them here, so a check offline says what the Worker would.

use serde::Deserialize;
use serde_json::Value as Json;

use super::{Gate, KeySource, ListEntry, RequestMatch, Rule};
use crate::error::{Error, Result};
use crate::limit::{KeyLayout, DEFAULT_PREFIX};
use crate::ratelimit::OnError;
use crate::reader::{as_config_error, read, Dur, Flag, Limits, OneOrMany, Parsed};
use crate::rest::RestClient;

/// The gate `vars` configure (a JSON object: the Worker's `env`, or wrangler.toml's `[vars]`), deciding through
/// the client `client` makes. Errors are [`Error::InvalidConfig`]s naming the setting and the field.
pub fn from_vars(vars: &Json, client: impl FnOnce() -> Result<RestClient>) -> Result<Gate> {
    let Some(rules) = vars.get("RULES") else {
        return Err(Error::InvalidConfig("RULES is not set: add the rules to wrangler.toml [vars]".into()));
    };
    let rules = self::rules(rules).map_err(as_config_error)?;
    let prefix: Option<String> = read(vars.get("EDGELIMIT_PREFIX"), "EDGELIMIT_PREFIX").map_err(as_config_error)?;
    let layout: Option<Parsed<KeyLayout>> =
        read(vars.get("EDGELIMIT_LAYOUT"), "EDGELIMIT_LAYOUT").map_err(as_config_error)?;
    let layout = layout.map_or_else(KeyLayout::default, |layout| layout.0);
    Gate::new(client()?, rules, prefix.as_deref().unwrap_or(DEFAULT_PREFIX), layout).map_err(as_config_error)
}

/// A rule as `RULES` gives it (README, "Rules").
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, expecting = "a rule like {\"name\": \"site\", \"limits\": […]}")]
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
            rule.request_match =
                RequestMatch::new(strings(fields.host), fields.path, fields.pattern, strings(fields.methods))
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
fn rules(value: &Json) -> Result<Vec<Rule>> {
    let parsed;
    let value = match value {
        Json::String(text) => {
            parsed = serde_json::from_str(text)
                .map_err(|e| Error::InvalidConfig(format!("RULES is not valid JSON: {e}")))?;
            &parsed
        }
        value => value,
    };
    if !value.is_array() {
        return Err(Error::InvalidConfig(
            "RULES must be a JSON array of rules, like [{\"name\": \"site\", \"limits\": [{\"algorithm\": \
             \"slidingLog\", \"limit\": 5, \"interval\": \"10 s\"}]}]"
                .into(),
        ));
    }
    let rules = (read::<Vec<RuleFields>>(Some(value), "RULES")?.into_iter().enumerate())
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
