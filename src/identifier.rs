//! Identifiers: who a limit counts (an IP, an API key, a user), keyed by their exact bytes.
//!
//! Two different identifiers never share a key. Text of at most [`MAX_RAW_BYTES`] bytes not starting with `#` is its
//! own key part; anything else is `#` and the SHA-256 of a domain separator and its exact bytes. A JS string with
//! lone surrogates is hashed as WTF-8 under another domain.

use std::borrow::Cow;
use std::fmt;

use sha2::{Digest, Sha256};

/// The longest identifier, in bytes of UTF-8, that is its own key part; longer ones are hashed.
pub const MAX_RAW_BYTES: usize = 200;

/// What starts a hashed key part; a raw one never starts with it.
const HASHED: char = '#';

/// Domain separators: text and WTF-8 never hash alike, even when their bytes are the same.
const TEXT_DOMAIN: &[u8] = b"edgelimit identifier, text\0";
const WTF8_DOMAIN: &[u8] = b"edgelimit identifier, wtf-8\0";

/// An identifier, as the key part it is stored under (see the module's docs): from text with `From<&str>` (so
/// `"203.0.113.7"` works as it is), or from a JS string's code units with [`Identifier::from_utf16`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Identifier<'a>(Cow<'a, str>);

impl<'a> Identifier<'a> {
    /// The part of the state key that names this identifier.
    pub fn key_part(&self) -> &str {
        &self.0
    }

    /// An owned copy, to keep beyond the text it was made from.
    pub fn into_owned(self) -> Identifier<'static> {
        Identifier(Cow::Owned(self.0.into_owned()))
    }
}

impl Identifier<'static> {
    /// The identifier a JS string names, from its UTF-16 code units: valid text is text, and a string with lone
    /// surrogates is keyed by its WTF-8 bytes.
    pub fn from_utf16(units: &[u16]) -> Identifier<'static> {
        match String::from_utf16(units) {
            Ok(text) => Identifier::from(text.as_str()).into_owned(),
            Err(_) => Identifier(Cow::Owned(hashed(WTF8_DOMAIN, &wtf8(units)))),
        }
    }
}

impl<'a> From<&'a str> for Identifier<'a> {
    fn from(text: &'a str) -> Identifier<'a> {
        if text.len() <= MAX_RAW_BYTES && !text.starts_with(HASHED) {
            Identifier(Cow::Borrowed(text))
        } else {
            Identifier(Cow::Owned(hashed(TEXT_DOMAIN, text.as_bytes())))
        }
    }
}

impl<'a> From<&'a String> for Identifier<'a> {
    fn from(text: &'a String) -> Identifier<'a> {
        Identifier::from(text.as_str())
    }
}

impl<'a, 'b> From<&'b Identifier<'a>> for Identifier<'b> {
    fn from(identifier: &'b Identifier<'a>) -> Identifier<'b> {
        Identifier(Cow::Borrowed(identifier.key_part()))
    }
}

impl fmt::Display for Identifier<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.key_part())
    }
}

/// The hashed key part of `text`, for layouts that cannot take some raw text (see [`crate::limit::KeyLayout`]).
pub(crate) fn hashed_text(text: &str) -> String {
    hashed(TEXT_DOMAIN, text.as_bytes())
}

/// `#` and the SHA-256 of `domain` and `bytes`, in lowercase hex.
fn hashed(domain: &[u8], bytes: &[u8]) -> String {
    let digest = Sha256::new().chain_update(domain).chain_update(bytes).finalize();
    format!("{HASHED}{digest:x}")
}

/// WTF-8: UTF-8, except that a lone surrogate is encoded as the 3 bytes UTF-8 would give its code point.
fn wtf8(units: &[u16]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(units.len() * 3);
    for unit in char::decode_utf16(units.iter().copied()) {
        match unit {
            Ok(c) => bytes.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
            // A surrogate is 0xED 0xA0..0xBF 0x80..0xBF.
            Err(lone) => {
                let unit = lone.unpaired_surrogate();
                bytes.extend([
                    0xE0 | (unit >> 12) as u8,
                    0x80 | ((unit >> 6) & 0x3F) as u8,
                    0x80 | (unit & 0x3F) as u8,
                ]);
            }
        }
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(text: &str) -> String {
        Identifier::from(text).key_part().to_owned()
    }

    fn is_hashed(key: &str) -> bool {
        key.len() == 65
            && key.starts_with('#')
            && key[1..].bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    }

    #[test]
    fn short_text_is_its_own_key_part_and_anything_else_is_hashed() {
        for raw in ["", "203.0.113.7", "a\0b", "ключ", &"x".repeat(MAX_RAW_BYTES)] {
            assert_eq!(key(raw), raw);
        }
        for hashed in [&"x".repeat(MAX_RAW_BYTES + 1), "#", "#abc", &"A".repeat(1 << 20)] {
            assert!(is_hashed(&key(hashed)), "{hashed:.20}");
        }
        // An identifier equal to another's hashed form is hashed itself: they never share a key.
        let long = key(&"x".repeat(300));
        assert_ne!(key(&long), long);
        assert!(is_hashed(&key(&long)));
    }

    #[test]
    fn hashes_are_sha256_of_the_domain_and_the_exact_bytes() {
        // printf 'edgelimit identifier, text\0#' | sha256sum
        assert_eq!(key("#"), "#fc26ca2d1d13f2d672e8bde1638d40028b8f62ff3387d047f4772e8a2d558fcf");
    }

    #[test]
    fn lone_surrogates_are_kept_distinct() {
        let [high, low, replacement] = [[0xD800], [0xDC00], [0xFFFD]].map(|units| Identifier::from_utf16(&units));
        assert_eq!(replacement.key_part(), "\u{FFFD}");
        assert!(is_hashed(high.key_part()) && is_hashed(low.key_part()));
        assert_ne!(high, low);
        // Valid UTF-16 is the same identifier as the same text from Rust.
        let text: Vec<u16> = "203.0.113.7".encode_utf16().collect();
        assert_eq!(Identifier::from_utf16(&text), Identifier::from("203.0.113.7"));
        // WTF-8 of a lone surrogate is the 3 bytes of its code point; its key is not the text domain's of them.
        assert_eq!(wtf8(&[0x61, 0xD800, 0x62]), [0x61, 0xED, 0xA0, 0x80, 0x62]);
        assert_eq!(wtf8(&[0xD83D, 0xDE00]), "😀".as_bytes());
        assert_ne!(high.key_part(), hashed(TEXT_DOMAIN, &[0xED, 0xA0, 0x80]));
    }
}
