//! A rate-limiting decision: a value, whether the request was granted or not.
//!
//! Being denied is not an error. It is a [`Decision`] with `success == false` and the exact time to wait.

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
    /// Unix time in ms when the limit is whole again if no further request comes (for the sliding log: when every
    /// current grant has expired).
    pub reset: u64,
    /// Milliseconds until this request could succeed; 0 when it did.
    pub retry_after: u64,
    /// For a granted request, its receipt: what [`Limiter::refund`](crate::Limiter::refund) takes to give exactly
    /// this grant back (for a concurrency limit, the lease to release). `None` when nothing was granted (or the
    /// grant was given back already).
    pub receipt: Option<Receipt>,
}

/// The status word a script put first in its reply, with the four numbers that follow it.
#[derive(Debug)]
pub(crate) struct ScriptReply {
    pub status: String,
    pub numbers: [u64; 4],
}

impl ScriptReply {
    /// Decodes `{status, n1, n2, n3, n4}`, checking every element: a script reply of another shape is
    /// [`Error::MalformedReply`].
    pub fn decode(value: Value) -> Result<ScriptReply> {
        let [status, a, b, c, d] = value.into_tuple::<5>()?;
        let status = status.into_string()?;
        let numbers = [a.into_u64()?, b.into_u64()?, c.into_u64()?, d.into_u64()?];
        Ok(ScriptReply { status, numbers })
    }

    /// The numbers as a decision.
    pub fn decision(&self, success: bool) -> Decision {
        let [limit, remaining, reset, retry_after] = self.numbers;
        Decision {
            success,
            limit,
            remaining,
            reset,
            retry_after,
            receipt: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(items: Vec<Value>) -> Result<ScriptReply> {
        ScriptReply::decode(Value::Array(items))
    }

    #[test]
    fn decodes_the_five_element_shape() {
        let decoded = reply(vec![
            Value::Bytes(b"denied".to_vec()),
            Value::Int(5),
            Value::Int(0),
            Value::Int(1_700_000_001_000),
            Value::Int(420),
        ])
        .unwrap();
        assert_eq!(decoded.status, "denied");
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
    fn any_other_shape_is_malformed() {
        let int = Value::Int(1);
        let status = Value::Bytes(b"granted".to_vec());
        for bad in [
            vec![status.clone(), int.clone(), int.clone(), int.clone()],
            vec![int.clone(), int.clone(), int.clone(), int.clone(), int.clone()],
            vec![status.clone(), int.clone(), Value::Nil, int.clone(), int.clone()],
            vec![status.clone(), int.clone(), Value::Int(-1), int.clone(), int.clone()],
        ] {
            assert_eq!(reply(bad).unwrap_err().code(), "EDGELIMIT_MALFORMED_REPLY");
        }
        assert!(ScriptReply::decode(Value::Nil).is_err());
    }
}
