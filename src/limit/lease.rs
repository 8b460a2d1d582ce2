//! Concurrency leases: what a granted concurrency request holds until it is released or expires.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};

/// A lease on `permits` of a concurrency limit. Give it back with [`Limiter::release`](super::Limiter::release);
/// if the holder never does (it crashed), the lease expires after the limit's lease timeout.
///
/// Its text form, `<permits>:<expiry>-<id as 16 hex digits>`, is the receipt the script hands out and finds the
/// grant by again; parse it back with [`str::parse`] (the CLI prints and reads it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Lease {
    /// Permits the lease holds.
    pub permits: u32,
    /// The lease's random id.
    pub id: u64,
    /// Unix ms (server time) at which the lease expires; 0 before it was granted.
    pub expiry: u64,
}

impl Lease {
    /// A lease on `permits` with a fresh id.
    pub(crate) fn fresh(permits: u32) -> Lease {
        Lease {
            permits,
            id: crate::unique_id::next_u64(),
            expiry: 0,
        }
    }

    /// The id as the script receives it.
    pub(crate) fn id_text(&self) -> String {
        format!("{:016x}", self.id)
    }
}

impl fmt::Display for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}-{}", self.permits, self.expiry, self.id_text())
    }
}

impl FromStr for Lease {
    type Err = Error;

    fn from_str(text: &str) -> Result<Lease> {
        let invalid = || {
            Error::InvalidArgument(format!(
                "invalid lease {text:?}: expected \"<permits>:<expiry>-<16 hex digits>\", as acquire printed it"
            ))
        };
        let (permits, rest) = text.split_once(':').ok_or_else(invalid)?;
        let (expiry, id) = rest.split_once('-').ok_or_else(invalid)?;
        if id.len() != 16 || !expiry.bytes().all(|b| b.is_ascii_digit()) {
            return Err(invalid());
        }
        Ok(Lease {
            permits: permits.parse().map_err(|_| invalid())?,
            id: u64::from_str_radix(id, 16).map_err(|_| invalid())?,
            expiry: expiry.parse().map_err(|_| invalid())?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_form_round_trips_and_rejects_garbage() {
        let lease = Lease {
            permits: 3,
            id: 0xabc,
            expiry: 1_700_000_000_000,
        };
        assert_eq!(lease.to_string(), "3:1700000000000-0000000000000abc");
        assert_eq!(lease.to_string().parse::<Lease>().unwrap(), lease);
        for bad in [
            "",
            "3",
            "3:0000000000000abc",
            "x:1-0000000000000abc",
            "3:1-abc",
            "3:-1-0000000000000abc",
        ] {
            assert!(bad.parse::<Lease>().is_err(), "{bad}");
        }
    }
}
