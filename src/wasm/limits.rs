//! Limits as JS describes them (`{algorithm, limit, interval, rate?, name?}`, what the factories build): read by
//! the npm package's `Ratelimit` and by the Worker's rules alike.

use serde::Deserialize;

use super::de::{message_of, Count, Dur, OneOrMany, Parsed};
use crate::error::Error;
use crate::limit::{Algorithm, Quota};
use crate::ratelimit::Limit;

/// Options errors are the configuration's: report them as such.
pub(super) fn as_config_error(error: Error) -> Error {
    match error {
        Error::InvalidArgument(message) => Error::InvalidConfig(message),
        other => other,
    }
}

/// A limit as the factories (`Ratelimit.slidingWindow(10, "1 s")`, …) build it.
#[derive(Deserialize)]
#[serde(try_from = "LimitFields")]
struct JsLimit(Limit);

#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a limiter from a factory, like Ratelimit.slidingWindow(10, \"1 s\")"
)]
struct LimitFields {
    algorithm: Parsed<Algorithm>,
    limit: Count,
    interval: Dur,
    rate: Option<Count>,
    name: Option<String>,
}

impl TryFrom<LimitFields> for JsLimit {
    type Error = String;

    fn try_from(fields: LimitFields) -> Result<JsLimit, String> {
        let (algorithm, limit) = (fields.algorithm.0, fields.limit.0 as u32);
        let rate = match fields.rate {
            None => limit,
            // A rate where the algorithm has none would be ignored: the limit would not be the one meant.
            Some(_) if !matches!(algorithm, Algorithm::TokenBucket | Algorithm::Gcra) => {
                return Err(format!(
                    ".rate: a {algorithm} limit has no rate (only tokenBucket and gcra refill at one): it allows \
                     `limit` per `interval`; leave rate out"
                ))
            }
            Some(rate) => rate.0 as u32,
        };
        let quota = Quota::new(algorithm, limit, fields.interval.0, rate).map_err(message_of)?;
        Ok(JsLimit(Limit {
            quota,
            name: fields.name,
        }))
    }
}

/// One limit, or an array of them.
#[derive(Deserialize)]
#[serde(from = "OneOrMany<JsLimit>")]
pub(super) struct Limits(pub Vec<Limit>);

impl From<OneOrMany<JsLimit>> for Limits {
    fn from(limits: OneOrMany<JsLimit>) -> Limits {
        Limits(limits.0.into_iter().map(|limit| limit.0).collect())
    }
}
