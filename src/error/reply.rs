//! Redis error replies, read the same way whichever Redis version wrote them: the script wrapper removed, then
//! classified by Redis's error code word (the reply's first word: `WRONGTYPE`, `READONLY`, `ERR`, …).
//!
//! Redis wraps an error raised inside a script with the script's SHA1 and Lua location, and the wording changed
//! between versions (both captured from real servers, see the tests below):
//!
//! - Redis 7: `WRONGTYPE Operation against … value script: <sha1>, on @user_script:161.`
//! - Redis 6: `ERR Error running script (call to f_<sha1>): @user_script:161: WRONGTYPE Operation against …`
//!
//! Neither the SHA1 nor the location helps a caller (and they leak the script's internals), so [`ErrorReply`] keeps
//! only the code word and the words Redis or the script wrote.

use std::fmt;

/// A Redis error reply with the script wrapper removed: its code word (`WRONGTYPE`, `ERR`, …) and what Redis or the
/// script said. Never carries a script's SHA1 or a Lua location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorReply {
    text: String,
}

/// What an error reply means for the caller (see [`crate::Error`] for the variant each becomes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReplyKind {
    /// The store cannot serve now but will: it is loading, busy with a script, failing over, or the cluster is down.
    Unavailable,
    /// The store is up but refuses writes until an operator acts (a read-only replica, maxmemory, a failed save).
    Degraded,
    /// The endpoint's user or topology is wrong: ACL permissions, authentication, a cluster redirect.
    Configuration,
    /// An edgelimit script refused one of its arguments (`ERR edgelimit: invalid …`).
    ScriptArgument,
    /// A key holds something edgelimit did not write: another type, or a grant id already logged.
    ForeignState,
    /// Anything else, `NOSCRIPT` included (the script runner handles that one itself).
    Unknown,
}

/// The start of every argument error an edgelimit script raises (`reject` in `lua/common.lua`).
const SCRIPT_ARGUMENT: &str = "ERR edgelimit: invalid ";
/// The start of the scripts' error for a grant id that is already logged (`LOGGED_ID` in `lua/limits/zset_log.lua`):
/// the log already holds a grant under that id, which only a foreign writer or a reused id can cause.
const REUSED_GRANT_ID: &str = "ERR edgelimit: invalid grant id (already logged";
/// Redis 7's wording of NOPERM for a command called from inside a script.
const NOPERM_IN_SCRIPT: &str = "ERR The user executing the script can't run this command";

impl ErrorReply {
    /// Reads the text of an error reply, removing the script wrapper of Redis 6 or 7 when there is one.
    pub fn parse(raw: &str) -> ErrorReply {
        let unwrapped = strip_lua_location(strip_redis7_wrapper(strip_redis6_wrapper(raw.trim())));
        // A Lua runtime error under Redis 6 has no code word of its own once unwrapped: Redis calls it ERR.
        let text = if code_word(unwrapped).is_some() {
            unwrapped.to_owned()
        } else {
            format!("ERR {unwrapped}")
        };
        ErrorReply { text }
    }

    /// Redis's error code word: `WRONGTYPE`, `READONLY`, `NOSCRIPT`, `ERR`, ….
    pub fn word(&self) -> &str {
        code_word(&self.text).unwrap_or("ERR")
    }

    /// The whole reply as Redis or the script wrote it, code word first, without wrapper.
    pub fn text(&self) -> &str {
        &self.text
    }

    pub(crate) fn kind(&self) -> ReplyKind {
        match self.word() {
            "LOADING" | "BUSY" | "MASTERDOWN" | "TRYAGAIN" | "CLUSTERDOWN" => ReplyKind::Unavailable,
            // OOM: with the required `maxmemory-policy noeviction`, Redis refuses a script's first write and so
            // the whole decision (a script that has not written cannot write later in the same call): nothing was
            // decided, exactly like an outage, and only an operator can end it. So it is absorbable like an
            // outage, with a code of its own that the Worker logs as a health warning.
            "READONLY" | "OOM" | "MISCONF" => ReplyKind::Degraded,
            "NOPERM" | "NOAUTH" | "WRONGPASS" | "MOVED" | "ASK" | "CROSSSLOT" => ReplyKind::Configuration,
            "WRONGTYPE" => ReplyKind::ForeignState,
            "ERR" if self.text.starts_with(REUSED_GRANT_ID) => ReplyKind::ForeignState,
            "ERR" if self.text.starts_with(SCRIPT_ARGUMENT) => ReplyKind::ScriptArgument,
            "ERR" if self.text.starts_with(NOPERM_IN_SCRIPT) => ReplyKind::Configuration,
            _ => ReplyKind::Unknown,
        }
    }

    /// What an operator should do about a [`ReplyKind::Degraded`] reply.
    pub(crate) fn degraded_advice(&self) -> &'static str {
        match self.word() {
            "READONLY" => {
                "the endpoint reaches a read-only replica: a failover is in progress (it ends by itself), or the \
                 endpoint is pointed at a replica instead of the primary"
            }
            "OOM" => {
                "Redis is at maxmemory and refuses writes: raise maxmemory or free memory (and keep \
                 maxmemory-policy noeviction, which edgelimit requires)"
            }
            _ => "Redis refuses writes until an operator acts: see the Redis log (e.g. a failed RDB save)",
        }
    }
}

impl fmt::Display for ErrorReply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::error::Error for ErrorReply {}

/// The reply's first word when it is a Redis error code (capitals, at least two).
fn code_word(text: &str) -> Option<&str> {
    let word = text.split(' ').next().unwrap_or("");
    (word.len() >= 2 && word.bytes().all(|b| b.is_ascii_uppercase())).then_some(word)
}

/// `ERR Error running script (call to f_<sha1>): <inner>` (Redis 6 and older) → `<inner>`.
fn strip_redis6_wrapper(text: &str) -> &str {
    let Some(rest) = text.strip_prefix("ERR Error running script (call to f_") else {
        return text;
    };
    match rest.split_once("): ") {
        Some((sha, inner)) if is_sha1(sha) => inner.trim(),
        _ => text,
    }
}

/// `<inner> script: <sha1>, on @user_script:161.` (Redis 7) → `<inner>`.
fn strip_redis7_wrapper(text: &str) -> &str {
    let Some((inner, wrapper)) = text.rsplit_once(" script: ") else {
        return text;
    };
    let sha = wrapper.get(..40).unwrap_or("");
    if is_sha1(sha) && wrapper[40..].starts_with(", on @") && wrapper.ends_with('.') {
        inner
    } else {
        text
    }
}

/// Removes a Lua location (`@user_script:161: ` or `user_script:161: `) at the start or right after `ERR `; the
/// caller puts back `ERR ` when what remains has no code word of its own.
fn strip_lua_location(text: &str) -> &str {
    let body = text.strip_prefix("ERR ").unwrap_or(text);
    let Some(after) = body.trim_start_matches('@').strip_prefix("user_script:") else {
        return text;
    };
    let digits = after.bytes().take_while(u8::is_ascii_digit).count();
    match after[digits..].strip_prefix(": ") {
        Some(rest) if digits > 0 => rest,
        _ => text,
    }
}

fn is_sha1(text: &str) -> bool {
    text.len() == 40 && text.bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Replies captured from redis-server 7.0.15 (Debian), the version the tests run on.
    const REDIS7: [(&str, &str, ReplyKind); 10] = [
        (
            "WRONGTYPE Operation against a key holding the wrong kind of value script: \
             fd1f62702330c26137b50b4d8f15f201f6699d84, on @user_script:1.",
            "WRONGTYPE Operation against a key holding the wrong kind of value",
            ReplyKind::ForeignState,
        ),
        (
            "ERR edgelimit: invalid limit: -5 script: 6a9bf3d6d98139e929169784358c7e6ef7263b6a, on @user_script:161.",
            "ERR edgelimit: invalid limit: -5",
            ReplyKind::ScriptArgument,
        ),
        (
            "ERR edgelimit: invalid grant id (already logged; use a fresh random id): 00ff00ff00ff00ff script: \
             6a9bf3d6d98139e929169784358c7e6ef7263b6a, on @user_script:76.",
            "ERR edgelimit: invalid grant id (already logged; use a fresh random id): 00ff00ff00ff00ff",
            ReplyKind::ForeignState,
        ),
        (
            "ERR user_script:1: attempt to index local 'x' (a nil value) script: \
             cf0efd7895bbde8aab6ffbb44ec6bca4bd5ef4c3, on @user_script:1.",
            "ERR attempt to index local 'x' (a nil value)",
            ReplyKind::Unknown,
        ),
        (
            "READONLY You can't write against a read only replica. script: \
             6073e39a450839486e7efc128db0b8ebeaaa0d07, on @user_script:1.",
            "READONLY You can't write against a read only replica.",
            ReplyKind::Degraded,
        ),
        (
            "OOM command not allowed when used memory > 'maxmemory'. script: \
             6073e39a450839486e7efc128db0b8ebeaaa0d07, on @user_script:1.",
            "OOM command not allowed when used memory > 'maxmemory'.",
            ReplyKind::Degraded,
        ),
        (
            "ERR The user executing the script can't run this command or subcommand script: \
             2248ea7f1064bd8a19bac4fad179cb7f74bc361a, on @user_script:1.",
            "ERR The user executing the script can't run this command or subcommand",
            ReplyKind::Configuration,
        ),
        (
            "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.",
            "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.",
            ReplyKind::Unavailable,
        ),
        (
            "NOPERM this user has no permissions to run the 'evalsha' command",
            "NOPERM this user has no permissions to run the 'evalsha' command",
            ReplyKind::Configuration,
        ),
        (
            "NOSCRIPT No matching script. Please use EVAL.",
            "NOSCRIPT No matching script. Please use EVAL.",
            ReplyKind::Unknown,
        ),
    ];

    /// Redis 6 words a script's error `ERR Error running script (call to f_<sha1>): @user_script:<line>: <error>`.
    const REDIS6: [(&str, &str, ReplyKind); 3] = [
        (
            "ERR Error running script (call to f_fd1f62702330c26137b50b4d8f15f201f6699d84): @user_script:161: \
             WRONGTYPE Operation against a key holding the wrong kind of value ",
            "WRONGTYPE Operation against a key holding the wrong kind of value",
            ReplyKind::ForeignState,
        ),
        (
            "ERR Error running script (call to f_fd1f62702330c26137b50b4d8f15f201f6699d84): @user_script:3: \
             READONLY You can't write against a read only replica.",
            "READONLY You can't write against a read only replica.",
            ReplyKind::Degraded,
        ),
        (
            "ERR Error running script (call to f_cf0efd7895bbde8aab6ffbb44ec6bca4bd5ef4c3): user_script:1: attempt \
             to index local 'x' (a nil value)",
            "ERR attempt to index local 'x' (a nil value)",
            ReplyKind::Unknown,
        ),
    ];

    #[test]
    fn script_wrappers_of_redis_6_and_7_are_removed_and_the_code_word_decides() {
        for (raw, text, kind) in REDIS7.iter().chain(&REDIS6) {
            let reply = ErrorReply::parse(raw);
            assert_eq!(reply.text(), *text, "{raw}");
            assert_eq!(reply.kind(), *kind, "{raw}");
            assert!(
                !reply.text().contains("user_script") && !reply.text().contains("f_"),
                "{raw}"
            );
        }
    }

    #[test]
    fn every_listed_code_word_has_its_kind() {
        let cases = [
            ("LOADING Redis is loading the dataset in memory", ReplyKind::Unavailable),
            (
                "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
                ReplyKind::Unavailable,
            ),
            (
                "TRYAGAIN Multiple keys request during rehashing of slot",
                ReplyKind::Unavailable,
            ),
            ("CLUSTERDOWN The cluster is down", ReplyKind::Unavailable),
            (
                "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk.",
                ReplyKind::Degraded,
            ),
            ("NOAUTH Authentication required.", ReplyKind::Configuration),
            (
                "WRONGPASS invalid username-password pair or user is disabled.",
                ReplyKind::Configuration,
            ),
            ("MOVED 3999 127.0.0.1:6381", ReplyKind::Configuration),
            ("ASK 3999 127.0.0.1:6381", ReplyKind::Configuration),
            (
                "CROSSSLOT Keys in request don't hash to the same slot",
                ReplyKind::Configuration,
            ),
            ("ERR unknown command 'FOO'", ReplyKind::Unknown),
            ("BUSYKEY Target key name already exists.", ReplyKind::Unknown),
            ("", ReplyKind::Unknown),
        ];
        for (raw, kind) in cases {
            assert_eq!(ErrorReply::parse(raw).kind(), kind, "{raw}");
        }
    }

    #[test]
    fn look_alike_wrappers_and_odd_texts_are_kept_whole() {
        // Not a SHA1: the text is the caller's (e.g. a rejected value), not Redis's wrapper.
        let odd = "ERR edgelimit: invalid lease: x script: nothex, on @user_script:1.";
        assert_eq!(ErrorReply::parse(odd).text(), odd);
        assert_eq!(
            ErrorReply::parse("ERR Error running script (call to f_x): y").text(),
            "ERR Error running script (call to f_x): y"
        );
        assert_eq!(ErrorReply::parse("lowercase text").text(), "ERR lowercase text");
        assert_eq!(ErrorReply::parse("").word(), "ERR");
        assert_eq!(ErrorReply::parse("ERR user_script:: x").text(), "ERR user_script:: x");
        // Multi-byte text never splits a character.
        let wide = format!("ERR {} script: {}", "é".repeat(30), "ü".repeat(30));
        assert_eq!(ErrorReply::parse(&wide).text(), wide);
    }
}
