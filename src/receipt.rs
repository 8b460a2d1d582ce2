//! Receipts: what every grant returns, and what a refund names to give that grant back.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};

/// The longest mark a receipt carries (the scripts refuse longer ones).
const MAX_MARK: usize = 64;

/// The receipt of a granted request, `<permits>:<mark>` (a mark of at most 64 letters, digits, `_` or `-`):
/// [`Limiter::refund`](super::Limiter::refund) gives back what that grant took, as far as the algorithm's rule still
/// allows (each algorithm's mark and rule: docs/algorithms.md, "Refunds are receipts").
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Receipt {
    permits: u32,
    /// The mark's ASCII bytes, inline, so that a [`Decision`](crate::Decision) stays `Copy`.
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

    /// The mark naming the grant (see [`Receipt`]).
    pub fn mark(&self) -> &str {
        // Only ASCII is ever stored (see `from_str`).
        std::str::from_utf8(&self.mark[..usize::from(self.mark_len)]).expect("an ASCII mark")
    }
}

/// How a log names a grant, as its scripts do: `<expiry>-<grant id>`, its receipt's mark.
pub(crate) fn log_mark(expiry: u64, id: &str) -> String {
    format!("{expiry}-{id}")
}

/// A fresh random id naming a logged grant: unguessable, since a refund needs only the receipt.
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

    /// Checks the form only; whether it names a grant of the limit is the script's to check, before it writes anything.
    fn from_str(text: &str) -> Result<Receipt> {
        let invalid = || {
            let shown: String = text.chars().take(100).collect();
            Error::InvalidArgument(format!(
                "invalid receipt {shown:?}: expected \"<permits>:<mark>\" exactly as the grant returned it"
            ))
        };
        let (permits, mark) = text.split_once(':').ok_or_else(invalid)?;
        let permits_ok = !permits.is_empty() && permits.bytes().all(|byte| byte.is_ascii_digit());
        let permits: u32 = (permits.parse().ok()).filter(|&n| permits_ok && n > 0).ok_or_else(invalid)?;
        let mark_byte = |byte: u8| byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-';
        if !(1..=MAX_MARK).contains(&mark.len()) || !mark.bytes().all(mark_byte) {
            return Err(invalid());
        }
        let mut bytes = [0; MAX_MARK];
        bytes[..mark.len()].copy_from_slice(mark.as_bytes());
        Ok(Receipt { permits, mark: bytes, mark_len: mark.len() as u8 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grant_id_says_nothing_of_the_next() {
        let ids: Vec<u64> = (0..1000).map(|_| u64::from_str_radix(&fresh_grant_id(), 16).unwrap()).collect();
        // A counter (or any small step) would show in the differences of consecutive ids.
        let close = ids.windows(2).filter(|pair| pair[1].abs_diff(pair[0]) < 1 << 32).count();
        assert!(close < 3, "{close} of 999 consecutive grant ids lie within 2^32 of each other");
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
