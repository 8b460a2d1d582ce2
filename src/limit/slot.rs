//! Redis Cluster hash slots: which keys a single script may touch together.

use crate::error::{Error, Result};

/// The longest limiter name or key prefix, in bytes: names are chosen by operators, not by clients, and every key
/// of every decision carries them.
pub(crate) const MAX_TAG_PART_BYTES: usize = 256;

/// Checks a limiter name (or key prefix) that goes into a key's hash tag `{…}`: non-empty and free of braces, which
/// would end the tag early and scatter a limiter's keys over several slots; free of NUL and at most
/// [`MAX_TAG_PART_BYTES`] long, since a name is configuration, never a client's input (identifiers are that, and
/// any identifier works: see [`crate::identifier`]).
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

/// The hash slot of `key` (0..16384): CRC16 (XMODEM) of its hash tag, the text between the first `{` and the next
/// `}` when that is non-empty, else of the whole key. Keys are bytes to Redis: any bytes, UTF-8 or not (the REST
/// bridge routes whatever keys its clients send).
pub fn hash_slot(key: impl AsRef<[u8]>) -> u16 {
    let bytes = key.as_ref();
    let tagged = bytes.iter().position(|&b| b == b'{').and_then(|open| {
        let rest = &bytes[open + 1..];
        let close = rest.iter().position(|&b| b == b'}')?;
        (close > 0).then(|| &rest[..close])
    });
    crc16(tagged.unwrap_or(bytes)) % 16384
}

fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in bytes {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
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
            (
                &"n".repeat(MAX_TAG_PART_BYTES + 1),
                "is 257 bytes long: use at most 256",
            ),
            (&"n".repeat(1 << 20), "is 1048576 bytes long"),
        ] {
            let error = check_tag_part("limiter name", name).unwrap_err();
            assert_eq!(error.code(), "EDGELIMIT_INVALID_ARGUMENT");
            let message = error.to_string();
            assert!(message.contains(says) && message.len() < 300, "{message}");
        }
    }

    #[test]
    fn matches_redis_cluster_keyslot() {
        // Values from `CLUSTER KEYSLOT` and the Redis Cluster specification (CRC16 of "123456789" is 0x31C3).
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(hash_slot("foo"), 12182);
        assert_eq!(hash_slot("{user1000}.following"), hash_slot("user1000"));
        assert_eq!(hash_slot("foo{}{bar}"), hash_slot("foo{}{bar}"));
        assert_ne!(hash_slot("foo{}{bar}"), hash_slot("bar"));
        assert_eq!(hash_slot("foo{{bar}}zap"), hash_slot("{bar"));
        assert_eq!(hash_slot(b"\xff{\xfe}x"), hash_slot([0xfe_u8]));
    }
}
