//! A limit's state as Redis holds it, decoded: what the playground draws (through the npm package's `state`).
//!
//! One script (`inspect`) reads the server's clock and every key atomically, writing nothing, so several limits are
//! read at one moment. Values are decoded by checked parsers (an unknown layout is [`Error::MalformedReply`]) and
//! shown as the next decision would see them.

use super::model::stored::{self, StoredView};
use super::quota::{Algorithm, Quota};
use super::Limiter;
use crate::error::{Error, Result};
use crate::identifier::Identifier;
use crate::lua::INSPECT;
use crate::value::Value;

/// At most this many grants are listed for a log ([`StateDetail::Log`] still counts every permit held).
pub const LISTED_GRANTS: u32 = 1000;

/// One identifier's state under one limit, at one moment of the Redis server's clock.
#[derive(Debug, Clone, PartialEq)]
pub struct LimitState {
    /// The limit's name.
    pub name: String,
    /// The quota the state was read under.
    pub quota: Quota,
    /// The state key.
    pub key: String,
    /// The moment read: unix ms on the Redis server's clock (or the limiter's explicit time).
    pub now: u64,
    /// Unix ms when the key expires (`now` plus `PTTL`, to within a millisecond); `None` when there is no key or it
    /// never expires.
    pub expires_at: Option<u64>,
    /// The key's value as stored, for the algorithms that keep a string; `None` for a permit log or no key.
    pub stored: Option<String>,
    /// The state, decoded and brought to `now`.
    pub detail: StateDetail,
}

/// What a limit holds, by algorithm, as the next decision at `now` would see it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum StateDetail {
    /// Sliding log and concurrency: permits held, and the soonest-freeing grants among them (up to
    /// [`LISTED_GRANTS`] grants).
    Log {
        /// Permits held at `now`.
        held: u64,
        /// Grants holding them, soonest-freeing first.
        grants: Vec<HeldGrant>,
    },
    /// Fixed window: the current window and what it has counted.
    FixedWindow {
        /// Unix ms when the window began (it ends one interval later).
        window_start: u64,
        /// Permits granted in it.
        count: u64,
    },
    /// Sliding window counter: the current and the previous window's counts.
    SlidingWindow {
        /// Unix ms when the current window began.
        window_start: u64,
        /// Permits granted in the current window.
        current: u64,
        /// Permits granted in the previous window (its full count; see [`StateDetail::weighted_count`]).
        previous: u64,
    },
    /// Token bucket: the tokens in the bucket (fractional: it refills continuously).
    TokenBucket {
        /// Tokens now.
        tokens: f64,
    },
    /// GCRA: the theoretical arrival time and the burst capacity it leaves.
    Gcra {
        /// Unix ms (fractional) when the limit is whole again; `now` when it already is.
        tat: f64,
        /// Permits a burst could take now (fractional, as a token bucket's tokens).
        tokens: f64,
    },
}

/// Permits one grant holds in a permit log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldGrant {
    /// The grant's id as the log holds it: sealed (the first 16 hex digits of the SHA-1 of the receipt's id), so
    /// whoever reads the state cannot refund or release the grant.
    pub id: String,
    /// Permits it holds.
    pub permits: u32,
    /// Unix ms when they free.
    pub frees_at: u64,
}

impl StateDetail {
    /// Sliding window: the previous window's count as the sliding window weighs it at `now`, plus the current
    /// count: what the limit is held against. `None` for the other algorithms.
    pub fn weighted_count(&self, quota: &Quota, now: u64) -> Option<f64> {
        let StateDetail::SlidingWindow { window_start, current, previous } = *self else {
            return None;
        };
        let interval = quota.interval_ms();
        let still_covered = interval.saturating_sub(now.saturating_sub(window_start));
        Some(previous as f64 * still_covered as f64 / interval as f64 + current as f64)
    }
}

/// Reads the state of several limits, each for its identifier, in one round trip at one moment. A stored quota costs
/// one more round trip each; a missing one is [`Error::NotInitialized`].
pub async fn state_all<'i, I>(requests: &[(&Limiter, I)]) -> Result<Vec<LimitState>>
where
    I: Into<Identifier<'i>> + Clone,
{
    let (first, _) =
        requests.first().ok_or_else(|| Error::InvalidArgument("no limits to inspect: pass at least one".into()))?;
    let mut quotas = Vec::with_capacity(requests.len());
    for (limiter, _) in requests {
        let quota = match limiter.quota {
            Some(quota) => quota,
            None => {
                limiter.stored_quota().await?.ok_or_else(|| Error::NotInitialized { name: limiter.name.clone() })?
            }
        };
        quotas.push(quota);
    }
    let keys: Vec<String> = requests.iter().map(|(limiter, id)| limiter.state_key(id.clone())).collect();
    let mut args = vec![first.now_ms.map(|ms| ms.to_string()).unwrap_or_default(), LISTED_GRANTS.to_string()];
    args.extend(quotas.iter().map(|quota| kind(quota.algorithm()).to_owned()));
    let reply = INSPECT.run(&first.client, &keys, &args).await?.into_array()?;
    if reply.len() != requests.len() + 1 {
        return Err(Error::malformed(
            format!("the inspection of {} keys (the time, then one entry per key)", requests.len()),
            Value::Array(reply),
        ));
    }
    let mut entries = reply.into_iter();
    let now = entries.next().expect("checked length").into_u64()?;
    requests
        .iter()
        .zip(quotas)
        .zip(keys)
        .zip(entries)
        .map(|((((limiter, _), quota), key), entry)| decode(limiter.name(), quota, key, now, entry))
        .collect()
}

/// How inspect.lua reads an algorithm's key.
fn kind(algorithm: Algorithm) -> &'static str {
    if algorithm.names_grants() {
        "log"
    } else {
        "value"
    }
}

fn decode(name: &str, quota: Quota, key: String, now: u64, entry: Value) -> Result<LimitState> {
    let mut items = entry.into_array()?.into_iter();
    let mut next = |what: &str| items.next().ok_or_else(|| Error::malformed(what.to_owned(), "nothing"));
    let ttl = next("the key's time to live")?.into_int()?;
    let expires_at = u64::try_from(ttl).ok().map(|ms| now + ms);
    let (stored, detail) = if quota.algorithm().names_grants() {
        let held = next("the permits held")?.into_u64()?;
        (None, StateDetail::Log { held, grants: grants(items.collect())? })
    } else {
        let text = next("the stored value")?.into_string()?;
        let detail = decode_value(&quota, &text, now)?;
        ((!text.is_empty()).then_some(text), detail)
    };
    Ok(LimitState { name: name.to_owned(), quota, key, now, expires_at, stored, detail })
}

/// Member, frees-at pairs, one per grant (members `<position>:<permits>:<run>:<grant id>`, see
/// `lua/limits/zset_log.lua`).
fn grants(flat: Vec<Value>) -> Result<Vec<HeldGrant>> {
    if flat.len() % 2 != 0 {
        return Err(Error::malformed("member, score pairs", Value::Array(flat)));
    }
    let mut grants = Vec::with_capacity(flat.len() / 2);
    let mut items = flat.into_iter();
    while let (Some(member), Some(score)) = (items.next(), items.next()) {
        let member = member.into_string()?;
        let malformed = || Error::malformed("a grant named <position>:<permits>:<run>:<grant id>", &member);
        let mut fields = member.splitn(4, ':');
        let [Some(position), Some(permits), Some(run), Some(id)] = [(); 4].map(|()| fields.next()) else {
            return Err(malformed());
        };
        if !(position.bytes().chain(run.bytes()).all(|b| b.is_ascii_digit()) && !position.is_empty() && !run.is_empty())
        {
            return Err(malformed());
        }
        grants.push(HeldGrant {
            permits: permits.parse().map_err(|_| malformed())?,
            id: id.to_owned(),
            frees_at: score.into_number::<u64>("a grant's expiry")?,
        });
    }
    Ok(grants)
}

/// A string state brought to `now` by the model (see [`model::stored`](super::model)), in the units a person reads.
fn decode_value(quota: &Quota, text: &str, now: u64) -> Result<StateDetail> {
    let (interval, rate) = (quota.interval_ms(), u64::from(quota.rate()));
    let full = u64::from(quota.limit()) * interval;
    Ok(match stored::view(quota, text, now)? {
        StoredView::FixedWindow { window, count } => {
            StateDetail::FixedWindow { window_start: window.saturating_mul(interval), count }
        }
        StoredView::SlidingWindow { window, current, previous } => {
            StateDetail::SlidingWindow { window_start: window.saturating_mul(interval), current, previous }
        }
        // Units are tokens × interval.
        StoredView::TokenBucket { units } => StateDetail::TokenBucket { tokens: units as f64 / interval as f64 },
        // TAT = now + debt / rate.
        StoredView::Gcra { debt } => StateDetail::Gcra {
            tat: now as f64 + debt as f64 / rate as f64,
            tokens: full.saturating_sub(debt) as f64 / interval as f64,
        },
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn quota(algorithm: Algorithm, limit: u32, interval_ms: u64, rate: u32) -> Quota {
        Quota::new(algorithm, limit, Duration::from_millis(interval_ms), rate).unwrap()
    }

    #[test]
    fn a_fixed_window_that_ended_counts_nothing() {
        let q = quota(Algorithm::FixedWindow, 10, 1000, 10);
        let detail = |text| decode_value(&q, text, 5_250).unwrap();
        assert_eq!(detail("fw:5:7"), StateDetail::FixedWindow { window_start: 5_000, count: 7 });
        assert_eq!(detail("fw:4:7"), StateDetail::FixedWindow { window_start: 5_000, count: 0 });
        assert_eq!(detail(""), StateDetail::FixedWindow { window_start: 5_000, count: 0 });
    }

    #[test]
    fn a_sliding_window_shifts_its_counts_as_windows_pass() {
        let q = quota(Algorithm::SlidingWindow, 10, 1000, 10);
        let detail = |text| decode_value(&q, text, 5_250).unwrap();
        let at = |current, previous| StateDetail::SlidingWindow { window_start: 5_000, current, previous };
        assert_eq!(detail("sw:5:3:8"), at(3, 8));
        assert_eq!(detail("sw:4:3:8"), at(0, 3));
        assert_eq!(detail("sw:3:3:8"), at(0, 0));
        // 75% of the previous window is still covered 250 ms in.
        assert_eq!(at(2, 8).weighted_count(&q, 5_250), Some(8.0));
    }

    #[test]
    fn a_token_bucket_refills_continuously_up_to_its_capacity() {
        let q = quota(Algorithm::TokenBucket, 20, 1000, 5);
        let tokens = |text| match decode_value(&q, text, 10_000).unwrap() {
            StateDetail::TokenBucket { tokens } => tokens,
            other => panic!("{other:?}"),
        };
        assert_eq!(tokens(""), 20.0);
        // 2 tokens at 9 900 ms, then 100 ms at 5 per second: 2.5.
        assert_eq!(tokens("tb:2000:9900"), 2.5);
        assert_eq!(tokens("tb:2000:1000"), 20.0);
    }

    #[test]
    fn gcra_shows_its_theoretical_arrival_time_and_the_burst_left() {
        // 3 per second, burst 6: the emission interval is 333.3 ms.
        let q = quota(Algorithm::Gcra, 6, 1000, 3);
        let detail = |text| decode_value(&q, text, 10_000).unwrap();
        assert_eq!(detail(""), StateDetail::Gcra { tat: 10_000.0, tokens: 6.0 });
        assert_eq!(detail("gcra:9000:2"), StateDetail::Gcra { tat: 10_000.0, tokens: 6.0 });
        // TAT 10 500 ms + 1/3: a debt of 1 501 units, 1.501 tokens.
        let StateDetail::Gcra { tat, tokens } = detail("gcra:10500:1") else { unreachable!() };
        assert!((tat - 10_500.333).abs() < 0.001, "{tat}");
        assert!((tokens - 4.499).abs() < 1e-9, "{tokens}");
    }

    #[test]
    fn a_value_in_no_known_layout_is_a_malformed_reply() {
        let q = quota(Algorithm::TokenBucket, 20, 1000, 5);
        let tagged =
            ["12", "1:2:3", "a:b", "-1:5", "1:", "+5:3", " 5:3", "9007199254740993:1"].map(|t| format!("tb:{t}"));
        for text in tagged.iter().map(String::as_str).chain(["12", "5:3", "tb", "TB:1:2"]) {
            let error = decode_value(&q, text, 10_000).unwrap_err();
            assert_eq!(error.code(), "EDGELIMIT_MALFORMED_REPLY", "{text}: {error}");
            assert!(error.to_string().contains("<units>:<at>"), "{error}");
        }
    }

    #[test]
    fn a_value_tagged_by_another_algorithm_is_foreign_state() {
        let q = quota(Algorithm::FixedWindow, 10, 1000, 10);
        let error = decode_value(&q, "gcra:5:3", 5_250).unwrap_err();
        assert_eq!(error.code(), "EDGELIMIT_FOREIGN_STATE", "{error}");
        let error = decode_value(&q, "5:3", 5_250).unwrap_err();
        assert!(error.to_string().contains("fw:<window>:<count>"), "{error}");
    }

    #[test]
    fn a_stored_window_far_ahead_is_shown_without_overflow() {
        let q = quota(Algorithm::SlidingWindow, 10, 1 << 40, 10);
        let detail = decode_value(&q, "sw:9007199254740991:1:2", 5_250).unwrap();
        assert_eq!(detail, StateDetail::SlidingWindow { window_start: u64::MAX, current: 1, previous: 2 });
    }

    #[test]
    fn log_members_are_read_one_grant_each() {
        let pair = |member: &str, score: &str| [Value::Bytes(member.into()), Value::Bytes(score.into())];
        let flat: Vec<Value> = [
            pair("0000000000007:2:9:a", "900"),
            pair("0000000000009:1:9:b", "900"),
            pair("0000000000010:5:15:a-2:x", "950"),
        ]
        .into_iter()
        .flatten()
        .collect();
        let grant = |id: &str, permits, frees_at| HeldGrant { id: id.into(), permits, frees_at };
        assert_eq!(grants(flat).unwrap(), vec![grant("a", 2, 900), grant("b", 1, 900), grant("a-2:x", 5, 950)]);
        for bad in [
            pair("a/1", "900"),
            pair("x:1:0:a", "900"),
            pair("1:x:0:a", "900"),
            pair("1:1:x:a", "900"),
            pair("1:1:a", "900"),
            pair("1:1:0:a", "soon"),
        ] {
            assert_eq!(grants(bad.to_vec()).unwrap_err().code(), "EDGELIMIT_MALFORMED_REPLY");
        }
    }
}
