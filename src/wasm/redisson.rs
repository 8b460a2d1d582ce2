//! `RateLimiterCore`: the Redisson-layout handle on a named sliding log (`ratelimit.rateLimiter(name)`).

use wasm_bindgen::prelude::*;

use super::values::{decision_object, milliseconds, number, permits};
use super::{duration, field, given, object, string, to_js_error};
use crate::error::{Error, Result};
use crate::redisson::{Mode, Rate, RedissonLimiter};
use crate::rest::RestClient;

/// How long `acquire` waits when the caller gives no timeout.
const DEFAULT_ACQUIRE_TIMEOUT_MS: u64 = 10_000;

/// `(rate, interval, {mode?, keepAlive?})` as the three setters take them.
fn rate_of(rate: &JsValue, interval: &JsValue, options: &JsValue) -> Result<(Rate, Mode)> {
    let permits = super::whole(rate, "rate", 1, u32::MAX.into())? as u32;
    let mut rate = Rate::new(permits, duration(interval, "interval")?)?;
    // `field` of absent options is `undefined`: every option left out. A misspelt one would be left out unseen.
    if given(options).is_some() {
        super::known_fields(options, &["mode", "keepAlive"], "options")?;
    }
    if let Some(keep_alive) = given(&field(options, "keepAlive")?) {
        rate = rate.with_keep_alive(duration(keep_alive, "keepAlive")?)?;
    }
    let mode = match given(&field(options, "mode")?) {
        None => Mode::Overall,
        Some(mode) => match mode.as_string().as_deref() {
            Some("overall") => Mode::Overall,
            Some("perClient") => Mode::PerClient,
            _ => {
                return Err(Error::InvalidArgument(format!(
                    "mode must be \"overall\" or \"perClient\", got {}",
                    super::describe(mode)
                )))
            }
        },
    };
    Ok((rate, mode))
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
        let mut inner = RedissonLimiter::new(client, &string(name, "limiter name")?)?;
        if given(options).is_some() {
            super::known_fields(options, &["clientId"], "options")?;
        }
        if let Some(client_id) = given(&field(options, "clientId")?) {
            inner = inner.with_client_id(&string(client_id, "clientId")?);
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
        let timeout = match given(&timeout_ms) {
            None => std::time::Duration::from_millis(DEFAULT_ACQUIRE_TIMEOUT_MS),
            Some(ms) => milliseconds(ms, "timeout").map_err(to_js_error)?,
        };
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
        let ms = |d: std::time::Duration| number(d.as_millis() as u64);
        let mode = match config.mode {
            Mode::Overall => "overall",
            Mode::PerClient => "perClient",
        };
        Ok(object(&[
            ("rate", config.rate.permits().into()),
            ("interval", ms(config.rate.interval())),
            ("mode", mode.into()),
            ("keepAlive", config.rate.keep_alive().map_or(JsValue::NULL, ms)),
        ]))
    }

    /// Deletes the limiter; resolves to whether it existed.
    pub async fn delete(&self) -> Result<bool, JsValue> {
        self.inner.delete().await.map_err(to_js_error)
    }
}
