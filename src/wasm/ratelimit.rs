//! `RatelimitCore`: the JS `Ratelimit` class's engine. It reads the user's options itself, so every check and
//! message is the same wherever the package runs, and answers plain JS objects.

use wasm_bindgen::prelude::*;

use super::limits::{as_config_error, limits_of};
use super::redisson::JsRedissonLimiter;
use super::values::{self, decision_object, milliseconds, number, permits_in};
use super::{describe, duration, field, given, items, known_fields, object, string, to_js_error, whole};
use crate::error::{Error, Result};
use crate::identifier::Identifier;
use crate::limit::{LimitState, Receipt, StateDetail};
use crate::ratelimit::{OnError, Options, Outcome, Ratelimit, Returned};
use crate::rest::RestClient;

/// `cache`: `true`/absent (10 000 entries), `false`/`0` (off), or a number of entries.
fn cache_entries(value: &JsValue) -> Result<usize> {
    match value.as_bool() {
        Some(true) => Ok(Options::default().cache_entries),
        Some(false) => Ok(0),
        None if value.is_undefined() => Ok(Options::default().cache_entries),
        None => whole(value, "cache (entries)", 0, 10_000_000).map(|n| n as usize),
    }
}

/// The options of `new Ratelimit(options)` (index.d.ts, `RatelimitConfig`): any other is refused.
const RATELIMIT_OPTIONS: [&str; 10] = [
    "url", "token", "limiter", "prefix", "layout", "timeout", "coalesce", "reserve", "onError", "cache",
];

fn ratelimit_of(options: &JsValue) -> Result<Ratelimit> {
    if !options.is_object() {
        return Err(Error::InvalidArgument(
            "new Ratelimit(options) needs an object: { url, token, limiter: Ratelimit.slidingWindow(10, \"1 s\") }"
                .into(),
        ));
    }
    // A misspelt option would otherwise be left out unseen: `onerror: "deny"` would fail open.
    known_fields(options, &RATELIMIT_OPTIONS, "new Ratelimit(options)")?;
    let url = string(&field(options, "url")?, "url")?;
    let token = string(&field(options, "token")?, "token")?;
    // Without a timeout option the client keeps its default (rest::DEFAULT_TIMEOUT).
    let mut client = RestClient::new(&url, &token)?;
    if let Some(timeout) = given(&field(options, "timeout")?) {
        client = client.with_timeout(milliseconds(timeout, "timeout")?)?;
    }
    if let Some(coalesce) = given(&field(options, "coalesce")?) {
        let coalesce = coalesce.as_bool().ok_or_else(|| {
            Error::InvalidArgument(format!("coalesce must be true or false, got {}", describe(coalesce)))
        })?;
        if !coalesce {
            client = client.without_coalescing();
        }
    }
    let limits = limits_of(&field(options, "limiter")?, "limiter")?;
    let mut settings = Options {
        cache_entries: cache_entries(&field(options, "cache")?)?,
        ..Options::default()
    };
    if let Some(prefix) = given(&field(options, "prefix")?) {
        settings.prefix = string(prefix, "prefix")?;
    }
    if let Some(layout) = given(&field(options, "layout")?) {
        settings.layout = string(layout, "layout")?.parse()?;
    }
    if let Some(length) = given(&field(options, "reserve")?) {
        settings.reserve = Some(duration(length, "reserve")?);
    }
    if let Some(policy) = given(&field(options, "onError")?) {
        settings.on_error = string(policy, "onError")?.parse::<OnError>()?;
    }
    Ratelimit::new(client, &limits, settings)
}

/// An outcome as JS sees it: the decision, `reason`, each limit's own decision in `results`, and the absorbed
/// `error` when the failure policy decided.
fn outcome_object(outcome: Outcome) -> JsValue {
    let results: js_sys::Array = outcome.limits.iter().map(decision_object).collect();
    let error = outcome.error.map_or(JsValue::UNDEFINED, to_js_error);
    values::outcome_object(&outcome.decision, outcome.reason.as_str(), results, error)
}

/// A limit's state as JS sees it: the limit, the key and the moment, then the algorithm's own fields (see
/// `LimitState` in index.d.ts).
fn state_object(state: &LimitState) -> JsValue {
    let quota = &state.quota;
    let optional = |value: Option<JsValue>| value.unwrap_or(JsValue::NULL);
    let mut properties = vec![
        ("name", JsValue::from(state.name.as_str())),
        ("algorithm", quota.algorithm().script_name().into()),
        ("limit", number(quota.limit().into())),
        ("interval", number(quota.interval_ms())),
        ("rate", number(quota.rate().into())),
        ("key", state.key.as_str().into()),
        ("now", number(state.now)),
        ("expiresAt", optional(state.expires_at.map(number))),
        ("stored", optional(state.stored.as_deref().map(JsValue::from))),
    ];
    let window = |start: u64| {
        [
            ("windowStart", number(start)),
            ("windowEnd", number(start.saturating_add(quota.interval_ms()))),
        ]
    };
    match &state.detail {
        StateDetail::Log { held, grants } => {
            let grants: js_sys::Array = grants
                .iter()
                .map(|grant| {
                    object(&[
                        ("id", grant.id.as_str().into()),
                        ("permits", number(grant.permits.into())),
                        ("freesAt", number(grant.frees_at)),
                    ])
                })
                .collect();
            properties.extend([("held", number(*held)), ("grants", grants.into())]);
        }
        StateDetail::FixedWindow { window_start, count } => {
            properties.extend(window(*window_start));
            properties.push(("count", number(*count)));
        }
        detail @ StateDetail::SlidingWindow {
            window_start,
            current,
            previous,
        } => {
            properties.extend(window(*window_start));
            let weighted = detail.weighted_count(quota, state.now).unwrap_or_default();
            properties.extend([
                ("current", number(*current)),
                ("previous", number(*previous)),
                ("weightedCount", weighted.into()),
            ]);
        }
        StateDetail::TokenBucket { tokens } => properties.push(("tokens", (*tokens).into())),
        StateDetail::Gcra { tat, tokens } => properties.extend([("tat", (*tat).into()), ("tokens", (*tokens).into())]),
    }
    object(&properties)
}

impl JsRatelimit {
    async fn give_back(
        &self,
        id: JsValue,
        receipts: JsValue,
        limiters: JsValue,
        returned: Returned,
    ) -> Result<JsValue, JsValue> {
        let id = identifier(&id).map_err(to_js_error)?;
        let receipts = receipts_of(&receipts).map_err(to_js_error)?;
        let limits = (given(&limiters).map(|limiters| limits_of(limiters, "limiters")))
            .transpose()
            .map_err(to_js_error)?;
        let decisions = (self.inner)
            .give_back(&id, limits.as_deref(), &receipts, returned)
            .await
            .map_err(to_js_error)?;
        let results: js_sys::Array = decisions.iter().map(decision_object).collect();
        Ok(object(&[
            ("success", decisions.iter().all(|decision| decision.success).into()),
            ("results", results.into()),
        ]))
    }
}

/// A grant's receipts: the response's `receipt` (a string: one limit), or one per limit in order (an array of its
/// `results[i].receipt`).
fn receipts_of(value: &JsValue) -> Result<Vec<Receipt>> {
    let what = "receipt (the string a grant's result carries, or an array of them, one per limit)";
    match items(value, what)? {
        Some(items) => items.iter().map(|item| string(item, what)?.parse()).collect(),
        None => Ok(vec![string(value, what)?.parse()?]),
    }
}

/// An identifier from JS, exactly: as the string's UTF-16 code units, so `"\uD800"`, `"\uDC00"` and `"\uFFFD"` are
/// three identifiers (see [`Identifier::from_utf16`]). Anything but a string is refused before any I/O.
fn identifier(id: &JsValue) -> Result<Identifier<'static>> {
    match id.dyn_ref::<js_sys::JsString>() {
        Some(text) => Ok(match text.as_string() {
            // The common case in one conversion: it turns a lone surrogate into U+FFFD, so a result without U+FFFD is
            // exact.
            Some(converted) if !converted.contains('\u{FFFD}') => Identifier::from(converted.as_str()).into_owned(),
            _ => Identifier::from_utf16(&text.iter().collect::<Vec<u16>>()),
        }),
        None => Err(Error::InvalidArgument(format!(
            "identifier must be a string, got {}",
            super::describe(id)
        ))),
    }
}

/// The engine of the JS `Ratelimit` class.
#[wasm_bindgen(js_name = RatelimitCore)]
pub struct JsRatelimit {
    inner: Ratelimit,
}

#[wasm_bindgen(js_class = RatelimitCore)]
impl JsRatelimit {
    /// `new RatelimitCore(options)`: see the `RatelimitConfig` type of the package.
    #[wasm_bindgen(constructor)]
    pub fn new(options: JsValue) -> Result<JsRatelimit, JsValue> {
        let inner = ratelimit_of(&options).map_err(as_config_error).map_err(to_js_error)?;
        Ok(JsRatelimit { inner })
    }

    /// Takes `options.permits` (default 1) for `id` under every limit.
    pub async fn limit(&self, id: JsValue, options: JsValue) -> Result<JsValue, JsValue> {
        let id = identifier(&id).map_err(to_js_error)?;
        let permits = permits_in(&options).map_err(to_js_error)?;
        Ok(outcome_object(
            self.inner.limit(&id, permits).await.map_err(to_js_error)?,
        ))
    }

    /// Takes `permits` for `id` under `limiters` (an array of factory results), all or nothing, in one round trip.
    #[wasm_bindgen(js_name = limitAll)]
    pub async fn limit_all(&self, id: JsValue, limiters: JsValue, options: JsValue) -> Result<JsValue, JsValue> {
        let id = identifier(&id).map_err(to_js_error)?;
        let limits = limits_of(&limiters, "limiters").map_err(to_js_error)?;
        let permits = permits_in(&options).map_err(to_js_error)?;
        let outcome = self.inner.limit_all(&id, &limits, permits).await.map_err(to_js_error)?;
        Ok(outcome_object(outcome))
    }

    /// Takes `permits` for `id`, waiting up to `timeout_ms`.
    #[wasm_bindgen(js_name = blockUntilReady)]
    pub async fn block_until_ready(
        &self,
        id: JsValue,
        timeout_ms: JsValue,
        options: JsValue,
    ) -> Result<JsValue, JsValue> {
        let id = identifier(&id).map_err(to_js_error)?;
        let timeout = milliseconds(&timeout_ms, "timeout").map_err(to_js_error)?;
        let permits = permits_in(&options).map_err(to_js_error)?;
        let outcome = self.inner.block_until_ready(&id, permits, timeout).await;
        Ok(outcome_object(outcome.map_err(to_js_error)?))
    }

    /// Gives back a grant by its receipts, under this limiter's limits or `limiters` (those `limitAll` was given):
    /// `{success, results}`, `results` being each limit's standing after its refund.
    pub async fn refund(&self, id: JsValue, receipts: JsValue, limiters: JsValue) -> Result<JsValue, JsValue> {
        self.give_back(id, receipts, limiters, Returned::Grant).await
    }

    /// Ends a grant's leases, as `refund` takes it: only its concurrency limits give back (see
    /// `Ratelimit::release`); `results` are theirs.
    pub async fn release(&self, id: JsValue, receipts: JsValue, limiters: JsValue) -> Result<JsValue, JsValue> {
        self.give_back(id, receipts, limiters, Returned::Leases).await
    }

    /// `{remaining, reset, limit}` for `id` now, taking nothing.
    #[wasm_bindgen(js_name = getRemaining)]
    pub async fn get_remaining(&self, id: JsValue) -> Result<JsValue, JsValue> {
        let id = identifier(&id).map_err(to_js_error)?;
        let decision = self.inner.remaining(&id).await.map_err(to_js_error)?;
        Ok(object(&[
            ("remaining", number(decision.remaining)),
            ("reset", number(decision.reset)),
            ("limit", number(decision.limit)),
        ]))
    }

    /// `id`'s state under every limit, read from Redis at one moment, writing nothing.
    pub async fn state(&self, id: JsValue) -> Result<js_sys::Array, JsValue> {
        let id = identifier(&id).map_err(to_js_error)?;
        let states = self.inner.state(&id).await.map_err(to_js_error)?;
        Ok(states.iter().map(state_object).collect())
    }

    /// Forgets `id`'s state and cached denials; resolves to whether there was state.
    pub async fn reset(&self, id: JsValue) -> Result<bool, JsValue> {
        let id = identifier(&id).map_err(to_js_error)?;
        self.inner.reset(&id).await.map_err(to_js_error)
    }

    /// The Redisson-style handle on the sliding log `name`, through the same endpoint.
    #[wasm_bindgen(js_name = rateLimiter)]
    pub fn rate_limiter(&self, name: JsValue, options: JsValue) -> Result<JsRedissonLimiter, JsValue> {
        JsRedissonLimiter::new(self.inner.client().clone(), &name, &options).map_err(to_js_error)
    }
}
