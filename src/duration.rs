//! Human durations, as operators write them: `"10 s"`, `"1m"`, `"250ms"`, `"1.5s"`, `"2h"`.

use std::time::Duration;

use crate::error::{Error, Result};

/// Parses a number followed by a unit: `ms`, `s`, `m`, `h` or `d` (spaces allowed between them; `sec`, `min`,
/// `hour`, `day` and plurals are accepted too). A bare number is an error: milliseconds or seconds is exactly what
/// a rate limit must not leave to a guess.
pub fn parse_duration(text: &str) -> Result<Duration> {
    let trimmed = text.trim();
    let split = trimmed
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(split);
    let invalid = || {
        // At most 100 bytes of the text, as the scripts' reject() quotes what they refuse.
        let shown = crate::error::prefix(text, 100);
        Error::InvalidArgument(format!(
            "invalid duration {shown:?}: write a number and a unit, like \"250ms\", \"10 s\", \"1m\", \"2h\""
        ))
    };
    let value: f64 = number.parse().map_err(|_| invalid())?;
    let unit_ms = match unit.trim() {
        "ms" | "millisecond" | "milliseconds" => 1.0,
        "s" | "sec" | "secs" | "second" | "seconds" => 1_000.0,
        "m" | "min" | "mins" | "minute" | "minutes" => 60_000.0,
        "h" | "hour" | "hours" => 3_600_000.0,
        "d" | "day" | "days" => 86_400_000.0,
        _ => return Err(invalid()),
    };
    let ms = value * unit_ms;
    if !ms.is_finite() || ms > u64::MAX as f64 / 2.0 {
        return Err(invalid());
    }
    Ok(Duration::from_secs_f64(ms / 1_000.0))
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
    }

    #[test]
    fn refuses_guesses_and_nonsense() {
        for bad in ["10", "", "s", "1 fortnight", "-1s", "1e3s", "1..2s"] {
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
