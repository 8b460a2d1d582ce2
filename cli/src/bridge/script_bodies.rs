//! The bodies of the scripts the bridge has seen, by SHA1, so that an `EVALSHA` a cluster node answers `NOSCRIPT`
//! (a replica promoted after failover never got `SCRIPT LOAD`) can be loaded there and sent again
//! ([`super::cluster`]). Bodies are kept as Redis runs them (after [`super::shebang`]'s rewrite). `NOSCRIPT` proves
//! the script did not run, so resending cannot run it twice.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::json::Words;
use super::upstash_scripts::sha1_hex;

/// The most bytes of other scripts' bodies kept; past that, the seen ones are forgotten (edgelimit's are kept).
const MAX_BYTES: usize = 16 << 20;

/// Script bodies by the lowercase hex SHA1 of their text.
pub struct ScriptBodies {
    own: HashMap<&'static str, &'static str>,
    seen: Mutex<Seen>,
}

#[derive(Default)]
struct Seen {
    bodies: HashMap<String, Arc<Vec<u8>>>,
    bytes: usize,
}

impl Default for ScriptBodies {
    fn default() -> Self {
        ScriptBodies {
            own: edgelimit::lua::every_script().into_iter().map(|script| (script.sha1(), script.source())).collect(),
            seen: Mutex::default(),
        }
    }
}

impl ScriptBodies {
    /// Remembers the body of an `EVAL` / `EVAL_RO` / `SCRIPT LOAD` among `words` (as sent to Redis).
    pub fn learn(&self, words: &Words) {
        let Some(name) = words.first() else { return };
        let body = if name.eq_ignore_ascii_case(b"EVAL") || name.eq_ignore_ascii_case(b"EVAL_RO") {
            words.get(1)
        } else if name.eq_ignore_ascii_case(b"SCRIPT") && words.get(1).is_some_and(|w| w.eq_ignore_ascii_case(b"LOAD"))
        {
            words.get(2)
        } else {
            None
        };
        let Some(body) = body else { return };
        let sha = sha1_hex(body);
        if self.own.contains_key(sha.as_str()) || body.len() > MAX_BYTES {
            return;
        }
        let mut seen = self.seen();
        if seen.bodies.contains_key(&sha) {
            return;
        }
        if seen.bytes + body.len() > MAX_BYTES {
            *seen = Seen::default();
        }
        seen.bytes += body.len();
        seen.bodies.insert(sha, Arc::new(body.clone()));
    }

    /// The body an `EVALSHA` / `EVALSHA_RO` in `words` names, when known.
    pub fn body_for(&self, words: &Words) -> Option<Arc<Vec<u8>>> {
        let name = words.first()?;
        if !(name.eq_ignore_ascii_case(b"EVALSHA") || name.eq_ignore_ascii_case(b"EVALSHA_RO")) {
            return None;
        }
        let sha = String::from_utf8_lossy(words.get(1)?).to_ascii_lowercase();
        if let Some(body) = self.own.get(sha.as_str()) {
            return Some(Arc::new(body.as_bytes().to_vec()));
        }
        self.seen().bodies.get(&sha).cloned()
    }

    /// The map, even after a panic elsewhere while it was held: each change leaves it consistent.
    fn seen(&self) -> MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn knows_edgelimits_scripts_and_the_ones_it_saw() {
        let bodies = ScriptBodies::default();
        let gcra = &edgelimit::lua::GCRA;
        let evalsha = |sha: &str| vec![b"evalsha".to_vec(), sha.as_bytes().to_vec(), b"0".to_vec()];
        assert_eq!(
            bodies.body_for(&evalsha(&gcra.sha1().to_ascii_uppercase())).as_deref(),
            Some(&gcra.source().as_bytes().to_vec())
        );
        let other = sha1_hex(b"return 7");
        assert!(bodies.body_for(&evalsha(&other)).is_none());
        bodies.learn(&vec![b"SCRIPT".to_vec(), b"load".to_vec(), b"return 7".to_vec()]);
        assert_eq!(bodies.body_for(&evalsha(&other)).as_deref(), Some(&b"return 7".to_vec()));
        bodies.learn(&vec![b"EVAL".to_vec()]);
        assert!(bodies.body_for(&vec![b"EVALSHA".to_vec()]).is_none());
    }
}
