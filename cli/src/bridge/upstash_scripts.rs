//! Running scripts written for Upstash on stock Redis.
//!
//! Upstash's clients may start a script with `#!lua flags=allow-key-locking`, which stock Redis rejects, so the
//! bridge strips it. The client will send `EVALSHA <sha of the original>`, so the bridge remembers which SHA1 Redis
//! knows the rewritten script by; after a restart, `NOSCRIPT` makes the client `EVAL` again and the pair is relearnt.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::json::Words;

/// Flags Upstash accepts that stock Redis does not know.
const UPSTASH_ONLY_FLAGS: &[&str] = &["allow-key-locking"];

/// Forget everything past this many scripts; a forgotten pair only costs a `NOSCRIPT` and one `EVAL`.
const MAX_REMEMBERED: usize = 10_000;

/// The SHA1 translations learnt from rewritten scripts.
#[derive(Debug, Default)]
pub struct ScriptAliases {
    /// original SHA1 (what the client computed) -> SHA1 of the text Redis actually cached.
    redis_sha_of: Mutex<HashMap<String, String>>,
}

/// The script text with Upstash-only flags removed, or `None` when it needs no change.
pub fn strip_upstash_flags(script: &[u8]) -> Option<Vec<u8>> {
    // The first line without its LF; a CR stays with the rest, so the body stays byte for byte the same. Checked
    // slicing only: no script can panic here.
    let line = script.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let body = script.get(line.len()..)?;
    let first_line = std::str::from_utf8(line).ok()?;
    let rest = first_line.strip_prefix("#!lua")?;
    let mut kept_options = Vec::new();
    let mut changed = false;
    for option in rest.split_whitespace() {
        match option.strip_prefix("flags=") {
            Some(flags) => {
                let kept: Vec<&str> = flags.split(',').filter(|flag| !UPSTASH_ONLY_FLAGS.contains(flag)).collect();
                changed |= kept.len() != flags.split(',').count();
                if !kept.is_empty() {
                    kept_options.push(format!("flags={}", kept.join(",")));
                }
            }
            None => kept_options.push(option.to_owned()),
        }
    }
    if !changed {
        return None;
    }
    let mut shebang = String::from("#!lua");
    for option in kept_options {
        shebang.push(' ');
        shebang.push_str(&option);
    }
    let mut rewritten = shebang.into_bytes();
    rewritten.extend_from_slice(body);
    Some(rewritten)
}

/// The SHA1 of a script's text as Redis names it: 40 lowercase hex digits.
pub(super) fn sha1_hex(bytes: &[u8]) -> String {
    sha1_smol::Sha1::from(bytes).digest().to_string()
}

impl ScriptAliases {
    /// Rewrites the script-carrying commands (EVAL, EVALSHA, their `_RO` forms, SCRIPT LOAD/EXISTS) in place; for a
    /// `SCRIPT LOAD` of a rewritten script, returns the client's SHA1, which the reply must name. A command too short
    /// is left for Redis to refuse (`get_mut` only: no request can panic here).
    pub fn rewrite(&self, words: &mut Words) -> Option<String> {
        let name = String::from_utf8_lossy(words.first()?).to_ascii_uppercase();
        let sub = words.get(1).map(|w| String::from_utf8_lossy(w).to_ascii_uppercase());
        match (name.as_str(), sub.as_deref()) {
            ("EVAL" | "EVAL_RO", _) => {
                self.learn(words.get_mut(1)?);
                None
            }
            ("EVALSHA" | "EVALSHA_RO", _) => {
                self.translate(words.get_mut(1)?);
                None
            }
            ("SCRIPT", Some("LOAD")) => self.learn(words.get_mut(2)?),
            ("SCRIPT", Some("EXISTS")) => {
                words.iter_mut().skip(2).for_each(|sha| self.translate(sha));
                None
            }
            _ => None,
        }
    }

    /// Replaces an Upstash-flagged script with its stock-Redis form and remembers the SHA1 pair.
    fn learn(&self, script: &mut Vec<u8>) -> Option<String> {
        let rewritten = strip_upstash_flags(script)?;
        let original_sha = sha1_hex(script);
        let mut aliases = self.aliases();
        if aliases.len() >= MAX_REMEMBERED {
            aliases.clear();
        }
        aliases.insert(original_sha.clone(), sha1_hex(&rewritten));
        *script = rewritten;
        Some(original_sha)
    }

    fn translate(&self, sha: &mut Vec<u8>) {
        let key = String::from_utf8_lossy(sha).to_ascii_lowercase();
        if let Some(redis_sha) = self.aliases().get(&key) {
            *sha = redis_sha.clone().into_bytes();
        }
    }

    /// The map, even after a panic elsewhere held the lock: each change is one `clear` or `insert`, so it is still
    /// consistent, and refusing it would fail every later script command.
    fn aliases(&self) -> MutexGuard<'_, HashMap<String, String>> {
        self.redis_sha_of.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_only_upstash_flags_and_keeps_the_body_byte_for_byte() {
        let script = b"#!lua flags=allow-key-locking\nreturn 1\n";
        assert_eq!(strip_upstash_flags(script).unwrap(), b"#!lua\nreturn 1\n");
        let script = b"#!lua flags=no-writes,allow-key-locking\r\nreturn 1";
        assert_eq!(strip_upstash_flags(script).unwrap(), b"#!lua flags=no-writes\r\nreturn 1");
        assert_eq!(strip_upstash_flags(b"#!lua flags=no-writes\nreturn 1"), None);
        assert_eq!(strip_upstash_flags(b"return 1"), None);
        for odd in [&b""[..], b"\n", b"\r", b"\r\n", b"#!lua", b"#!lua flags=allow-key-locking", b"#!lua\xff\r\n"] {
            let _ = strip_upstash_flags(odd);
        }
        assert_eq!(strip_upstash_flags(b"#!lua flags=allow-key-locking").unwrap(), b"#!lua");
    }

    #[test]
    fn evalsha_of_the_original_text_reaches_the_rewritten_script() {
        let aliases = ScriptAliases::default();
        let original = b"#!lua flags=allow-key-locking\nreturn 1".to_vec();
        let mut eval = vec![b"EVAL".to_vec(), original.clone(), b"0".to_vec()];
        assert_eq!(aliases.rewrite(&mut eval), None);
        assert_eq!(eval[1], b"#!lua\nreturn 1");

        let mut evalsha = vec![b"evalsha".to_vec(), sha1_hex(&original).into_bytes(), b"0".to_vec()];
        aliases.rewrite(&mut evalsha);
        assert_eq!(evalsha[1], sha1_hex(b"#!lua\nreturn 1").into_bytes());

        let mut load = vec![b"SCRIPT".to_vec(), b"load".to_vec(), original.clone()];
        assert_eq!(aliases.rewrite(&mut load), Some(sha1_hex(&original)));
    }
}
