//! A rate-limiting decision as a value: a denial is not an error but a [`Decision`] with `success == false` and the
//! exact time to wait.

use crate::error::Result;
use crate::receipt::Receipt;
use crate::value::Value;

/// What a limiter decided for one request, in the shape every algorithm returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// True when the permits were granted.
    pub success: bool,
    /// The limit: permits per interval.
    pub limit: u64,
    /// Permits still available after this decision.
    pub remaining: u64,
    /// Unix ms when the limit is whole again if no further request comes.
    pub reset: u64,
    /// Milliseconds until this request could succeed; 0 when it did.
    pub retry_after: u64,
    /// A grant's receipt: what [`Limiter::refund`](crate::Limiter::refund) takes to give exactly this grant back (for a
    /// concurrency limit, the lease to release). `None` when nothing was granted.
    pub receipt: Option<Receipt>,
}

/// What every script replies per limit: `{status, limit, remaining, reset, retry_after, last}`. `last` is a grant's
/// receipt (text, empty when none) or what a Redisson release gave back (a number).
#[derive(Debug)]
pub(crate) struct ScriptReply {
    pub status: Status,
    pub limit: u64,
    pub remaining: u64,
    pub reset: u64,
    pub retry_after: u64,
    pub last: Value,
}

/// A verdict's status word: one vocabulary for every script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    /// Taken and recorded.
    Granted,
    /// Not taken: the limit does not allow it now; `retry_after` says when it would.
    Denied,
    /// A peek (or Redisson's available permits): it would be granted, nothing recorded.
    Allowed,
    /// Given back.
    Refunded,
    /// Nothing to give back: the grant freed already, or the lease was released.
    NotHeld,
    /// More permits than the limit: no waiting helps.
    ExceedsLimit,
    /// No quota (or Redisson rate) is stored under the limiter's name.
    NotConfigured,
}

/// Entries per decision in a script's reply.
pub(crate) const REPLY_FIELDS: usize = 6;

impl ScriptReply {
    /// Decodes one limit's six entries: an unknown status or a negative number is malformed.
    pub fn from_fields(fields: [Value; REPLY_FIELDS]) -> Result<ScriptReply> {
        let [status, limit, remaining, reset, retry_after, last] = fields;
        let status = match status.into_string()?.as_str() {
            "granted" => Status::Granted,
            "denied" => Status::Denied,
            "allowed" => Status::Allowed,
            "refunded" => Status::Refunded,
            "not_held" => Status::NotHeld,
            "exceeds_limit" => Status::ExceedsLimit,
            "not_configured" => Status::NotConfigured,
            other => return Err(crate::Error::malformed("a known limit status", other)),
        };
        Ok(ScriptReply {
            status,
            limit: limit.into_u64()?,
            remaining: remaining.into_u64()?,
            reset: reset.into_u64()?,
            retry_after: retry_after.into_u64()?,
            last,
        })
    }

    /// The verdict, unless it has more remaining than its limit, which no family script replies. Not for the Redisson
    /// layout, whose logs a Redisson client may leave over the rate.
    pub(crate) fn checked(self) -> Result<ScriptReply> {
        if self.remaining > self.limit {
            return Err(crate::Error::malformed(
                format!("at most the limit ({}) remaining", self.limit),
                self.remaining,
            ));
        }
        Ok(self)
    }

    /// Decodes a reply that is one limit's six entries.
    pub fn decode(value: Value) -> Result<ScriptReply> {
        ScriptReply::from_fields(value.into_tuple::<REPLY_FIELDS>()?)
    }

    /// The numbers as a decision, with no receipt.
    pub fn decision(&self, success: bool) -> Decision {
        Decision {
            success,
            limit: self.limit,
            remaining: self.remaining,
            reset: self.reset,
            retry_after: self.retry_after,
            receipt: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(word: &str) -> Value {
        Value::Bytes(word.as_bytes().to_vec())
    }

    #[test]
    fn decodes_the_six_entry_shape() {
        let decoded = ScriptReply::decode(Value::Array(vec![
            text("denied"),
            Value::Int(5),
            Value::Int(0),
            Value::Int(1_700_000_001_000),
            Value::Int(420),
            text(""),
        ]))
        .unwrap();
        assert_eq!(decoded.status, Status::Denied);
        assert_eq!(
            decoded.decision(false),
            Decision {
                success: false,
                limit: 5,
                remaining: 0,
                reset: 1_700_000_001_000,
                retry_after: 420,
                receipt: None,
            }
        );
    }

    #[test]
    fn any_other_shape_or_status_is_malformed() {
        let int = Value::Int(1);
        let status = text("granted");
        let five = vec![status.clone(), int.clone(), int.clone(), int.clone(), int.clone()];
        let with = |index: usize, value: Value| {
            let mut fields = five.clone();
            fields.push(text(""));
            fields[index] = value;
            fields
        };
        for bad in [
            five.clone(),
            with(0, int.clone()),
            with(0, text("available")),
            with(2, Value::Nil),
            with(2, Value::Int(-1)),
        ] {
            assert_eq!(ScriptReply::decode(Value::Array(bad)).unwrap_err().code(), "EDGELIMIT_MALFORMED_REPLY");
        }
        assert!(ScriptReply::decode(Value::Nil).is_err());
    }
}
