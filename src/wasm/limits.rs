//! Limits as JS describes them (`{algorithm, limit, interval, rate?, name?}`, what the factories build): read by
//! the npm package's `Ratelimit` and by the Worker's rules alike.

use wasm_bindgen::prelude::*;

use super::{describe, duration, field, given, items, known_fields, string, whole};
use crate::error::{Error, Result};
use crate::limit::{Algorithm, Quota};
use crate::ratelimit::Limit;

/// Options errors are the configuration's: report them as such.
pub(super) fn as_config_error(error: Error) -> Error {
    match error {
        Error::InvalidArgument(message) => Error::InvalidConfig(message),
        other => other,
    }
}

/// The fields of a limit (a factory's, and the Worker's rules'): any other is refused.
const LIMIT_FIELDS: [&str; 5] = ["algorithm", "limit", "interval", "rate", "name"];

/// A limit as the factories (`Ratelimit.slidingWindow(10, "1 s")`, …) build it:
/// `{algorithm, limit, interval, rate?, name?}`.
fn limit_of(value: &JsValue, what: &str) -> Result<Limit> {
    if !value.is_object() {
        return Err(Error::InvalidArgument(format!(
            "{what} must be a limiter from a factory, like Ratelimit.slidingWindow(10, \"1 s\"), got {}",
            describe(value)
        )));
    }
    known_fields(value, &LIMIT_FIELDS, what)?;
    let algorithm: Algorithm = string(&field(value, "algorithm")?, &format!("{what}.algorithm"))?.parse()?;
    let limit = whole(&field(value, "limit")?, &format!("{what}.limit"), 1, u32::MAX.into())? as u32;
    let interval = duration(&field(value, "interval")?, &format!("{what}.interval"))?;
    let rate = match given(&field(value, "rate")?) {
        None => limit,
        // A rate where the algorithm has none would be ignored: the limit would not be the one meant.
        Some(_) if !matches!(algorithm, Algorithm::TokenBucket | Algorithm::Gcra) => {
            return Err(Error::InvalidConfig(format!(
                "{what}.rate: a {algorithm} limit has no rate (only tokenBucket and gcra refill at one): it allows \
                 `limit` per `interval`; leave rate out"
            )))
        }
        Some(rate) => whole(rate, &format!("{what}.rate"), 1, u32::MAX.into())? as u32,
    };
    let name = given(&field(value, "name")?)
        .map(|name| string(name, &format!("{what}.name")))
        .transpose()?;
    Ok(Limit {
        quota: Quota::new(algorithm, limit, interval, rate)?,
        name,
    })
}

/// One limit, or an array of them.
pub(super) fn limits_of(value: &JsValue, what: &str) -> Result<Vec<Limit>> {
    match items(value, what)? {
        Some(items) => (items.iter().enumerate())
            .map(|(i, item)| limit_of(item, &format!("{what}[{i}]")))
            .collect(),
        None => Ok(vec![limit_of(value, what)?]),
    }
}
