//! Receipts: what every grant returns, and what a refund names to give that grant back.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};

/// The longest mark a receipt carries (the scripts refuse longer ones).
const MAX_MARK: usize = 64;

/// The receipt of a granted request: its permits and a mark naming the grant in its algorithm's terms. Give the
/// grant back with [`Limiter::refund`](super::Limiter::refund), which gives back exactly what that grant took and
/// the algorithm's rule still allows (see the README's "Refunds"), never more:
///
/// - token bucket, GCRA: the mark is the grant's server time `t0` (unix ms); a refund at server time `t` gives back
///   `max(0, permits × T − (t − t0))` permits' worth, `T` = interval / rate (what has not refilled since);
/// - fixed window: the mark is the grant's window index; the permits go back while that window is the current one;
/// - sliding window: the window index too; the permits go back while it is the current or the previous window;
/// - sliding log, concurrency: the mark is the grant's id (16 hex digits); the grant's permits go back while it
///   still holds them (for a concurrency lease: it is released).
///
/// Its text form, `<permits>:<mark>` (the mark of letters, digits, `_` or `-`, at most 64), is what the scripts
/// return and take; parse it back with [`str::parse`] (the CLI prints and reads it, the npm package hands it out as
/// a string). A receipt is good for one refund: it is not a bearer token the scripts remember, so a time or window
/// receipt refunded twice gives back twice (each time within the rule); a log's grant is given back once.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Receipt {
    permits: u32,
    /// The mark's bytes (ASCII), `mark_len` of them: inline, so that a [`Decision`](crate::Decision) stays `Copy`.
    mark: [u8; MAX_MARK],
    mark_len: u8,
}

/// A concurrency lease is the receipt of its grant: [`Limiter::release`](super::Limiter::release) refunds it.
pub type Lease = Receipt;

impl Receipt {
    /// The permits the grant took.
    pub fn permits(&self) -> u32 {
        self.permits
    }

    /// The mark naming the grant (see the table above).
    pub fn mark(&self) -> &str {
        // Only ASCII is ever stored (see `from_str`).
        std::str::from_utf8(&self.mark[..usize::from(self.mark_len)]).expect("an ASCII mark")
    }
}

/// How a log (concurrency, sliding log) names a grant, as its scripts do: `<expiry>-<grant id>`, its receipt's mark
/// (and what a reserved tranche's return names).
pub(crate) fn log_mark(expiry: u64, id: &str) -> String {
    format!("{expiry}-{id}")
}

/// A fresh random id naming a grant the scripts log as zset members (concurrency, sliding log): 16 hex digits that
/// no one can work out from other grants' ids. A refund needs only the receipt, so an id that could be guessed
/// (it was a per-process prefix plus a counter: one receipt gave away the next) let a holder of one lease refund
/// another's, and take a third lease over a limit of two.
pub(crate) fn fresh_grant_id() -> String {
    format!("{:016x}", crate::unique_id::unguessable_u64())
}

impl fmt::Display for Receipt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.permits, self.mark())
    }
}

impl fmt::Debug for Receipt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Receipt({self})")
    }
}

impl FromStr for Receipt {
    type Err = Error;

    /// Checks the form only (permits 1 to 2^32 − 1 in decimal, a mark of 1 to 64 letters, digits, `_` or `-`);
    /// whether it names a grant of the limit is the script's to check, before it writes anything.
    fn from_str(text: &str) -> Result<Receipt> {
        let invalid = || {
            let shown: String = text.chars().take(100).collect();
            Error::InvalidArgument(format!(
                "invalid receipt {shown:?}: expected \"<permits>:<mark>\" exactly as the grant returned it"
            ))
        };
        let (permits, mark) = text.split_once(':').ok_or_else(invalid)?;
        let permits_ok = !permits.is_empty() && permits.bytes().all(|byte| byte.is_ascii_digit());
        let permits: u32 = permits
            .parse()
            .ok()
            .filter(|&n| permits_ok && n > 0)
            .ok_or_else(invalid)?;
        let mark_ok = (1..=MAX_MARK).contains(&mark.len())
            && mark
                .bytes()
                .all(|byte| byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-');
        if !mark_ok {
            return Err(invalid());
        }
        let mut bytes = [0; MAX_MARK];
        bytes[..mark.len()].copy_from_slice(mark.as_bytes());
        Ok(Receipt {
            permits,
            mark: bytes,
            mark_len: mark.len() as u8,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grant_id_says_nothing_of_the_next() {
        let ids: Vec<u64> = (0..1000)
            .map(|_| u64::from_str_radix(&fresh_grant_id(), 16).unwrap())
            .collect();
        // A counter (or any small step) would show in the differences of consecutive ids.
        let close = ids
            .windows(2)
            .filter(|pair| pair[1].abs_diff(pair[0]) < 1 << 32)
            .count();
        assert!(
            close < 3,
            "{close} of 999 consecutive grant ids lie within 2^32 of each other"
        );
    }

    #[test]
    fn text_form_round_trips_and_rejects_garbage() {
        for text in ["3:0000000000000abc", "1:1700000000000", "7:28333", "1:a_-Z"] {
            let receipt: Receipt = text.parse().unwrap();
            assert_eq!(receipt.to_string(), text);
            assert_eq!(format!("{receipt:?}"), format!("Receipt({text})"));
        }
        let receipt: Receipt = "3:0000000000000abc".parse().unwrap();
        assert_eq!((receipt.permits(), receipt.mark()), (3, "0000000000000abc"));
        let long_mark = "x".repeat(65);
        let huge = "1:".to_owned() + &"9".repeat(1 << 20);
        for bad in [
            "",
            "3",
            "3:",
            ":abc",
            "0:abc",
            "-1:abc",
            "+1:abc",
            "4294967296:abc",
            "x:abc",
            "3:a/b",
            "3:a:b",
            "3:ab\0",
            "3:é",
            &format!("1:{long_mark}"),
            &huge,
        ] {
            let error = bad.parse::<Receipt>().unwrap_err();
            assert_eq!(error.code(), "EDGELIMIT_INVALID_ARGUMENT", "{bad:.20}");
            assert!(error.to_string().len() < 300, "the message does not echo a huge input");
        }
    }
}
