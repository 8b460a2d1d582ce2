//! Human durations, as operators write them: `"10 s"`, `"1m"`, `"250ms"`, `"1.5s"`, `"2h"`.

use std::time::Duration;

use crate::error::{Error, Result};

/// Parses a number followed by a unit: `ms`, `s`, `m`, `h` or `d` (spaces allowed; `sec`, `min`, `hour`, `day` and
/// plurals too). A bare number is an error: ms or s is what a rate limit must not leave to a guess.
pub fn parse_duration(text: &str) -> Result<Duration> {
    let trimmed = text.trim();
    let split = trimmed.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(split);
    let invalid = || {
        // At most 100 bytes of the text, as the scripts quote what they refuse.
        let shown = crate::error::prefix(text, 100);
        Error::InvalidArgument(format!(
            "invalid duration {shown:?}: write a number and a unit, like \"250ms\", \"10 s\", \"1m\", \"2h\""
        ))
    };
    let unit_ns: u128 = match unit.trim() {
        "ms" | "millisecond" | "milliseconds" => 1_000_000,
        "s" | "sec" | "secs" | "second" | "seconds" => 1_000_000_000,
        "m" | "min" | "mins" | "minute" | "minutes" => 60_000_000_000,
        "h" | "hour" | "hours" => 3_600_000_000_000,
        "d" | "day" | "days" => 86_400_000_000_000,
        _ => return Err(invalid()),
    };
    let ns = decimal_times(number, unit_ns).ok_or_else(invalid)?;
    // The bound the stored values have always had: half of u64's range in ms.
    if ns / 1_000_000 > u128::from(u64::MAX / 2) {
        return Err(invalid());
    }
    // ns / 10^9 is at most u64::MAX / 2000 (the bound above), so it fits.
    Ok(Duration::new((ns / 1_000_000_000) as u64, (ns % 1_000_000_000) as u32))
}

/// `number` (digits with at most one `.`) times `unit`, rounded to the nearest whole, in exact decimal arithmetic
/// (`"0.3s"` is 300 ms to the nanosecond); `None` for anything else, or a value past u128.
fn decimal_times(number: &str, unit: u128) -> Option<u128> {
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.len() + fraction.len() == 0 || fraction.contains('.') {
        return None;
    }
    let digits =
        |text: &str| text.bytes().try_fold(0u128, |n, digit| n.checked_mul(10)?.checked_add(u128::from(digit - b'0')));
    // Beyond 18 digits a fraction moves nothing: unit (at most a day in ns, < 10^14) / 10^18 is under a nanosecond.
    let fraction = &fraction[..fraction.len().min(18)];
    let scale = 10u128.pow(fraction.len() as u32);
    let part = digits(fraction)? * unit;
    digits(whole)?.checked_mul(unit)?.checked_add((part + scale / 2) / scale)
}

/// A duration as whole milliseconds, at least 1 ms: what every limiter stores. `what` names it in the error.
pub(crate) fn whole_ms(duration: Duration, what: &str) -> Result<u64> {
    let ms = duration.as_millis();
    if ms == 0 || duration.subsec_nanos() % 1_000_000 != 0 {
        return Err(Error::InvalidArgument(format!(
            "the {what} must be a whole number of milliseconds, at least 1 ms (got {duration:?})"
        )));
    }
    u64::try_from(ms).map_err(|_| Error::InvalidArgument(format!("the {what} is too long")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_operators_write() {
        assert_eq!(parse_duration("10 s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("1m").unwrap(), Duration::from_secs(60));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration(" 1.5s ").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("2 hours").unwrap(), Duration::from_secs(7200));
        assert_eq!(parse_duration("1d").unwrap(), Duration::from_secs(86_400));
        assert_eq!(parse_duration("0.3s").unwrap(), Duration::from_millis(300));
        assert_eq!(parse_duration("1.1 s").unwrap(), Duration::from_millis(1100));
        assert_eq!(parse_duration(".5s").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2.s").unwrap(), Duration::from_secs(2));
        assert_eq!(parse_duration("0.0015 s").unwrap(), Duration::from_micros(1500));
        assert_eq!(parse_duration("1.5 minutes").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("0.0000000015s").unwrap(), Duration::from_nanos(2));
        assert_eq!(parse_duration("1.00000000000000000000000000000000000000001h").unwrap(), Duration::from_secs(3600));
        assert_eq!(parse_duration("000010ms").unwrap(), Duration::from_millis(10));
    }

    #[test]
    fn the_bound_is_half_of_u64_in_ms() {
        let max = u64::MAX / 2;
        assert_eq!(parse_duration(&format!("{max}ms")).unwrap().as_millis(), u128::from(max));
        for too_long in [format!("{}ms", max + 1), format!("{}d", u64::MAX), "9".repeat(60) + "s"] {
            assert!(parse_duration(&too_long).is_err(), "{too_long}");
        }
    }

    #[test]
    fn refuses_guesses_and_nonsense() {
        for bad in ["10", "", "s", "1 fortnight", "-1s", "1e3s", "1..2s", ".s", "1.2.3s", "NaN s", "inf s"] {
            let err = parse_duration(bad).unwrap_err();
            assert!(err.to_string().contains("250ms"), "{bad}: {err}");
        }
    }

    #[test]
    fn quotes_at_most_100_bytes_of_what_it_refuses() {
        let huge = format!("{}x", "é".repeat(512 * 1024));
        let message = parse_duration(&huge).unwrap_err().to_string();
        assert!(message.len() < 250, "{} bytes", message.len());
        assert!(message.contains(&format!("\"{}\"", "é".repeat(50))), "{message}");
        let message = parse_duration("10 parsecs").unwrap_err().to_string();
        assert!(message.contains("\"10 parsecs\""), "{message}");
    }
}
