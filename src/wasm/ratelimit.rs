//! `RatelimitCore`: the JS `Ratelimit` class's engine. It reads the user's options itself, so every check and
//! message is the same wherever the package runs, and answers plain JS objects.

use std::fmt::Formatter;

use serde::de::{self, Visitor};
use serde::{Deserialize, Serialize};
use wasm_bindgen::prelude::*;

use super::de::{field_of, read, refuse};
use super::redisson::JsRedissonLimiter;
use super::values::{milliseconds, permits_in, JsDecision, Milliseconds};
use super::{to_js, to_js_error};
use crate::decision::Decision;
use crate::error::{Error, Result};
use crate::identifier::Identifier;
use crate::limit::{Clock, KeyLayout, LimitState, Memory, Receipt, StateDetail};
use crate::ratelimit::{Insurance, OnError, Options, Outcome, Ratelimit, Returned};
use crate::reader::{as_config_error, Dur, Flag, Limits, OneOrMany, Parsed, MAX_SAFE_INTEGER};
use crate::rest::RestClient;

/// The options of `new Ratelimit(options)` (index.d.ts, `RatelimitConfig`).
#[derive(Deserialize)]
#[serde(
    rename_all = "camelCase",
    deny_unknown_fields,
    expecting = "an object: { url, token, limiter: Ratelimit.slidingWindow(10, \"1 s\") }"
)]
struct RatelimitOptions {
    url: Option<String>,
    token: Option<String>,
    /// `true`: the memory backend ([`Ratelimit::in_memory`]).
    memory: Option<Flag>,
    /// The memory backend's clock, taken from the object itself.
    clock: Option<ReadApart>,
    limiter: Limits,
    prefix: Option<String>,
    layout: Option<Parsed<KeyLayout>>,
    /// ms; without it the client keeps its default (rest::DEFAULT_TIMEOUT).
    timeout: Option<Milliseconds>,
    coalesce: Option<Flag>,
    reserve: Option<Dur>,
    /// A string or an object: read apart ([`on_error_of`]).
    on_error: Option<ReadApart>,
    cache: Option<Cache>,
}

/// A value present, read apart from the options: the reader cannot tell a string from an object in one type.
struct ReadApart;

impl<'de> Deserialize<'de> for ReadApart {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Present;
        impl<'de> Visitor<'de> for Present {
            type Value = ReadApart;
            fn expecting(&self, f: &mut Formatter<'_>) -> std::fmt::Result {
                f.write_str("any value")
            }
            fn visit_newtype_struct<D: de::Deserializer<'de>>(self, _: D) -> Result<ReadApart, D::Error> {
                Ok(ReadApart)
            }
        }
        deserializer.deserialize_newtype_struct("ReadApart", Present)
    }
}

/// What `onError` must be, for messages.
const ON_ERROR: &str = "\"allow\", \"deny\", \"throw\" or { insurance: a limiter, an array of them, or \"same\" }";

/// `onError: { insurance }`, its one field.
#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "\"allow\", \"deny\", \"throw\" or { insurance: a limiter, an array of them, or \"same\" }"
)]
struct InsuranceField {
    #[allow(dead_code)]
    insurance: ReadApart,
}

/// `options.onError`: a policy's name, or `{ insurance: <limiter | limiter[] | "same"> }`.
fn on_error_of(given: &JsValue) -> Result<OnError> {
    let value = field_of(given, "onError")?;
    if let Some(text) = value.as_string() {
        let shown: String = text.chars().take(200).collect();
        return (text.parse())
            .map_err(|_| Error::InvalidConfig(format!("onError must be {ON_ERROR}, got the string {shown:?}")));
    }
    read::<InsuranceField>(&value, "onError")?;
    let insurance = field_of(&value, "insurance")?;
    let stated = |got: String| {
        Error::InvalidConfig(format!(
            "onError.insurance must be \"same\" (the limiter's own limits), a limiter from a factory, e.g. \
             Ratelimit.slidingWindow(25, \"1 m\"), or an array of them, got {got}"
        ))
    };
    if let Some(text) = insurance.as_string() {
        return match text.as_str() {
            "same" => Ok(OnError::Insurance(Insurance::Same)),
            _ => Err(stated(format!("the string {:?}", text.chars().take(200).collect::<String>()))),
        };
    }
    if !insurance.is_object() {
        return Err(stated(super::printed(&insurance)));
    }
    // The reader names a field inside one limiter by its path alone (`interval`): say whose it is.
    let Limits(limits) = read(&insurance, "onError.insurance").map_err(|error| match error {
        Error::InvalidArgument(message) | Error::InvalidConfig(message) if !message.starts_with("onError") => {
            Error::InvalidConfig(format!("onError.insurance.{message}"))
        }
        other => other,
    })?;
    Ok(OnError::Insurance(Insurance::Limits(limits)))
}

/// `cache`: `true` (10 000 entries), `false` (off), or a number of entries.
enum Cache {
    On(bool),
    Entries(u64),
}

impl<'de> Deserialize<'de> for Cache {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Entries;
        impl Visitor<'_> for Entries {
            type Value = Cache;
            fn expecting(&self, f: &mut Formatter<'_>) -> std::fmt::Result {
                f.write_str("true, false or a whole number of entries from 0 to 10000000")
            }
            fn visit_bool<E: de::Error>(self, on: bool) -> Result<Cache, E> {
                Ok(Cache::On(on))
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Cache, E> {
                match n <= 10_000_000 {
                    true => Ok(Cache::Entries(n)),
                    false => Err(E::invalid_value(de::Unexpected::Unsigned(n), &self)),
                }
            }
        }
        deserializer.deserialize_any(Entries)
    }
}

fn ratelimit_of(options: &JsValue) -> Result<Ratelimit> {
    // A misspelt option is refused, never left out unseen: `onerror: "deny"` would fail open.
    let given = options;
    let options: RatelimitOptions = read(given, "new Ratelimit(options)")?;
    if options.memory.as_ref().is_some_and(|memory| memory.0) {
        return memory_ratelimit(given, options);
    }
    if options.clock.is_some() {
        return Err(Error::InvalidConfig(
            "clock is for memory: true; Redis decides on its server's clock: leave clock out, or give memory: true \
             instead of url and token"
                .into(),
        ));
    }
    let required = |field: Option<String>, name: &str| {
        field.ok_or_else(|| {
            Error::InvalidConfig(format!(
                "{name} must be a string: give url and token of the REST endpoint, or memory: true to decide in this \
                 process (tests, one process)"
            ))
        })
    };
    let mut client = RestClient::new(&required(options.url, "url")?, &required(options.token, "token")?)?;
    if let Some(timeout) = options.timeout {
        client = client.with_timeout(timeout.0)?;
    }
    if options.coalesce.is_some_and(|coalesce| !coalesce.0) {
        client = client.without_coalescing();
    }
    let defaults = Options::default();
    let settings = Options {
        prefix: options.prefix.unwrap_or(defaults.prefix),
        layout: options.layout.map_or(defaults.layout, |layout| layout.0),
        on_error: match options.on_error {
            None => defaults.on_error,
            Some(ReadApart) => on_error_of(given)?,
        },
        cache_entries: match options.cache {
            None | Some(Cache::On(true)) => defaults.cache_entries,
            Some(Cache::On(false)) => 0,
            Some(Cache::Entries(entries)) => entries as usize,
        },
        reserve: options.reserve.map(|length| length.0),
    };
    Ratelimit::new(client, &options.limiter.0, settings)
}

/// `new Ratelimit({ memory: true, limiter, clock?, prefix? })`. The options for a store are refused, not ignored:
/// a test passing `onError: "deny"` must not believe it tests a failure policy.
fn memory_ratelimit(given: &JsValue, options: RatelimitOptions) -> Result<Ratelimit> {
    let for_a_store = [
        ("url", options.url.is_some()),
        ("token", options.token.is_some()),
        ("timeout", options.timeout.is_some()),
        ("coalesce", options.coalesce.is_some()),
        ("layout", options.layout.is_some()),
        ("reserve", options.reserve.is_some()),
        ("onError", options.on_error.is_some()),
        ("cache", options.cache.is_some()),
    ];
    if let Some((name, _)) = for_a_store.iter().find(|(_, set)| *set) {
        return Err(Error::InvalidConfig(format!(
            "{name} is for a Redis endpoint, and memory: true decides in this process: leave {name} out, or give url \
             and token instead of memory"
        )));
    }
    let memory = match options.clock {
        None => Memory::default(),
        Some(ReadApart) => {
            let clock = field_of(given, "clock")?;
            if !clock.is_function() {
                return Err(as_config_error(refuse(&clock, "clock", "a function, e.g. () => Date.now()")));
            }
            Memory::with_clock(js_clock(clock.unchecked_into()))
        }
    };
    let prefix = options.prefix.unwrap_or_else(|| Options::default().prefix);
    Ratelimit::in_memory(&options.limiter.0, memory, &prefix)
}

thread_local! {
    /// The JS clocks of memory backends, by id: a [`Clock`] is `Send`, which a JS function is not.
    static CLOCKS: std::cell::RefCell<std::collections::HashMap<u64, js_sys::Function>> = Default::default();
}

/// A JS clock's id in [`CLOCKS`]; dropped with its `Ratelimit`, it forgets the function.
struct ClockId(u64);

impl ClockId {
    /// The function; taken out, since the clock may itself make a Ratelimit with a clock.
    fn function(&self) -> Option<js_sys::Function> {
        CLOCKS.with(|clocks| clocks.borrow().get(&self.0).cloned())
    }
}

impl Drop for ClockId {
    fn drop(&mut self) {
        CLOCKS.with(|clocks| clocks.borrow_mut().remove(&self.0));
    }
}

/// A JS clock: its answer must be unix ms, a whole number from 0; anything else (or a throw) fails the decision.
fn js_clock(clock: js_sys::Function) -> Clock {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let id = ClockId(NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    CLOCKS.with(|clocks| clocks.borrow_mut().insert(id.0, clock));
    Box::new(move || {
        // A method of `id`, so that the closure owns it (not only the number in it) and the function lives as long.
        let time = (id.function())
            .ok_or_else(|| Error::InvalidConfig("the clock was dropped".into()))?
            .call0(&JsValue::UNDEFINED)
            .map_err(|thrown| Error::InvalidConfig(format!("the clock threw: {}", super::printed(&thrown))))?;
        match time.as_f64() {
            Some(ms) if ms >= 0.0 && ms.fract() == 0.0 && ms <= MAX_SAFE_INTEGER => Ok(ms as u64),
            _ => Err(Error::InvalidConfig(format!(
                "the clock must return unix ms, a whole number from 0 as Date.now() does, got {}",
                super::printed(&time)
            ))),
        }
    })
}

#[wasm_bindgen(module = "/src/wasm/objects.js")]
extern "C" {
    /// A decision as an object literal. `limit` builds one or more per call, and building them here, one call each,
    /// is what keeps the client's CPU per decision low (objects.js says why; bench/coalescing.mjs: serde-wasm-bindgen
    /// built outcomes at 0.84× the decisions/s at 64 in flight).
    #[wasm_bindgen(js_name = decision)]
    fn decision_literal(
        success: bool,
        limit: f64,
        remaining: f64,
        reset: f64,
        retry_after: f64,
        receipt: Option<String>,
    ) -> JsValue;

    #[wasm_bindgen(js_name = outcome)]
    #[allow(clippy::too_many_arguments)]
    fn outcome_literal(
        success: bool,
        limit: f64,
        remaining: f64,
        reset: f64,
        retry_after: f64,
        receipt: Option<String>,
        reason: &str,
        results: js_sys::Array,
        error: JsValue,
    ) -> JsValue;
}

/// A decision as an object literal (`objects.js`).
fn decision_object(decision: &Decision) -> JsValue {
    decision_literal(
        decision.success,
        decision.limit as f64,
        decision.remaining as f64,
        decision.reset as f64,
        decision.retry_after as f64,
        decision.receipt.map(|receipt| receipt.to_string()),
    )
}

/// An outcome as JS sees it: the decision, `reason`, each limit's own decision in `results`, and the absorbed
/// `error` when the failure policy decided.
fn outcome_object(outcome: Outcome) -> JsValue {
    let decision = &outcome.decision;
    outcome_literal(
        decision.success,
        decision.limit as f64,
        decision.remaining as f64,
        decision.reset as f64,
        decision.retry_after as f64,
        decision.receipt.map(|receipt| receipt.to_string()),
        outcome.reason.as_str(),
        outcome.limits.iter().map(decision_object).collect(),
        outcome.error.map_or(JsValue::UNDEFINED, to_js_error),
    )
}

/// A limit's state as JS sees it: the limit, the key and the moment, then the algorithm's own fields (see
/// `LimitState` in index.d.ts). Counts and times are JS numbers.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JsState<'a> {
    name: &'a str,
    algorithm: &'static str,
    limit: f64,
    interval: f64,
    rate: f64,
    key: &'a str,
    now: f64,
    expires_at: Option<f64>,
    stored: Option<&'a str>,
    #[serde(flatten)]
    detail: JsDetail<'a>,
}

#[derive(Serialize)]
#[serde(untagged, rename_all_fields = "camelCase")]
enum JsDetail<'a> {
    Log { held: f64, grants: Vec<JsGrant<'a>> },
    Window { window_start: f64, window_end: f64, count: f64 },
    Sliding { window_start: f64, window_end: f64, current: f64, previous: f64, weighted_count: f64 },
    Bucket { tokens: f64 },
    Gcra { tat: f64, tokens: f64 },
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JsGrant<'a> {
    id: &'a str,
    permits: f64,
    frees_at: f64,
}

fn state_object(state: &LimitState) -> JsValue {
    let quota = &state.quota;
    let end = |start: u64| start.saturating_add(quota.interval_ms()) as f64;
    let detail = match &state.detail {
        StateDetail::Log { held, grants } => JsDetail::Log {
            held: *held as f64,
            grants: (grants.iter())
                .map(|grant| JsGrant { id: &grant.id, permits: grant.permits.into(), frees_at: grant.frees_at as f64 })
                .collect(),
        },
        StateDetail::FixedWindow { window_start, count } => JsDetail::Window {
            window_start: *window_start as f64,
            window_end: end(*window_start),
            count: *count as f64,
        },
        detail @ StateDetail::SlidingWindow { window_start, current, previous } => JsDetail::Sliding {
            window_start: *window_start as f64,
            window_end: end(*window_start),
            current: *current as f64,
            previous: *previous as f64,
            weighted_count: detail.weighted_count(quota, state.now).unwrap_or_default(),
        },
        StateDetail::TokenBucket { tokens } => JsDetail::Bucket { tokens: *tokens },
        StateDetail::Gcra { tat, tokens } => JsDetail::Gcra { tat: *tat, tokens: *tokens },
    };
    to_js(&JsState {
        name: &state.name,
        algorithm: quota.algorithm().script_name(),
        limit: quota.limit().into(),
        interval: quota.interval_ms() as f64,
        rate: quota.rate().into(),
        key: &state.key,
        now: state.now as f64,
        expires_at: state.expires_at.map(|at| at as f64),
        stored: state.stored.as_deref(),
        detail,
    })
}

/// What `refund` and `release` answer: `{success, results}`.
#[derive(Serialize)]
struct GivenBack {
    success: bool,
    results: Vec<JsDecision>,
}

/// What `getRemaining` answers.
#[derive(Serialize)]
struct Remaining {
    remaining: f64,
    reset: f64,
    limit: f64,
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
        let receipts = read::<OneOrMany<Parsed<Receipt>>>(&receipts, RECEIPT).map_err(to_js_error)?;
        let receipts: Vec<Receipt> = receipts.0.into_iter().map(|receipt| receipt.0).collect();
        let limits = read::<Option<Limits>>(&limiters, "limiters").map_err(to_js_error)?;
        let decisions = (self.inner)
            .give_back(&id, limits.as_ref().map(|limits| &limits.0[..]), &receipts, returned)
            .await
            .map_err(to_js_error)?;
        Ok(to_js(&GivenBack {
            success: decisions.iter().all(|decision| decision.success),
            results: decisions.iter().map(JsDecision::from).collect(),
        }))
    }
}

/// A grant's receipts: the response's `receipt` (a string: one limit), or one per limit in order (an array of its
/// `results[i].receipt`).
const RECEIPT: &str = "receipt (the string a grant's result carries, or an array of them, one per limit)";

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
        None => Err(refuse(id, "identifier", "a string")),
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
        Ok(outcome_object(self.inner.limit(&id, permits).await.map_err(to_js_error)?))
    }

    /// Takes `permits` for `id` under `limiters` (an array of factory results), all or nothing, in one round trip.
    #[wasm_bindgen(js_name = limitAll)]
    pub async fn limit_all(&self, id: JsValue, limiters: JsValue, options: JsValue) -> Result<JsValue, JsValue> {
        let id = identifier(&id).map_err(to_js_error)?;
        let Limits(limits) = read(&limiters, "limiters").map_err(to_js_error)?;
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
        Ok(to_js(&Remaining {
            remaining: decision.remaining as f64,
            reset: decision.reset as f64,
            limit: decision.limit as f64,
        }))
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
        let client = self.inner.client().ok_or_else(|| {
            Error::InvalidArgument("rateLimiter shares a limit through Redis: give url and token, not memory".into())
        });
        JsRedissonLimiter::new(client.map_err(to_js_error)?.clone(), &name, &options).map_err(to_js_error)
    }
}
