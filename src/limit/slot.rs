//! Limiter names and key prefixes, which make the hash tags that keep a limiter's keys in one cluster slot.

use crate::error::{Error, Result};

/// The longest limiter name or key prefix, in bytes: operators choose them, and every key carries them.
pub(crate) const MAX_TAG_PART_BYTES: usize = 256;

/// Checks a limiter name or key prefix, which goes into a key's hash tag `{…}`: non-empty and brace-free (a brace
/// would scatter a limiter's keys over slots), NUL-free and at most [`MAX_TAG_PART_BYTES`] (a name is configuration,
/// never a client's input).
pub(crate) fn check_tag_part(what: &str, text: &str) -> Result<()> {
    if text.is_empty() || text.contains(['{', '}']) {
        return Err(Error::InvalidArgument(format!(
            "{what} {text:?} must be non-empty and free of '{{' and '}}' (the name is the Redis hash tag)"
        )));
    }
    if text.contains('\0') {
        return Err(Error::InvalidArgument(format!(
            "{what} {text:?} contains NUL: use letters, digits and punctuation"
        )));
    }
    if text.len() > MAX_TAG_PART_BYTES {
        let shown: String = text.chars().take(32).collect();
        return Err(Error::InvalidArgument(format!(
            "{what} {shown:?}… is {} bytes long: use at most {MAX_TAG_PART_BYTES}",
            text.len()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_with_nul_braces_or_huge_lengths_are_refused() {
        assert!(check_tag_part("limiter name", "api-v1.login_2").is_ok());
        assert!(check_tag_part("limiter name", &"n".repeat(MAX_TAG_PART_BYTES)).is_ok());
        for (name, says) in [
            ("", "non-empty"),
            ("a{b", "'{' and '}'"),
            ("victim\0fixed", "contains NUL"),
            (&"n".repeat(MAX_TAG_PART_BYTES + 1), "is 257 bytes long: use at most 256"),
            (&"n".repeat(1 << 20), "is 1048576 bytes long"),
        ] {
            let error = check_tag_part("limiter name", name).unwrap_err();
            assert_eq!(error.code(), "EDGELIMIT_INVALID_ARGUMENT");
            let message = error.to_string();
            assert!(message.contains(says) && message.len() < 300, "{message}");
        }
    }
}
