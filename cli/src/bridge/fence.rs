//! The first fence: what a `limiter` or `readonly` token may run, decided before anything reaches Redis (the second
//! is the profile's Redis ACL user, [`super::profile`]).
//!
//! A `limiter` token runs edgelimit's own scripts only, on the server's clock, on its key patterns, refunding only
//! grants a logged member names, and writing no configuration; a `readonly` token runs the inspect script and the
//! reads of [`READS`], on the same key patterns, with the same bounds on what one command makes Redis do.
//! The reasons for each check: docs/design/bridge-fence.md.

use std::collections::HashMap;
use std::sync::LazyLock;

use edgelimit::lua;
use edgelimit::Algorithm;

use super::json::Words;
use super::key_pattern;
use super::profile::Profile;
use super::upstash_scripts::sha1_hex;

/// What one of edgelimit's scripts is, as far as the fence cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Known {
    /// One limit of this algorithm, its quota in the arguments (script `<algorithm>`).
    Single(Algorithm),
    /// Several limits, or stored quotas (script `limits`).
    Driver,
    /// Several decisions of one algorithm in one call (script `batch/<algorithm>`), on the server's clock only.
    Batch(Algorithm),
    /// Reads state, writes nothing (script `inspect`).
    Inspect,
    /// Decides a request and reserves permits (script `reserve/<algorithm>`); the time is ARGV[`time_at`].
    Reserve { algorithm: Algorithm, time_at: usize },
    /// The Redisson layout's acquire or available: decisions and reads, time in ARGV[1].
    RedissonDecision,
    /// The Redisson layout's release (permits back without a receipt) or set_rate (configuration).
    RedissonAdmin,
}

/// Every script of the crate by its SHA1.
static KNOWN: LazyLock<HashMap<&'static str, Known>> = LazyLock::new(|| {
    let mut known: HashMap<&'static str, Known> =
        Algorithm::ALL.into_iter().map(|algorithm| (algorithm.script().sha1(), Known::Single(algorithm))).collect();
    known.extend(Algorithm::ALL.map(|algorithm| (algorithm.batch_script().sha1(), Known::Batch(algorithm))));
    known.insert(lua::LIMITS.sha1(), Known::Driver);
    known.insert(lua::INSPECT.sha1(), Known::Inspect);
    let reserve = |algorithm, time_at| Known::Reserve { algorithm, time_at };
    known.insert(lua::RESERVE_GCRA.sha1(), reserve(Algorithm::Gcra, 2));
    known.insert(lua::RESERVE_FIXED_WINDOW.sha1(), reserve(Algorithm::FixedWindow, 2));
    known.insert(lua::RESERVE_SLIDING_LOG.sha1(), reserve(Algorithm::SlidingLog, 3));
    known.insert(lua::RESERVE_CONCURRENCY.sha1(), reserve(Algorithm::Concurrency, 3));
    known.insert(lua::REDISSON_ACQUIRE.sha1(), Known::RedissonDecision);
    known.insert(lua::REDISSON_AVAILABLE.sha1(), Known::RedissonDecision);
    known.insert(lua::REDISSON_RELEASE.sha1(), Known::RedissonAdmin);
    known.insert(lua::REDISSON_SET_RATE.sha1(), Known::RedissonAdmin);
    known.insert(lua::REDISSON_LIFETIME.sha1(), Known::RedissonAdmin);
    known
});

/// How every refusal begins: the word Redis uses for a command its ACL refuses, so clients classify both alike.
const NOPERM: &str = "NOPERM";

/// Why a token of `profile` may not run `words`, or `None` when it may. `limiter_keys` are the `limiter` profile's
/// key patterns (`--limiter-keys`).
pub fn refusal(profile: Profile, words: &Words, limiter_keys: &[String], max_log_limit: u64) -> Option<String> {
    let refuse = |why: String| Some(format!("{NOPERM} this token's profile ({profile}) {why}"));
    if profile == Profile::Admin {
        return None;
    }
    let name = String::from_utf8_lossy(words.first()?).to_ascii_uppercase();
    let sub = words.get(1).map(|word| String::from_utf8_lossy(word).to_ascii_uppercase());
    let script = match (name.as_str(), sub.as_deref()) {
        // Harmless, and what `edgelimit doctor` checks with. Without an argument, which Redis would echo back: a
        // token's replies stay small so they do not queue other clients' decisions on the shared connection.
        ("PING", None) | ("TIME", None) | ("SCRIPT", Some("EXISTS")) => return None,
        ("PING" | "TIME", Some(_)) => return refuse(format!("may run {name} without arguments only")),
        // A stored quota's config, which the per-identifier layout reads beside each decision (the config is in the
        // limiter's slot, the state in the identifier's, so the script cannot), and `state()` reads.
        ("HMGET", Some(_)) => return config_read_refusal(words, limiter_keys).and_then(refuse),
        ("EVALSHA" | "EVALSHA_RO", _) => words.get(1).map(|sha| known(&String::from_utf8_lossy(sha))),
        ("EVAL" | "EVAL_RO", _) => words.get(1).map(|body| known(&sha1_hex(body))),
        ("SCRIPT", Some("LOAD")) => words.get(2).map(|body| known(&sha1_hex(body))),
        _ if profile == Profile::Readonly => return read_refusal(&name, words, limiter_keys).and_then(refuse),
        _ => {
            return refuse(format!(
                "may not run {}: it runs edgelimit's scripts (EVALSHA, EVAL, SCRIPT LOAD/EXISTS), PING, TIME and \
                 HMGET of the keys it may give them only; use an admin token for anything else",
                printable(&name)
            ))
        }
    };
    // A script command too short to name its script: Redis refuses it ("wrong number of arguments").
    let script = script?;
    let Some(script) = script else {
        let which = match profile {
            Profile::Readonly => "the read-only inspect script of edgelimit's scripts",
            _ => "edgelimit's own scripts",
        };
        return refuse(format!(
            "may run only {which} (this one's SHA1 is not one of theirs); use an admin token for other scripts"
        ));
    };
    if name == "SCRIPT" {
        return match (profile, script) {
            (Profile::Readonly, Known::Inspect) | (Profile::Limiter, _) => None,
            _ => refuse("may load only the read-only inspect script".into()),
        };
    }
    let why = match (profile, script_keys_and_args(words)) {
        (Profile::Readonly, _) if script != Known::Inspect => {
            Some("may run only the read-only inspect script of edgelimit's scripts".to_owned())
        }
        // Fail closed: what the fence cannot read, it does not let through.
        (_, None) => Some("must give the script's number of keys as a count of the words that follow".to_owned()),
        (Profile::Readonly, Some((keys, _))) => key_refusal("give scripts", keys, limiter_keys),
        (_, Some((keys, args))) => {
            let args: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
            limiter_call_refusal(script, &args)
                .or_else(|| log_limit_refusal(script, keys.len(), &args, max_log_limit))
                .or_else(|| key_refusal("give scripts", keys, limiter_keys))
        }
    };
    why.and_then(refuse)
}

/// Where a read names its keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeysAt {
    /// The word after the command's name.
    First,
    /// The word after a subcommand (`MEMORY USAGE <key>`).
    Second,
    /// Every word after the name (`EXISTS`, `MGET`).
    All,
    /// None: the command lists keys, and its `MATCH` pattern must lie inside the key patterns (`SCAN`).
    Match,
}

/// The plain reads a `readonly` token may run, as Redis's ACL names them (`memory|usage` is `MEMORY USAGE`), each on
/// keys of the key patterns only: what dashboards read of strings, logs (sorted sets) and configs (hashes). Its Redis
/// user holds these commands and no other ([`super::profile::acl_rules`]); the inspect script calls some of them.
const READS: &[(&str, KeysAt)] = &[
    ("exists", KeysAt::All),
    ("mget", KeysAt::All),
    ("get", KeysAt::First),
    ("strlen", KeysAt::First),
    ("type", KeysAt::First),
    ("ttl", KeysAt::First),
    ("pttl", KeysAt::First),
    ("expiretime", KeysAt::First),
    ("pexpiretime", KeysAt::First),
    ("memory|usage", KeysAt::Second),
    ("hget", KeysAt::First),
    ("hmget", KeysAt::First),
    ("hgetall", KeysAt::First),
    ("hlen", KeysAt::First),
    ("hexists", KeysAt::First),
    ("hscan", KeysAt::First),
    ("hrandfield", KeysAt::First),
    ("zcard", KeysAt::First),
    ("zcount", KeysAt::First),
    ("zscore", KeysAt::First),
    ("zmscore", KeysAt::First),
    ("zrank", KeysAt::First),
    ("zrevrank", KeysAt::First),
    ("zrange", KeysAt::First),
    ("zrangebyscore", KeysAt::First),
    ("zrevrange", KeysAt::First),
    ("zrevrangebyscore", KeysAt::First),
    ("zscan", KeysAt::First),
    ("zrandmember", KeysAt::First),
    ("scard", KeysAt::First),
    ("sismember", KeysAt::First),
    ("sscan", KeysAt::First),
    ("srandmember", KeysAt::First),
    ("scan", KeysAt::Match),
];

/// The commands of [`READS`], as Redis's ACL names them.
pub fn read_commands() -> impl Iterator<Item = &'static str> {
    READS.iter().map(|(name, _)| *name)
}

/// Why a `readonly` token may not run the plain command `words` (named `name`, upper case), or `None`: one of
/// [`READS`], on keys of `patterns`, within the bounds of [`count_refusal`].
fn read_refusal(name: &str, words: &Words, patterns: &[String]) -> Option<String> {
    if is_script_command(name) {
        return Some(format!(
            "may not run {}: of scripts and functions it runs edgelimit's read-only inspect script only; use an \
             admin token for others",
            printable(name)
        ));
    }
    let sub = words.get(1).map(|word| word.to_ascii_lowercase());
    let read = READS.iter().find(|(acl_name, _)| match acl_name.split_once('|') {
        Some((command, subcommand)) => {
            command.eq_ignore_ascii_case(name) && sub.as_deref() == Some(subcommand.as_bytes())
        }
        None => acl_name.eq_ignore_ascii_case(name),
    });
    let Some(&(_, keys_at)) = read else {
        let instead = match name {
            "KEYS" => "list edgelimit's keys with SCAN <cursor> MATCH <a --limiter-keys pattern> COUNT 1000",
            _ => "use an admin token for anything else",
        };
        return Some(format!(
            "may not run {}: it reads keys of the bridge's --limiter-keys with the commands docs/bridge.md lists, and \
             runs edgelimit's read-only inspect script; {instead}",
            printable(name)
        ));
    };
    if let Some(why) = count_refusal(name, words) {
        return Some(why);
    }
    let keys = match keys_at {
        KeysAt::First => words.get(1..2),
        KeysAt::Second => words.get(2..3),
        KeysAt::All => words.get(1..),
        KeysAt::Match => return scan_refusal(words, patterns),
    };
    // A read too short to name its key: Redis refuses it ("wrong number of arguments").
    key_refusal("read", keys.unwrap_or_default(), patterns)
}

/// Why a `readonly` token may not run this `SCAN`, or `None`: Redis's ACL does not hold the key names a `SCAN`
/// lists, so the fence lets it list only names of one key pattern, those its `MATCH` pattern keeps.
fn scan_refusal(words: &Words, patterns: &[String]) -> Option<String> {
    let matched = (1..words.len())
        .filter(|&i| words[i].eq_ignore_ascii_case(b"MATCH"))
        .map(|i| words.get(i + 1).map(Vec::as_slice).unwrap_or_default())
        .collect::<Vec<_>>();
    // Redis uses the last MATCH given; every one must lie inside a pattern, and there must be one.
    let inside = |pattern: &[u8]| patterns.iter().any(|own| within(pattern, own.as_bytes()));
    (matched.is_empty() || !matched.iter().all(|pattern| inside(pattern))).then(|| {
        format!(
            "may SCAN only with MATCH and a pattern inside the bridge's --limiter-keys ({}), e.g. SCAN 0 MATCH {} \
             COUNT 1000; use an admin token to list other keys",
            patterns.join(" or "),
            patterns.first().map(String::as_str).unwrap_or("edgelimit:*")
        )
    })
}

/// True when every key `pattern` matches also matches `own`: the same pattern, or `own` is a plain prefix and a
/// `*` (`edgelimit:*`) and `pattern` starts with that prefix.
fn within(pattern: &[u8], own: &[u8]) -> bool {
    let prefix = own.strip_suffix(b"*").filter(|prefix| !prefix.iter().any(|b| matches!(b, b'*' | b'?')));
    pattern == own || prefix.is_some_and(|prefix| pattern.starts_with(prefix))
}

/// The largest count a readonly token may give a random read, a scan, or `MEMORY USAGE … SAMPLES`.
const MAX_READ_COUNT: u64 = 1000;

/// Why a read whose cost a count in the request sets, not the data, may not run with this count: more than
/// [`MAX_READ_COUNT`] random members (a negative count repeats them), scanned per call, or sampled (`SAMPLES 0`
/// reads every element). A count that is no number is left to Redis to refuse.
fn count_refusal(name: &str, words: &Words) -> Option<String> {
    let count = |word: Option<&Vec<u8>>| word.and_then(|word| std::str::from_utf8(word).ok()?.parse::<i128>().ok());
    let over = |word| count(word).is_some_and(|count| count.unsigned_abs() > u128::from(MAX_READ_COUNT));
    let after = |option: &'static [u8]| (1..words.len()).filter(move |&i| words[i].eq_ignore_ascii_case(option));
    let oversized = match name {
        "SRANDMEMBER" | "ZRANDMEMBER" | "HRANDFIELD" => over(words.get(2)),
        "SCAN" | "SSCAN" | "ZSCAN" | "HSCAN" => after(b"COUNT").any(|i| over(words.get(i + 1))),
        "MEMORY" => after(b"SAMPLES").any(|i| over(words.get(i + 1)) || count(words.get(i + 1)) == Some(0)),
        _ => false,
    };
    oversized.then(|| {
        let what = match name {
            "MEMORY" => "with SAMPLES from 1 to",
            _ => "with a count of at most",
        };
        format!(
            "may run {name} {what} {MAX_READ_COUNT} only (each unit is work for Redis alone); use an admin token for \
             more"
        )
    })
}

/// True for the commands that run or manage scripts and functions (any script may loop forever).
fn is_script_command(name: &str) -> bool {
    matches!(name, "EVAL" | "EVAL_RO" | "EVALSHA" | "EVALSHA_RO" | "SCRIPT" | "FCALL" | "FCALL_RO" | "FUNCTION")
}

/// Why a `limiter` token may not run `script` with `args` (its ARGV), or `None`.
fn limiter_call_refusal(script: Known, args: &[&[u8]]) -> Option<String> {
    let server_time = "must leave the time to the server's clock (an explicit time could write state far in the \
                       future or past); explicit times need an admin token";
    match script {
        // Decisions; the script takes no time or operation.
        Known::Inspect | Known::Batch(_) => None,
        Known::RedissonAdmin => Some(
            "may not release permits or set the rate of a Redisson-layout limiter (a release gives permits back \
             without a receipt); use an admin token"
                .to_owned(),
        ),
        Known::RedissonDecision => (args.first().copied().unwrap_or_default() != b"").then(|| server_time.to_owned()),
        // Reserving spends permits as decisions do.
        Known::Reserve { time_at, .. } => {
            (args.get(time_at).copied().unwrap_or_default() != b"").then(|| server_time.to_owned())
        }
        Known::Single(_) | Known::Driver => {
            // The driver's ARGV starts with the operation and the time; a single-limit script's ends with them, both
            // optional (lua/limits/single.lua).
            let (operation, time) = match script {
                Known::Single(_) => (args.get(2).copied().unwrap_or(b"limit"), args.get(3)),
                _ => (args.first().copied().unwrap_or_default(), args.get(1)),
            };
            if time.copied().unwrap_or_default() != b"" {
                return Some(server_time.to_owned());
            }
            match operation {
                b"limit" | b"peek" => None,
                b"refund" => refund_refusal(script, args),
                _ => Some("may run edgelimit's decisions only as limit, peek or refund".to_owned()),
            }
        }
    }
}

/// The default of the largest limit a `limiter` token may give a sliding log or a concurrency limit
/// (`--max-log-limit`): their state holds one entry per grant, and a decision's work grows with it, for every client
/// of the Redis (bound: docs/bridge.md).
pub const MAX_LOG_LIMIT: u64 = 1_000;

/// Why a `limiter` token may not give `script` (with `key_count` keys) a log longer than `max`, or `None`.
fn log_limit_refusal(script: Known, key_count: usize, args: &[&[u8]], max: u64) -> Option<String> {
    // The limit of a request '<permits>:<limit>:…'; what does not parse, the script refuses.
    let limit_of = |request: &[u8]| number(request.split(|&b| b == b':').nth(1).unwrap_or_default());
    let longest = match script {
        Known::Single(algorithm) | Known::Reserve { algorithm, .. } if algorithm.names_grants() => {
            args.first().map_or(0, |request| limit_of(request))
        }
        Known::Batch(algorithm) if algorithm.names_grants() => {
            args.iter().take(key_count).map(|request| limit_of(request)).max().unwrap_or(0)
        }
        Known::Driver => (driver_limits(args))
            .filter(|limit| names_grants(limit[0]))
            .map(|limit| limit.get(2).map_or(0, |limit| number(limit)))
            .max()
            .unwrap_or(0),
        _ => 0,
    };
    (longest > max).then(|| {
        format!(
            "may not give a sliding log or concurrency limit more than {max} permits (this call: {longest}, \
             --max-log-limit): their state holds one entry per grant, and each decision's work in Redis grows with it \
             for every client; store the quota with an admin token (`edgelimit configure`), or use a token bucket, \
             GCRA or a window for large limits"
        )
    })
}

/// Why a `limiter` token may not make this refund: only refunds of grants that a logged member names are safe.
fn refund_refusal(script: Known, args: &[&[u8]]) -> Option<String> {
    let names_grants = match script {
        Known::Single(algorithm) => algorithm.names_grants(),
        _ => {
            let limits = args.get(2..).unwrap_or_default();
            !limits.is_empty() && limits.len() % 6 == 0 && driver_limits(args).all(|limit| names_grants(limit[0]))
        }
    };
    (!names_grants).then(|| {
        "may refund only concurrency and sliding-log grants, whose receipts name a logged grant: other receipts \
         name a time or a window, which anyone could write, and could be refunded again and again; use an admin \
         token for those refunds"
            .to_owned()
    })
}

/// The driver's limits (lua/limits/driver.lua): six arguments each after the call's two, the algorithm's name first
/// ('' for a stored quota, whose algorithm the fence cannot see), then the permits and the limit.
fn driver_limits<'a>(args: &'a [&'a [u8]]) -> std::slice::Chunks<'a, &'a [u8]> {
    args.get(2..).unwrap_or_default().chunks(6)
}

/// Whether `name` is an algorithm whose grants are logged members (sliding log, concurrency).
fn names_grants(name: &[u8]) -> bool {
    std::str::from_utf8(name).ok().and_then(|name| name.parse::<Algorithm>().ok()).is_some_and(Algorithm::names_grants)
}

/// A whole number in decimal, or 0 when it is not one.
fn number(word: &[u8]) -> u64 {
    std::str::from_utf8(word).ok().and_then(|text| text.parse().ok()).unwrap_or(0)
}

/// A script call's KEYS and ARGV.
type KeysAndArgs<'a> = (&'a [Vec<u8>], &'a [Vec<u8>]);

/// The script's KEYS and ARGV (`EVAL <script> <numkeys> <keys…> <args…>`), or `None` when the count is not plain
/// decimal digits or exceeds the words.
fn script_keys_and_args(words: &Words) -> Option<KeysAndArgs<'_>> {
    let count = words.get(2).filter(|word| !word.is_empty() && word.iter().all(u8::is_ascii_digit))?;
    let numkeys: usize = std::str::from_utf8(count).ok()?.parse().ok()?;
    let first_arg = numkeys.checked_add(3)?;
    let keys = words.get(3..first_arg)?;
    let args = words.get(first_arg..)?;
    Some((keys, args))
}

/// Why a `limiter` or `readonly` token may not `what` (give scripts, read) `keys`: the first outside its key patterns,
/// or `None`. Neither may reach other keys; with `--redis-acl off` this is the only check that says so.
fn key_refusal(what: &str, keys: &[Vec<u8>], patterns: &[String]) -> Option<String> {
    let outside =
        keys.iter().find(|key| !patterns.iter().any(|pattern| key_pattern::matches(pattern.as_bytes(), key)))?;
    Some(format!(
        "may {what} keys matching {} only (the bridge's --limiter-keys), not {:?}; use an admin token for other keys",
        patterns.join(" or "),
        printable(&String::from_utf8_lossy(outside))
    ))
}

/// The fields of a stored quota's config that the per-identifier layout reads (`src/limit/stored_copy.rs`).
const CONFIG_FIELDS: [&[u8]; 4] = [b"algorithm", b"limit", b"interval", b"rate"];

/// Why a `limiter` or `readonly` token may not run this `HMGET`, or `None`: only a stored quota's config fields, each
/// once, of one key of its patterns (not another program's secrets, nor a field repeated to multiply the reply).
fn config_read_refusal(words: &Words, limiter_keys: &[String]) -> Option<String> {
    let fields = &words[2..];
    let known = fields.iter().all(|field| CONFIG_FIELDS.contains(&field.as_slice()));
    let distinct = (fields.iter().enumerate()).all(|(i, field)| !fields[..i].contains(field));
    if fields.is_empty() || !known || !distinct {
        return Some(
            "may HMGET only the fields of a stored quota's config (algorithm, limit, interval, rate), each once"
                .to_owned(),
        );
    }
    key_refusal("read", &words[1..2], limiter_keys)
}

/// The known script of this SHA1 (any case): `Some(None)` when it is not one of edgelimit's.
fn known(sha: &str) -> Option<Known> {
    KNOWN.get(sha.to_ascii_lowercase().as_str()).copied()
}

/// A command name as it may appear in a message: at most 40 characters, control characters escaped.
fn printable(name: &str) -> String {
    name.chars().take(40).flat_map(char::escape_debug).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(parts: &[&str]) -> Words {
        parts.iter().map(|part| part.as_bytes().to_vec()).collect()
    }

    /// The fence under the default key patterns.
    fn refusal(profile: Profile, words: &Words) -> Option<String> {
        let patterns = crate::bridge::profile::DEFAULT_LIMITER_KEYS.map(str::to_owned);
        super::refusal(profile, words, &patterns, MAX_LOG_LIMIT)
    }

    #[test]
    fn a_limiter_tokens_scripts_are_given_keys_of_its_patterns_only() {
        let fw = &lua::FIXED_WINDOW;
        for keys in [&["edgelimit:{api}:1.2.3.4"][..], &["{edgelimit:x}:value"]] {
            assert_eq!(refusal(Profile::Limiter, &evalsha(fw, keys, &["1:5:60000"])), None, "{keys:?}");
        }
        // With the ACL off nothing else keeps a script from reading or overwriting any key of the Redis.
        for keys in [&["user:2:apikey"][..], &["edgelimit:{a}:x", "session:1"], &["edgelimit"]] {
            let why = refusal(Profile::Limiter, &evalsha(fw, keys, &["1:5:60000"])).unwrap();
            assert!(why.starts_with("NOPERM") && why.contains("--limiter-keys"), "{why}");
        }
        let inspect = evalsha(&lua::INSPECT, &["user:2:apikey"], &[]);
        assert!(refusal(Profile::Limiter, &inspect).is_some());
        let custom = ["myapp:*".to_owned()];
        assert_eq!(
            super::refusal(Profile::Limiter, &evalsha(fw, &["myapp:{a}:b"], &["1:5:60000"]), &custom, MAX_LOG_LIMIT),
            None
        );
        assert!(super::refusal(
            Profile::Limiter,
            &evalsha(fw, &["edgelimit:{a}:b"], &["1:5:60000"]),
            &custom,
            MAX_LOG_LIMIT
        )
        .is_some());
        // The admin is not held to them.
        assert_eq!(refusal(Profile::Admin, &evalsha(fw, &["user:2:apikey"], &["1:5:60000"])), None);
        // A stored quota's config: one key of its patterns, read with HMGET.
        assert_eq!(
            refusal(Profile::Limiter, &words(&["HMGET", "edgelimit:{ops}", "algorithm", "limit", "interval", "rate"])),
            None
        );
        for read in [
            &["HMGET", "user:2:apikey", "rate"][..],
            &["HMGET"],
            &["HMGET", "edgelimit:{ops}"],
            &["HMGET", "edgelimit:secret", "apikey"],
            &["HMGET", "edgelimit:{ops}", "rate", "rate"],
            &["HGETALL", "edgelimit:{ops}"],
        ] {
            let why = refusal(Profile::Limiter, &words(read)).unwrap();
            assert!(why.starts_with("NOPERM"), "{read:?}: {why}");
        }
    }

    fn evalsha(script: &edgelimit::Script, keys: &[&str], args: &[&str]) -> Words {
        let mut parts = vec!["EVALSHA", script.sha1()];
        let numkeys = keys.len().to_string();
        parts.push(&numkeys);
        parts.extend(keys);
        parts.extend(args);
        words(&parts)
    }

    #[test]
    fn every_script_of_the_crate_is_known() {
        for script in lua::every_script() {
            assert!(known(script.sha1()).is_some(), "{}", script.sha1());
        }
        assert_eq!(KNOWN.len(), lua::every_script().len());
    }

    #[test]
    fn a_limiter_token_runs_decisions_at_server_time_only() {
        let tb = &lua::TOKEN_BUCKET;
        let decide = |op: &str, time: &str| evalsha(tb, &["edgelimit:{a}:x"], &["1:10:1000:1", "", op, time]);
        assert_eq!(refusal(Profile::Limiter, &decide("limit", "")), None);
        // The common call leaves the operation and the time to their defaults.
        assert_eq!(refusal(Profile::Limiter, &evalsha(tb, &["edgelimit:{a}:x"], &["1:10:1000:1"])), None);
        assert_eq!(refusal(Profile::Limiter, &evalsha(tb, &["edgelimit:{a}:x"], &["1:10:1000:1", ""])), None);
        assert_eq!(refusal(Profile::Limiter, &decide("peek", "")), None);
        let explicit = refusal(Profile::Limiter, &decide("limit", "99999999999999")).unwrap();
        assert!(explicit.starts_with("NOPERM") && explicit.contains("server's clock"), "{explicit}");
        let refund = refusal(Profile::Limiter, &decide("refund", "")).unwrap();
        assert!(refund.contains("concurrency and sliding-log"), "{refund}");
        assert!(refusal(Profile::Limiter, &decide("grant", "")).is_some());
        assert_eq!(refusal(Profile::Admin, &decide("refund", "1")), None);

        // Reserving permits: at the server's clock only, like a decision; a log's time follows its grant id.
        for (reserve, leading) in [
            (&lua::RESERVE_GCRA, &["1:10:1000:10", "5:50:200"][..]),
            (&lua::RESERVE_FIXED_WINDOW, &["1:10:1000", "5:50:200"]),
            (&lua::RESERVE_SLIDING_LOG, &["1:10:1000", "5:50:200", "id1"]),
            (&lua::RESERVE_CONCURRENCY, &["1:10:1000", "5:50:200", "id1"]),
        ] {
            let reserving = |time: &[&str]| {
                let mut args = leading.to_vec();
                args.extend(time);
                evalsha(reserve, &["edgelimit:{a}:x"], &args)
            };
            assert_eq!(refusal(Profile::Limiter, &reserving(&[])), None);
            assert_eq!(refusal(Profile::Limiter, &reserving(&[""])), None);
            let explicit = refusal(Profile::Limiter, &reserving(&["1700000000000"])).unwrap();
            assert!(explicit.contains("server's clock"), "{explicit}");
            assert!(refusal(Profile::Readonly, &reserving(&[])).is_some());
        }

        // Merged decisions: grants and denials, like a decision; a readonly token may not run them.
        let batch =
            evalsha(&lua::BATCH_FIXED_WINDOW, &["edgelimit:{a}:x", "edgelimit:{a}:y"], &["1:10:1000", "1:10:1000"]);
        assert_eq!(refusal(Profile::Limiter, &batch), None);
        assert!(refusal(Profile::Readonly, &batch).is_some());

        let conc = &lua::CONCURRENCY;
        let release = evalsha(conc, &["edgelimit:{a}:k"], &["1:10:1000", "1:5-abc", "refund", ""]);
        assert_eq!(refusal(Profile::Limiter, &release), None);
        // The same call as EVAL of the body, lowercase, and SCRIPT LOAD of it.
        let mut eval = release.clone();
        eval[0] = b"eval".to_vec();
        eval[1] = conc.source().as_bytes().to_vec();
        assert_eq!(refusal(Profile::Limiter, &eval), None);
        assert_eq!(refusal(Profile::Limiter, &words(&["script", "load", conc.source()])), None);
    }

    #[test]
    fn the_driver_refunds_only_when_every_limit_names_its_grants() {
        let limits = &lua::LIMITS;
        let keys = ["edgelimit:{a}", "edgelimit:{a}:1", "edgelimit:{b}", "edgelimit:{b}:1"];
        let call = |second: &str| {
            evalsha(
                limits,
                &keys,
                &["refund", "", "concurrency", "1", "5", "1000", "1", "1:5-a", second, "1", "5", "1000", "1", "1:5-b"],
            )
        };
        assert_eq!(refusal(Profile::Limiter, &call("sliding_log")), None);
        assert!(refusal(Profile::Limiter, &call("gcra")).is_some());
        assert!(refusal(Profile::Limiter, &call("")).is_some());
        let odd = evalsha(limits, &keys, &["refund", "", "concurrency"]);
        assert!(refusal(Profile::Limiter, &odd).is_some());
        // A key count the fence cannot read is refused, whatever Redis would make of it.
        for count in ["+1", "-1", "", "1 ", "99", "18446744073709551616"] {
            let mut acquire = evalsha(&lua::REDISSON_ACQUIRE, &["n"], &["", "1", "id"]);
            acquire[2] = count.as_bytes().to_vec();
            let why = refusal(Profile::Limiter, &acquire).unwrap_or_default();
            assert!(why.contains("number of keys"), "{count:?}: {why}");
        }
    }

    #[test]
    fn a_limiter_token_gives_logs_of_at_most_max_log_limit_permits() {
        let key = ["edgelimit:{a}:1"];
        let (at_most, above) = (MAX_LOG_LIMIT.to_string(), (MAX_LOG_LIMIT + 1).to_string());
        for algorithm in [Algorithm::SlidingLog, Algorithm::Concurrency] {
            let request = |limit: &str| format!("1:{limit}:60000");
            let single = |limit: &str| evalsha(algorithm.script(), &key, &[&request(limit), "id"]);
            assert_eq!(refusal(Profile::Limiter, &single(&at_most)), None);
            let why = refusal(Profile::Limiter, &single(&above)).unwrap();
            assert!(why.starts_with("NOPERM") && why.contains("(this call: 1001, --max-log-limit)"), "{why}");
            let keys = ["edgelimit:{a}:1", "edgelimit:{a}:2"];
            let batch = evalsha(algorithm.batch_script(), &keys, &[&request("5"), &request(&above), "i", "j"]);
            assert!(refusal(Profile::Limiter, &batch).is_some());
            let driver = |limit: &str| {
                let name = algorithm.to_string().replace('-', "_");
                evalsha(&lua::LIMITS, &keys, &["limit", "", &name, "1", limit, "60000", "1", "id"])
            };
            assert_eq!(refusal(Profile::Limiter, &driver(&at_most)), None);
            assert!(refusal(Profile::Limiter, &driver(&above)).is_some());
        }
        let reserve = evalsha(&lua::RESERVE_SLIDING_LOG, &key, &["1:1001:60000", "5:10:1000", "id", ""]);
        assert!(refusal(Profile::Limiter, &reserve).is_some());
        // Counts, not logs: any limit.
        assert_eq!(refusal(Profile::Limiter, &evalsha(&lua::FIXED_WINDOW, &key, &["1:1000000:60000"])), None);
        assert_eq!(
            super::refusal(Profile::Admin, &evalsha(&lua::SLIDING_LOG, &key, &["1:1000000:60000"]), &[], MAX_LOG_LIMIT),
            None
        );
    }

    #[test]
    fn anything_else_needs_a_stronger_token() {
        for command in [
            &["FLUSHALL"][..],
            &["SHUTDOWN"],
            &["CONFIG", "SET", "maxmemory", "1"],
            &["REPLICAOF", "127.0.0.1", "1"],
            &["KEYS", "*"],
            &["GET", "edgelimit:{a}:x"],
            &["EVAL", "while true do end", "0"],
            &["EVALSHA", "0000000000000000000000000000000000000000", "0"],
            &["SCRIPT", "FLUSH"],
            &["SCRIPT", "LOAD", "return 1"],
            &["FUNCTION", "LOAD", "x"],
            &["EVAL\0", "x"],
        ] {
            let why = refusal(Profile::Limiter, &words(command)).unwrap_or_default();
            assert!(why.starts_with("NOPERM this token's profile (limiter)"), "{command:?}: {why}");
        }
        let set_rate =
            evalsha(&lua::REDISSON_SET_RATE, &["n", "a", "b", "c", "d"], &["", "5", "1000", "0", "0", "set"]);
        assert!(refusal(Profile::Limiter, &set_rate).unwrap().contains("set the rate"));
        let acquire = evalsha(&lua::REDISSON_ACQUIRE, &["n", "a", "b", "c", "d"], &["1", "1", "id"]);
        assert!(refusal(Profile::Limiter, &acquire).unwrap().contains("server's clock"));
        // Too short to name a script: Redis says so.
        assert_eq!(refusal(Profile::Limiter, &words(&["EVAL"])), None);
        assert_eq!(refusal(Profile::Limiter, &words(&["PING"])), None);
        assert_eq!(refusal(Profile::Limiter, &words(&["time"])), None);
        // An argument Redis would echo back (a megabyte of it) is not for a limiter token.
        let echo = refusal(Profile::Limiter, &words(&["ping", "hello"])).unwrap();
        assert!(echo.contains("may run PING without arguments only"), "{echo}");
        assert!(refusal(Profile::Limiter, &words(&["TIME", "x"])).is_some());
        assert_eq!(refusal(Profile::Limiter, &Vec::new()), None);
    }

    #[test]
    fn a_readonly_token_runs_inspect_and_reads_on_its_key_patterns_only() {
        let inspect = |key: &str| evalsha(&lua::INSPECT, &[key], &["", "10", "value"]);
        assert_eq!(refusal(Profile::Readonly, &inspect("edgelimit:{api}:a")), None);
        assert_eq!(refusal(Profile::Readonly, &inspect("{edgelimit:x}:value")), None);
        for read in [
            &["GET", "edgelimit:{api}:a"][..],
            &["get", "{edgelimit:x}:value"],
            &["MGET", "edgelimit:a", "edgelimit:b"],
            &["EXISTS", "edgelimit:a"],
            &["PTTL", "edgelimit:a"],
            &["ZRANGE", "edgelimit:{api}:a", "0", "9", "WITHSCORES"],
            &["HGETALL", "{edgelimit:x}"],
            &["HMGET", "edgelimit:{ops}", "limit", "interval"],
            &["MEMORY", "USAGE", "edgelimit:a"],
            &["memory", "usage", "edgelimit:a", "SAMPLES", "1000"],
            &["SCAN", "0", "MATCH", "edgelimit:*"],
            &["SCAN", "0", "MATCH", "edgelimit:{api}:*", "COUNT", "1000", "TYPE", "zset"],
            &["scan", "0", "match", "{edgelimit:*"],
            &["PING"],
            &["TIME"],
            &["SCRIPT", "EXISTS", "abc"],
        ] {
            assert_eq!(refusal(Profile::Readonly, &words(read)), None, "{read:?}");
        }
        // Each refusal says what it may do instead.
        for (read, why) in [
            (&["GET", "user:2:apikey"][..], "may read keys matching edgelimit:* or {edgelimit:* only"),
            (&["MGET", "edgelimit:a", "session:1"], "not \"session:1\"; use an admin token"),
            (&["MEMORY", "USAGE", "user:2:apikey"], "--limiter-keys"),
            (&["HGETALL", "edgelimit"], "--limiter-keys"),
            (&["SCAN", "0"], "may SCAN only with MATCH"),
            (&["SCAN", "0", "MATCH", "*"], "SCAN 0 MATCH edgelimit:* COUNT 1000"),
            (&["SCAN", "0", "MATCH", "edgelimit*"], "may SCAN only with MATCH"),
            (&["SCAN", "0", "MATCH", "edgelimit:*", "MATCH", "*"], "may SCAN only with MATCH"),
            (&["KEYS", "edgelimit:*"], "list edgelimit's keys with SCAN"),
            (&["LRANGE", "edgelimit:a", "0", "-1"], "may not run LRANGE"),
            (&["SET", "edgelimit:a", "1"], "use an admin token"),
            (&["PING", "hello"], "may run PING without arguments only"),
            (&["ECHO", "hello"], "may not run ECHO"),
            (&["HMGET", "edgelimit:{ops}", "rate", "rate"], "each once"),
            (&["HMGET", "edgelimit:{ops}", "apikey"], "each once"),
            (&["MEMORY", "USAGE", "edgelimit:a", "SAMPLES", "0"], "SAMPLES from 1 to 1000"),
            (&["MEMORY", "USAGE", "edgelimit:a", "samples", "1001"], "SAMPLES from 1 to 1000"),
            (&["SRANDMEMBER", "edgelimit:{s}", "-100000000"], "count of at most 1000"),
            (&["ZRANDMEMBER", "edgelimit:a", "1001"], "count of at most 1000"),
            (&["HRANDFIELD", "edgelimit:a", "-1001", "WITHVALUES"], "count of at most 1000"),
            (&["HSCAN", "edgelimit:a", "0", "COUNT", "5000"], "count of at most 1000"),
            (&["SCAN", "0", "MATCH", "edgelimit:*", "count", "99999999999999999999999"], "count of at most"),
        ] {
            let refused = refusal(Profile::Readonly, &words(read)).unwrap_or_default();
            assert!(
                refused.starts_with("NOPERM this token's profile (readonly) may") && refused.contains(why),
                "{read:?}: {refused}"
            );
        }
        assert_eq!(refusal(Profile::Readonly, &words(&["SRANDMEMBER", "edgelimit:{s}", "-1000"])), None);
        // A custom pattern: its own keys, and SCAN of exactly it.
        let custom = ["myapp:?:*".to_owned()];
        let read = |parts: &[&str]| super::refusal(Profile::Readonly, &words(parts), &custom, MAX_LOG_LIMIT);
        assert_eq!(read(&["GET", "myapp:a:b"]), None);
        assert_eq!(read(&["SCAN", "0", "MATCH", "myapp:?:*"]), None);
        assert!(read(&["SCAN", "0", "MATCH", "myapp:*"]).is_some());
        assert!(read(&["GET", "edgelimit:a"]).is_some());
        for command in [
            inspect("user:2:apikey"),
            evalsha(&lua::INSPECT, &["edgelimit:a", "user:2:apikey"], &["", "10", "value", "value"]),
            evalsha(&lua::TOKEN_BUCKET, &["edgelimit:a"], &["peek", "", "1", "10", "1000", "1", ""]),
            words(&["EVAL", "while true do end", "0"]),
            words(&["FCALL_RO", "f", "0"]),
            words(&["SCRIPT", "LOAD", lua::GCRA.source()]),
        ] {
            assert!(refusal(Profile::Readonly, &command).is_some(), "{command:?}");
        }
    }

    #[test]
    fn a_scan_pattern_is_inside_a_key_pattern_only_when_every_key_it_matches_is() {
        assert!(within(b"edgelimit:*", b"edgelimit:*"));
        assert!(within(b"edgelimit:{api}:*", b"edgelimit:*"));
        assert!(within(b"edgelimit:", b"edgelimit:*"));
        assert!(within(b"edgelimit:?", b"edgelimit:*"));
        assert!(!within(b"edgelimit*", b"edgelimit:*"));
        assert!(!within(b"*edgelimit:*", b"edgelimit:*"));
        assert!(!within(b"?dgelimit:*", b"edgelimit:*"));
        assert!(!within(b"a?:b", b"a?:*"));
        assert!(within(b"a?:*", b"a?:*"));
        // `*` alone: every key.
        assert!(within(b"anything", b"*"));
    }
}
