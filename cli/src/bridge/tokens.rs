//! Bearer tokens and the profile each one grants.
//!
//! A token is given inline (`--token`, [`super::BridgeConfig::tokens`]) or in a tokens file (`--tokens-file`, or
//! `EDGELIMIT_TOKENS`), entries `<profile>:<token>` separated by newlines or blanks, `#` starting a comment:
//!
//! ```text
//! # the Workers' token: decisions only
//! limiter:9f2c…
//! readonly:0b4e…
//! admin:77d1…
//! ```
//!
//! The file is read again when it changes, so tokens rotate without a restart; a file that no longer parses is
//! reported and the tokens read before stay in force. Tokens are kept as SHA-256 digests and compared in constant
//! time against all entries, so response times reveal nothing; no token is ever logged.

use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::profile::Profile;

/// How often the tokens file is checked for changes.
pub const RELOAD_EVERY: Duration = Duration::from_secs(1);

/// The shortest token accepted: a floor against tokens typed by hand, not a strength (use e.g.
/// `openssl rand -base64 32`).
pub const MIN_TOKEN_LEN: usize = 8;

/// The longest token accepted; longer is surely a mistake (a whole file pasted).
const MAX_TOKEN_LEN: usize = 1024;

pub(super) type TokenDigest = [u8; 32];

pub(super) fn digest(token: &[u8]) -> TokenDigest {
    Sha256::digest(token).into()
}

/// Whether `authorization` (a header value) bears the token of `expected`, compared in constant time.
pub(super) fn bearer_is(expected: &TokenDigest, authorization: Option<&[u8]>) -> bool {
    authorization
        .and_then(|value| value.strip_prefix(b"Bearer "))
        .is_some_and(|token| bool::from(digest(token).ct_eq(expected)))
}

/// Which token grants which profile.
#[derive(Clone, Default)]
pub struct TokenTable {
    entries: Vec<(TokenDigest, Profile)>,
}

impl TokenTable {
    /// A table of `tokens`, each checked (see [`check_token`]).
    pub fn new<'a>(tokens: impl IntoIterator<Item = (Profile, &'a str)>) -> Result<TokenTable, String> {
        let mut table = TokenTable::default();
        for (profile, token) in tokens {
            check_token(token)?;
            table.add(digest(token.as_bytes()), profile)?;
        }
        Ok(table)
    }

    /// Adds one entry, unless its token is in the table already: which profile it grants would be a guess.
    fn add(&mut self, token: TokenDigest, profile: Profile) -> Result<(), String> {
        if let Some((_, first)) = self.entries.iter().find(|(listed, _)| *listed == token) {
            return Err(format!(
                "a token is listed twice (as {first} and as {profile}): each token must grant one profile"
            ));
        }
        self.entries.push((token, profile));
        Ok(())
    }

    /// Parses the tokens file format (see the module's docs); `origin` names the text in errors.
    pub fn parse(text: &str, origin: &str) -> Result<TokenTable, String> {
        let entries = entries(text, origin)?;
        TokenTable::new(entries.iter().map(|(profile, token)| (*profile, token.as_str())))
            .map_err(|e| format!("{origin}: {e}"))
    }

    /// Adds the entries of `other`, none of whose tokens may be in this table.
    pub fn extend(&mut self, other: TokenTable) -> Result<(), String> {
        other.entries.into_iter().try_for_each(|(token, profile)| self.add(token, profile))
    }

    /// The profiles that some token grants, each once.
    pub fn profiles(&self) -> Vec<Profile> {
        let mut profiles: Vec<Profile> = self.entries.iter().map(|(_, profile)| *profile).collect();
        profiles.sort();
        profiles.dedup();
        profiles
    }

    /// The profile of the bearer token in an `Authorization` header value, or `None`. Every entry is compared, in
    /// constant time.
    pub fn profile_of(&self, authorization: Option<&[u8]>) -> Option<Profile> {
        self.caller_of(authorization).map(|(profile, _)| profile)
    }

    /// [`TokenTable::profile_of`], with the token's digest: what tells one token's requests from another's.
    pub fn caller_of(&self, authorization: Option<&[u8]>) -> Option<(Profile, TokenDigest)> {
        let presented = digest(authorization?.strip_prefix(b"Bearer ")?);
        let mut found = None;
        for (expected, profile) in &self.entries {
            if bool::from(presented.ct_eq(expected)) {
                found = Some(*profile);
            }
        }
        Some((found?, presented))
    }
}

impl std::fmt::Debug for TokenTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TokenTable({} tokens, redacted)", self.entries.len())
    }
}

/// The entries of a text in the tokens file format, each checked; `origin` names the text in errors, which never show
/// a token.
pub fn entries(text: &str, origin: &str) -> Result<Vec<(Profile, String)>, String> {
    let mut tokens: Vec<(Profile, String)> = Vec::new();
    let mut lines: Vec<usize> = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or_default();
        for entry in line.split_whitespace() {
            let at = || format!("{origin}, line {}", number + 1);
            let (profile, token) = entry.split_once(':').ok_or_else(|| {
                format!("{}: an entry is <profile>:<token> (profiles: {}), got one without ':'", at(), Profile::NAMES)
            })?;
            let profile = profile.parse::<Profile>().map_err(|e| format!("{}: {e}", at()))?;
            check_token(token).map_err(|e| format!("{}: {e}", at()))?;
            if let Some(first) = tokens.iter().position(|(_, listed)| listed == token) {
                return Err(format!(
                    "{origin}, lines {} and {}: a token is listed twice (as {} and as {profile}): each token must \
                     grant one profile",
                    lines[first],
                    number + 1,
                    tokens[first].0
                ));
            }
            tokens.push((profile, token.to_owned()));
            lines.push(number + 1);
        }
    }
    Ok(tokens)
}

/// Refuses a token too short to be secret, too long to be meant, or with anything but printable ASCII (a header
/// could not carry it).
pub fn check_token(token: &str) -> Result<(), String> {
    if token.len() < MIN_TOKEN_LEN || token.len() > MAX_TOKEN_LEN {
        return Err(format!(
            "a token must be {MIN_TOKEN_LEN} to {MAX_TOKEN_LEN} characters long (got {}); make one with \
             `openssl rand -base64 32`",
            token.len()
        ));
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) || token.contains('#') {
        return Err("a token may hold only printable ASCII without blanks or '#' (e.g. base64 or hex)".into());
    }
    Ok(())
}

/// The tokens in force: the inline ones plus, when there is a tokens file, what it held when last read.
#[derive(Debug)]
pub struct Tokens {
    inline: TokenTable,
    file: Option<PathBuf>,
    current: RwLock<Arc<TokenTable>>,
    /// The digest of the file's text when last read, to notice a change.
    seen: RwLock<Option<TokenDigest>>,
}

impl Tokens {
    /// The inline tokens and those of `file` (read now: a missing or invalid file is an error at start-up).
    pub fn load(inline: TokenTable, file: Option<PathBuf>) -> Result<Tokens, String> {
        let tokens = Tokens { current: RwLock::new(Arc::new(inline.clone())), inline, file, seen: RwLock::new(None) };
        tokens.reload()?;
        if tokens.table().entries.is_empty() {
            return Err("the bridge needs at least one token: pass --token (an admin token) or --tokens-file, or set \
                 EDGELIMIT_TOKEN"
                .into());
        }
        Ok(tokens)
    }

    /// The table in force.
    pub fn table(&self) -> Arc<TokenTable> {
        self.current.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Reads the tokens file again if it changed since last read. On an error the table in force stays.
    pub fn reload(&self) -> Result<(), String> {
        let Some(path) = &self.file else {
            return Ok(());
        };
        // The text's digest, not mtime and length, tells a change: a rotation may keep both (`cp -p`, a coarse clock).
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the tokens file {}: {e}", path.display()))?;
        let text_digest = digest(text.as_bytes());
        if *self.seen.read().unwrap_or_else(|e| e.into_inner()) == Some(text_digest) {
            return Ok(());
        }
        let origin = path.display().to_string();
        let mut table = self.inline.clone();
        table.extend(TokenTable::parse(&text, &origin)?).map_err(|e| format!("{origin} and --token/--tokens: {e}"))?;
        if table.entries.is_empty() {
            return Err(format!("the tokens file {origin} holds no token, and no --token or --tokens is given"));
        }
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(table);
        *self.seen.write().unwrap_or_else(|e| e.into_inner()) = Some(text_digest);
        Ok(())
    }

    /// Checks the tokens file for changes every [`RELOAD_EVERY`], for as long as the bridge runs.
    pub async fn keep_reloading(self: Arc<Self>) {
        if self.file.is_none() {
            return;
        }
        let mut reported = None;
        loop {
            tokio::time::sleep(RELOAD_EVERY).await;
            // On the blocking pool: a file system may stall, and the request workers are few (`crate::runtime`).
            let tokens = self.clone();
            let reloaded = tokio::task::spawn_blocking(move || tokens.reload())
                .await
                .unwrap_or_else(|e| Err(format!("reading the tokens file failed: {e}")));
            match reloaded {
                Ok(()) => reported = None,
                // Said once per distinct problem, not every second.
                Err(e) if reported.as_ref() != Some(&e) => {
                    eprintln!("edgelimit bridge: WARNING: {e}; the tokens read before stay in force");
                    reported = Some(e);
                }
                Err(_) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITER: &str = "limiter-token-0123456789";
    const ADMIN: &str = "admin-token-0123456789";

    #[test]
    fn each_token_grants_its_profile_and_nothing_else_is_accepted() {
        let table =
            TokenTable::parse(&format!("# comment\nlimiter:{LIMITER}  # the Workers\n\nadmin:{ADMIN}\n"), "tokens")
                .unwrap();
        assert_eq!(table.profile_of(Some(format!("Bearer {LIMITER}").as_bytes())), Some(Profile::Limiter));
        assert_eq!(table.profile_of(Some(format!("Bearer {ADMIN}").as_bytes())), Some(Profile::Admin));
        for wrong in [
            format!("Bearer {LIMITER} "),
            format!("bearer {LIMITER}"),
            LIMITER.to_owned(),
            format!("Bearer {}", &LIMITER[1..]),
            "Bearer ".to_owned(),
        ] {
            assert_eq!(table.profile_of(Some(wrong.as_bytes())), None, "{wrong}");
        }
        assert_eq!(table.profile_of(None), None);
        assert_eq!(table.profiles(), vec![Profile::Limiter, Profile::Admin]);
    }

    #[test]
    fn a_bad_entry_is_refused_with_its_line_and_never_shows_the_token() {
        for (text, expected) in [
            ("limiter", "without ':'"),
            ("root:0123456789abcdef0", "profile"),
            ("limiter:short", "8 to 1024"),
            ("limiter:0123456789abcdef\u{7f}", "printable ASCII"),
        ] {
            let err = TokenTable::parse(&format!("\n{text}"), "t.txt").unwrap_err();
            assert!(err.starts_with("t.txt, line 2: "), "{err}");
            assert!(err.contains(expected), "{err}");
            assert!(!err.contains("0123456789abcdef"), "{err}");
        }
        assert!(check_token(&"x".repeat(1 << 20)).is_err());
        assert!(check_token("0123456789abcdef\0").is_err());
    }

    #[test]
    fn a_rotation_is_noticed_by_the_files_text_whatever_its_time_and_length() {
        let path = std::env::temp_dir().join(format!("edgelimit-tokens-rotation-{}", std::process::id()));
        let old = "limiter:limiter-OLD-token-1\n";
        let new = "limiter:limiter-NEW-token-2\n";
        std::fs::write(&path, old).unwrap();
        let tokens = Tokens::load(TokenTable::parse("", "inline").unwrap(), Some(path.clone())).unwrap();
        let bearer = |token: &str| format!("Bearer {token}").into_bytes();
        assert!(tokens.table().profile_of(Some(&bearer("limiter-OLD-token-1"))).is_some());
        // Same length, written at once (often within one tick of the file's clock): its text tells it apart.
        std::fs::write(&path, new).unwrap();
        tokens.reload().unwrap();
        std::fs::remove_file(&path).unwrap();
        assert!(tokens.table().profile_of(Some(&bearer("limiter-OLD-token-1"))).is_none());
        assert!(tokens.table().profile_of(Some(&bearer("limiter-NEW-token-2"))).is_some());
    }

    #[test]
    fn a_token_listed_twice_is_refused_whatever_its_profiles() {
        let twice = format!("limiter:{LIMITER}\n# the same again\nadmin:{LIMITER}\n");
        let refusal = TokenTable::parse(&twice, "tokens").unwrap_err();
        assert_eq!(
            refusal,
            "tokens, lines 1 and 3: a token is listed twice (as limiter and as admin): each token must grant one \
             profile"
        );
        assert!(!refusal.contains(LIMITER));
        let mut inline = TokenTable::new([(Profile::Admin, ADMIN)]).unwrap();
        assert!(inline.extend(TokenTable::new([(Profile::Limiter, ADMIN)]).unwrap()).is_err());
    }

    #[test]
    fn a_tokens_file_emptied_while_the_bridge_runs_leaves_the_tokens_before_in_force() {
        let path = std::env::temp_dir().join(format!("edgelimit-tokens-emptied-{}", std::process::id()));
        std::fs::write(&path, format!("admin:{ADMIN}\n")).unwrap();
        let tokens = Tokens::load(TokenTable::default(), Some(path.clone())).unwrap();
        std::fs::write(&path, "# all gone\n").unwrap();
        let refusal = tokens.reload().unwrap_err();
        std::fs::remove_file(&path).unwrap();
        assert!(refusal.contains("holds no token"), "{refusal}");
        let bearer = format!("Bearer {ADMIN}").into_bytes();
        assert_eq!(tokens.table().profile_of(Some(&bearer)), Some(Profile::Admin));
    }
}
