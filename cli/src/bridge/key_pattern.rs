//! The `limiter` profile's key patterns (`--limiter-keys`) as the fence matches a script's keys: `*` any bytes, `?`
//! any one byte, every other byte itself. They are also the ACL user's `~pattern`s, so both fences must read them as
//! Redis does: no crate matches Redis's globs byte for byte, and patterns with other syntax are refused at start.

/// Why `pattern` cannot be a `--limiter-keys` pattern, or `None`: printable ASCII without blanks (an ACL rule's
/// word), with no syntax but `*` and `?`.
pub fn problem(pattern: &str) -> Option<&'static str> {
    if pattern.is_empty() || !pattern.bytes().all(|b| b.is_ascii_graphic()) {
        return Some("a key pattern must be non-empty printable ASCII without blanks, e.g. 'myapp:*'");
    }
    pattern
        .bytes()
        .any(|b| matches!(b, b'[' | b']' | b'\\'))
        .then_some("key patterns take * and ? only (no [..] classes or \\ escapes), e.g. 'myapp:*'")
}

/// True when `key` matches `pattern`. At worst linear in the lengths' product: a `*` backtracks only to the last one.
pub fn matches(pattern: &[u8], key: &[u8]) -> bool {
    let (mut p, mut k) = (0, 0);
    // The last `*` seen, and the key position its match ends at so far.
    let mut star: Option<(usize, usize)> = None;
    while k < key.len() {
        match pattern.get(p) {
            Some(b'*') => {
                star = Some((p, k));
                p += 1;
            }
            Some(&byte) if byte == b'?' || byte == key[k] => {
                p += 1;
                k += 1;
            }
            _ => match star {
                // Let the last `*` take one byte more, and match the rest of the pattern from there.
                Some((at, end)) => {
                    star = Some((at, end + 1));
                    p = at + 1;
                    k = end + 1;
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&b| b == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stars_and_question_marks_match_as_redis_globs_do() {
        let yes = |pattern: &str, key: &str| assert!(matches(pattern.as_bytes(), key.as_bytes()), "{pattern} {key}");
        let no = |pattern: &str, key: &str| assert!(!matches(pattern.as_bytes(), key.as_bytes()), "{pattern} {key}");
        yes("edgelimit:*", "edgelimit:{api}:1.2.3.4");
        yes("edgelimit:*", "edgelimit:");
        yes("{edgelimit:*", "{edgelimit:x}:value");
        yes("*", "");
        yes("a*b*c", "axxbyyc");
        yes("a*b*c", "abcbc");
        yes("a?c", "abc");
        yes("**a", "a");
        yes("", "");
        no("edgelimit:*", "user:2:apikey");
        no("edgelimit:*", "edgelimit");
        no("{edgelimit:*", "edgelimit:x");
        no("a?c", "ac");
        no("a*b*c", "axxbyy");
        no("", "a");
        no("abc", "abcd");
        // Bytes, not characters: a key may be any bytes.
        assert!(matches(b"k:*", b"k:\xff\x00"));
        assert!(!matches(b"k:?", b"k:\xff\x00"));
    }

    #[test]
    fn redis_glob_syntax_beyond_stars_and_blanks_are_refused() {
        assert_eq!(problem("edgelimit:*"), None);
        assert_eq!(problem("a?b"), None);
        for pattern in ["k[ab]", "k]", "k\\*", "", "a b", "k\u{7f}", "é*"] {
            assert!(problem(pattern).is_some(), "{pattern}");
        }
    }
}
