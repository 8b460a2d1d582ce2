//! Key layouts: where a limit's state lives (see [`KeyLayout`]).

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};
use crate::identifier::Identifier;

/// Where a limit's state lives, and so which keys share a Redis Cluster slot (the hash tag between `{` and `}`).
///
/// | layout | state key | one slot holds | spreads over masters |
/// |---|---|---|---|
/// | [`KeyLayout::PerLimiter`] (1, default) | `<prefix>:{<name>}:<id>` | every identifier of one limiter | no |
/// | [`KeyLayout::PerIdentifier`] (2) | `<prefix>:v2{<id>}:<name>` | every limiter of one identifier | yes |
///
/// In the per-identifier layout a stored config lives in another slot than the state, so the client keeps a copy
/// and a change reaches it one decision late (`stored_copy.rs`).
///
/// The two layouts never read each other's keys: prefixes and names hold no brace, so a key's first `{` follows `:`
/// in layout 1 and `v2` in layout 2. Switching a limiter's layout starts its identifiers afresh. Identifiers that are
/// empty or hold a brace are hashed in layout 2, so one identifier's limits stay in one slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum KeyLayout {
    /// Layout 1: `<prefix>:{<name>}:<id>`, tagged by the limiter's name. The default.
    #[default]
    PerLimiter,
    /// Layout 2: `<prefix>:v2{<id>}:<name>`, tagged by the identifier, for Redis Cluster.
    PerIdentifier,
}

impl KeyLayout {
    /// The state key of `id` under the limiter `name` with keys under `prefix` (both checked brace-free).
    pub(crate) fn state_key(self, prefix: &str, name: &str, id: &Identifier<'_>) -> String {
        match self {
            KeyLayout::PerLimiter => format!("{prefix}:{{{name}}}:{}", id.key_part()),
            KeyLayout::PerIdentifier => format!("{prefix}:v2{{{}}}:{name}", tag_safe(id)),
        }
    }

    /// The spelling of the JS options and the Worker's `EDGELIMIT_LAYOUT`: `per-limiter`, `per-identifier`.
    pub fn as_str(self) -> &'static str {
        match self {
            KeyLayout::PerLimiter => "per-limiter",
            KeyLayout::PerIdentifier => "per-identifier",
        }
    }
}

impl FromStr for KeyLayout {
    type Err = Error;

    fn from_str(text: &str) -> Result<KeyLayout> {
        match text {
            "per-limiter" => Ok(KeyLayout::PerLimiter),
            "per-identifier" => Ok(KeyLayout::PerIdentifier),
            other => Err(Error::InvalidConfig(format!(
                "layout must be \"per-limiter\" (one Redis, the default) or \"per-identifier\" (Redis Cluster: \
                 keys tagged by identifier), got {:?}",
                other.chars().take(64).collect::<String>()
            ))),
        }
    }
}

impl fmt::Display for KeyLayout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The identifier's key part, hashed when it holds a brace or is empty (`{}` is no tag: Redis would hash the whole
/// key).
fn tag_safe<'a>(id: &'a Identifier<'_>) -> Cow<'a, str> {
    let part = id.key_part();
    if part.is_empty() || part.contains(['{', '}']) {
        Cow::Owned(crate::identifier::hashed_text(part))
    } else {
        Cow::Borrowed(part)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limit::hash_slot;

    #[test]
    fn keys_of_each_layout() {
        let id = Identifier::from("203.0.113.7");
        assert_eq!(KeyLayout::PerLimiter.state_key("edgelimit", "api", &id), "edgelimit:{api}:203.0.113.7");
        assert_eq!(KeyLayout::PerIdentifier.state_key("edgelimit", "api", &id), "edgelimit:v2{203.0.113.7}:api");
    }

    #[test]
    fn per_identifier_keys_of_one_identifier_share_a_slot_even_with_braces() {
        for text in ["203.0.113.7", "}", "{", "a}b", "{x}", "", "#", &"x".repeat(500)] {
            let id = Identifier::from(text);
            let key = |name| KeyLayout::PerIdentifier.state_key("edgelimit", name, &id);
            assert_eq!(hash_slot(key("a")), hash_slot(key("b/other")), "{text:?}");
            let tag_start = key("a").find('{').unwrap();
            assert!(!key("a")[tag_start + 1..].starts_with('}'), "empty tag for {text:?}");
        }
        // A braced identifier is hashed, so it differs from every raw one.
        assert_ne!(
            KeyLayout::PerIdentifier.state_key("p", "n", &Identifier::from("a}b")),
            KeyLayout::PerIdentifier.state_key("p", "n", &Identifier::from("ab"))
        );
    }

    #[test]
    fn names_parse_and_print() {
        for layout in [KeyLayout::PerLimiter, KeyLayout::PerIdentifier] {
            assert_eq!(layout.as_str().parse::<KeyLayout>().unwrap(), layout);
        }
        let error = "cluster\0".parse::<KeyLayout>().unwrap_err();
        assert_eq!(error.code(), "EDGELIMIT_INVALID_CONFIG");
        assert!(error.to_string().contains("per-identifier"), "{error}");
    }
}
