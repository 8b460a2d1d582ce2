//! Redis Cluster hash slots: which keys a single script may touch together.

use crate::error::{Error, Result};

/// Checks a limiter name (or key prefix) that goes into a key's hash tag `{…}`: non-empty and free of braces, which
/// would end the tag early and scatter a limiter's keys over several slots.
pub(crate) fn check_tag_part(what: &str, text: &str) -> Result<()> {
    if text.is_empty() || text.contains(['{', '}']) {
        return Err(Error::InvalidArgument(format!(
            "{what} {text:?} must be non-empty and free of '{{' and '}}' (the name is the Redis hash tag)"
        )));
    }
    Ok(())
}

/// The hash slot of `key` (0..16384): CRC16 (XMODEM) of its hash tag, the text between the first `{` and the next
/// `}` when that is non-empty, else of the whole key.
pub fn hash_slot(key: &str) -> u16 {
    let bytes = key.as_bytes();
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
    fn matches_redis_cluster_keyslot() {
        // Values from `CLUSTER KEYSLOT` and the Redis Cluster specification (CRC16 of "123456789" is 0x31C3).
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(hash_slot("foo"), 12182);
        assert_eq!(hash_slot("{user1000}.following"), hash_slot("user1000"));
        assert_eq!(hash_slot("foo{}{bar}"), hash_slot("foo{}{bar}"));
        assert_ne!(hash_slot("foo{}{bar}"), hash_slot("bar"));
        assert_eq!(hash_slot("foo{{bar}}zap"), hash_slot("{bar"));
    }
}
