//! `RateLimiterCore`: the Redisson-layout handle on a named sliding log (`ratelimit.rateLimiter(name)`).

use std::time::Duration;

use serde::{Deserialize, Serialize};
use wasm_bindgen::prelude::*;

use super::de::{read, Count, Dur};
use super::values::{decision_object, permits, Milliseconds};
use super::{to_js, to_js_error};
use crate::error::Result;
use crate::redisson::{Mode, Rate, RedissonLimiter};
use crate::rest::RestClient;

/// How long `acquire` waits when the caller gives no timeout.
const DEFAULT_ACQUIRE_TIMEOUT_MS: u64 = 10_000;

/// The setters' options.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, expecting = "an object like { mode: \"perClient\" }")]
struct RateOptions {
    mode: Option<JsMode>,
    keep_alive: Option<Dur>,
}

/// [`Mode`] as JS spells it.
#[derive(Deserialize, Serialize)]
#[serde(rename_all = "camelCase", expecting = "\"overall\" or \"perClient\"")]
enum JsMode {
    Overall,
    PerClient,
}

/// `(rate, interval, {mode?, keepAlive?})` as the three setters take them. A misspelt option would be left out
/// unseen: it is refused.
fn rate_of(rate: &JsValue, interval: &JsValue, options: &JsValue) -> Result<(Rate, Mode)> {
    let permits = read::<Count>(rate, "rate")?.0 as u32;
    let mut rate = Rate::new(permits, read::<Dur>(interval, "interval")?.0)?;
    let options = read::<Option<RateOptions>>(options, "options")?;
    let (mode, keep_alive) = options.map_or((None, None), |options| (options.mode, options.keep_alive));
    if let Some(keep_alive) = keep_alive {
        rate = rate.with_keep_alive(keep_alive.0)?;
    }
    let mode = match mode {
        None | Some(JsMode::Overall) => Mode::Overall,
        Some(JsMode::PerClient) => Mode::PerClient,
    };
    Ok((rate, mode))
}

/// A handle's options: `{ clientId }`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, expecting = "an object like { clientId: \"worker-1\" }")]
struct HandleOptions {
    client_id: Option<String>,
}

/// What `getConfig` answers: times in ms, `keepAlive` `null` when none.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JsConfig {
    rate: f64,
    interval: f64,
    mode: JsMode,
    keep_alive: Option<f64>,
}

/// A handle on one named sliding log.
#[wasm_bindgen(js_name = RateLimiterCore)]
pub struct JsRedissonLimiter {
    inner: RedissonLimiter,
}

impl JsRedissonLimiter {
    /// `rateLimiter(name, options)`, `options` being `{ clientId }`: a misspelt `clientID` left out would share one
    /// per-client state among every client.
    pub(super) fn new(client: RestClient, name: &JsValue, options: &JsValue) -> Result<JsRedissonLimiter> {
        let mut inner = RedissonLimiter::new(client, &read::<String>(name, "limiter name")?)?;
        let options = read::<Option<HandleOptions>>(options, "options")?;
        if let Some(client_id) = options.and_then(|options| options.client_id) {
            inner = inner.with_client_id(&client_id);
        }
        Ok(JsRedissonLimiter { inner })
    }
}

#[wasm_bindgen(js_class = RateLimiterCore)]
impl JsRedissonLimiter {
    /// Sets the rate only if none is set; resolves to whether this call set it.
    #[wasm_bindgen(js_name = trySetRate)]
    pub async fn try_set_rate(&self, rate: JsValue, interval: JsValue, options: JsValue) -> Result<bool, JsValue> {
        let (rate, mode) = rate_of(&rate, &interval, &options).map_err(to_js_error)?;
        self.inner.try_set_rate(rate, mode).await.map_err(to_js_error)
    }

    /// Sets the rate and clears the state.
    #[wasm_bindgen(js_name = setRate)]
    pub async fn set_rate(&self, rate: JsValue, interval: JsValue, options: JsValue) -> Result<(), JsValue> {
        let (rate, mode) = rate_of(&rate, &interval, &options).map_err(to_js_error)?;
        self.inner.set_rate(rate, mode).await.map_err(to_js_error)
    }

    /// Changes the rate of an existing limiter and keeps the state; resolves to `false` (writing nothing) when no
    /// rate is set.
    #[wasm_bindgen(js_name = updateRate)]
    pub async fn update_rate(&self, rate: JsValue, interval: JsValue, options: JsValue) -> Result<bool, JsValue> {
        let (rate, mode) = rate_of(&rate, &interval, &options).map_err(to_js_error)?;
        self.inner.update_rate(rate, mode).await.map_err(to_js_error)
    }

    /// Takes `permits` (default 1) now if available: a decision object.
    #[wasm_bindgen(js_name = tryAcquire)]
    pub async fn try_acquire(&self, permits_wanted: JsValue) -> Result<JsValue, JsValue> {
        let permits = permits(&permits_wanted).map_err(to_js_error)?;
        let decision = self.inner.try_acquire(permits).await.map_err(to_js_error)?;
        Ok(decision_object(&decision))
    }

    /// Takes `permits` (default 1), waiting up to `timeout_ms` (default 10 000).
    pub async fn acquire(&self, permits_wanted: JsValue, timeout_ms: JsValue) -> Result<JsValue, JsValue> {
        let permits = permits(&permits_wanted).map_err(to_js_error)?;
        let timeout = read::<Option<Milliseconds>>(&timeout_ms, "timeout").map_err(to_js_error)?;
        let timeout = timeout.map_or(Duration::from_millis(DEFAULT_ACQUIRE_TIMEOUT_MS), |ms| ms.0);
        let decision = self.inner.acquire(permits, timeout).await.map_err(to_js_error)?;
        Ok(decision_object(&decision))
    }

    /// Permits available now.
    #[wasm_bindgen(js_name = availablePermits)]
    pub async fn available_permits(&self) -> Result<f64, JsValue> {
        let available = self.inner.available_permits().await.map_err(to_js_error)?;
        Ok(available as f64)
    }

    /// Gives back up to `permits`; resolves to how many were given back. 0 is a no-op, as Redisson's.
    pub async fn release(&self, permits_given: JsValue) -> Result<f64, JsValue> {
        if permits_given.as_f64() == Some(0.0) {
            return Ok(0.0);
        }
        let permits = permits(&permits_given).map_err(to_js_error)?;
        let released = self.inner.release(permits).await.map_err(to_js_error)?;
        Ok(released as f64)
    }

    /// `{rate, interval (ms), mode, keepAlive (ms or null)}`, or `null` when no rate is set.
    #[wasm_bindgen(js_name = getConfig)]
    pub async fn get_config(&self) -> Result<JsValue, JsValue> {
        let Some(config) = self.inner.config().await.map_err(to_js_error)? else {
            return Ok(JsValue::NULL);
        };
        let ms = |d: Duration| d.as_millis() as f64;
        Ok(to_js(&JsConfig {
            rate: config.rate.permits().into(),
            interval: ms(config.rate.interval()),
            mode: match config.mode {
                Mode::Overall => JsMode::Overall,
                Mode::PerClient => JsMode::PerClient,
            },
            keep_alive: config.rate.keep_alive().map(ms),
        }))
    }

    /// Deletes the limiter; resolves to whether it existed.
    pub async fn delete(&self) -> Result<bool, JsValue> {
        self.inner.delete().await.map_err(to_js_error)
    }
}
