//! Which node of a Redis Cluster a command goes to: the hash slot of its keys ([`edgelimit::limit::hash_slot`]).
//!
//! The redis crate's routing table is private to its cluster client, which the bridge does not use. Where a
//! command's keys are unknown, its first argument is taken as the key: a wrong guess is answered `MOVED` (or
//! `CROSSSLOT`) and never runs, so it costs a round trip, never a wrong result.

use edgelimit::limit::hash_slot;

use super::json::Words;

/// Where a command goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// The master of this slot.
    Slot(u16),
    /// Any master: the command names no key (`PING`, `TIME`, `SCRIPT EXISTS`, a script of no keys).
    AnyMaster,
    /// Every master, one reply for all: commands on each node's own state (`SCRIPT LOAD`, `FLUSHALL`) or counting
    /// over all (`DBSIZE`, `KEYS`).
    EveryMaster(Combine),
}

/// How the replies of every master make one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Combine {
    /// Every master answered alike (`OK`, the SHA1 of a loaded script): the first reply.
    Same,
    /// The sum of integers (`DBSIZE`).
    Sum,
    /// The arrays one after another (`KEYS`).
    Concat,
}

/// The error Redis gives for keys in different slots, with what to do, as the bridge answers it before sending.
pub const CROSSSLOT: &str = "CROSSSLOT Keys in request don't hash to the same slot";

/// Where `words` goes, or `CROSSSLOT` when its keys lie in different slots (no one node could run it).
pub fn route(words: &Words) -> Result<Route, String> {
    let Some(name) = words.first() else {
        return Ok(Route::AnyMaster);
    };
    let name = name.to_ascii_uppercase();
    let sub = words.get(1).map(|word| word.to_ascii_uppercase());
    let every = |combine| Ok(Route::EveryMaster(combine));
    match (name.as_slice(), sub.as_deref()) {
        (b"SCRIPT", Some(b"LOAD" | b"FLUSH"))
        | (b"FUNCTION", Some(b"LOAD" | b"DELETE" | b"FLUSH" | b"RESTORE"))
        | (b"FLUSHALL" | b"FLUSHDB", _) => return every(Combine::Same),
        (b"DBSIZE", _) => return every(Combine::Sum),
        (b"KEYS", _) => return every(Combine::Concat),
        _ => {}
    }
    let keys = keys(&name, sub.as_deref(), words);
    let mut slots = keys.iter().map(hash_slot);
    let Some(first) = slots.next() else {
        return Ok(Route::AnyMaster);
    };
    if slots.any(|slot| slot != first) {
        return Err(format!(
            "{CROSSSLOT}: on a Redis Cluster every key of one command must share a hash slot (put the part that \
             must match in braces, a hash tag: {{user42}}:a and {{user42}}:b share one)"
        ));
    }
    Ok(Route::Slot(first))
}

/// The slot of one transaction's commands (`None` when none names a key), or `CROSSSLOT`: a transaction runs on one
/// node.
pub fn transaction_slot(commands: &[&Words]) -> Result<Option<u16>, String> {
    let mut slot = None;
    for (i, words) in commands.iter().enumerate() {
        if let Route::Slot(this) = route(words).map_err(|e| format!("command {i}: {e}"))? {
            if slot.is_some_and(|first| first != this) {
                return Err(format!(
                    "{CROSSSLOT}: /multi-exec on a Redis Cluster runs on one node, so every key of the transaction \
                     must share a hash slot (command {i}'s keys do not share the earlier commands' slot); use a hash \
                     tag, e.g. {{user42}}:a and {{user42}}:b, or send the commands with /pipeline"
                ));
            }
            slot = Some(this);
        }
    }
    Ok(slot)
}

/// The keys of a command the bridge knows how to find (all for scripts and common multi-key commands, else the
/// first); empty for commands without keys.
fn keys<'a>(name: &[u8], sub: Option<&[u8]>, words: &'a Words) -> Vec<&'a [u8]> {
    let from = |start: usize| words.get(start..).unwrap_or_default();
    let one = |at: usize| words.get(at).map(Vec::as_slice).into_iter().collect::<Vec<_>>();
    // `<name> <numkeys> <key>…` counted from the word at `count_at`.
    let counted = |count_at: usize| -> Vec<&'a [u8]> {
        let count = words
            .get(count_at)
            .and_then(|word| std::str::from_utf8(word).ok())
            .and_then(|text| text.parse::<usize>().ok())
            .unwrap_or(0);
        from(count_at + 1).iter().take(count).map(Vec::as_slice).collect()
    };
    match (name, sub) {
        (b"EVAL" | b"EVALSHA" | b"EVAL_RO" | b"EVALSHA_RO" | b"FCALL" | b"FCALL_RO", _) => counted(2),
        (b"ZINTER" | b"ZUNION" | b"ZDIFF" | b"ZINTERCARD" | b"SINTERCARD" | b"LMPOP" | b"ZMPOP", _) => counted(1),
        (b"MGET" | b"DEL" | b"EXISTS" | b"UNLINK" | b"TOUCH" | b"SDIFF" | b"SINTER" | b"SUNION" | b"PFCOUNT", _) => {
            from(1).iter().map(Vec::as_slice).collect()
        }
        (b"MSET" | b"MSETNX", _) => from(1).iter().step_by(2).map(Vec::as_slice).collect(),
        (b"XREAD" | b"XREADGROUP", _) => {
            let streams = words.iter().position(|word| word.eq_ignore_ascii_case(b"STREAMS"));
            streams.map(|at| one(at + 1)).unwrap_or_default()
        }
        (b"OBJECT" | b"MEMORY" | b"XINFO" | b"XGROUP", Some(_)) | (b"BITOP", _) => one(2),
        (
            b"PING" | b"ECHO" | b"TIME" | b"INFO" | b"SCRIPT" | b"FUNCTION" | b"CONFIG" | b"COMMAND" | b"CLUSTER"
            | b"ACL" | b"LASTSAVE" | b"RANDOMKEY" | b"SCAN" | b"PUBLISH" | b"PUBSUB" | b"SLOWLOG" | b"LATENCY"
            | b"MEMORY" | b"LOLWUT" | b"ROLE" | b"DEBUG" | b"SAVE" | b"BGSAVE" | b"BGREWRITEAOF",
            _,
        ) => Vec::new(),
        _ => one(1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Words {
        text.split(' ').map(|word| word.as_bytes().to_vec()).collect()
    }

    #[test]
    fn routes_by_the_first_key_scripts_by_their_declared_keys() {
        assert_eq!(route(&words("GET foo")), Ok(Route::Slot(12182)));
        assert_eq!(route(&words("set {foo}x 1")), Ok(Route::Slot(12182)));
        assert_eq!(route(&words("EVALSHA abc 2 {u}a {u}b arg")), Ok(Route::Slot(hash_slot("u"))));
        assert_eq!(route(&words("EVALSHA abc 0 arg")), Ok(Route::AnyMaster));
        assert_eq!(route(&words("PING")), Ok(Route::AnyMaster));
        assert_eq!(route(&words("SCRIPT EXISTS abc")), Ok(Route::AnyMaster));
        assert_eq!(route(&words("script load x")), Ok(Route::EveryMaster(Combine::Same)));
        assert_eq!(route(&words("XREAD COUNT 1 STREAMS s 0")), Ok(Route::Slot(hash_slot("s"))));
        assert_eq!(route(&words("OBJECT ENCODING k")), Ok(Route::Slot(hash_slot("k"))));
        assert_eq!(route(&words("MSET {a}1 x {a}2 y")), Ok(Route::Slot(hash_slot("a"))));
    }

    #[test]
    fn keys_in_different_slots_are_crossslot_and_odd_input_never_panics() {
        assert!(route(&words("MGET a b")).unwrap_err().starts_with(CROSSSLOT));
        assert!(route(&words("EVAL x 2 a b")).unwrap_err().starts_with(CROSSSLOT));
        // A key count past the words, not a number, or huge: the keys that are there.
        for odd in ["EVAL x 99 a", "EVAL x -1 a", "EVAL x 18446744073709551616 a", "EVAL", "MSET", "XREAD STREAMS"] {
            let _ = route(&words(odd));
        }
        assert_eq!(route(&Vec::new()), Ok(Route::AnyMaster));
        let a = words("SET {t}a 1");
        let b = words("GET {t}b");
        let c = words("GET other");
        assert_eq!(transaction_slot(&[&a, &b]), Ok(Some(hash_slot("t"))));
        assert!(transaction_slot(&[&a, &c]).unwrap_err().contains("command 1"));
        assert_eq!(transaction_slot(&[&words("PING")]), Ok(None));
    }

    #[test]
    fn any_words_route_without_panicking() {
        // A fixed pseudo-random stream of short commands, their names drawn from the ones the table knows.
        let names = ["EVAL", "EVALSHA", "ZUNION", "MSET", "XREAD", "OBJECT", "BITOP", "GET", "SCRIPT", "MGET", "x"];
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..20_000 {
            let mut command: Words = vec![names[(next() % names.len() as u64) as usize].as_bytes().to_vec()];
            for _ in 0..next() % 6 {
                let word = match next() % 4 {
                    0 => (next() % 5).to_string().into_bytes(),
                    1 => b"STREAMS".to_vec(),
                    2 => vec![b'{', (next() % 256) as u8, b'}'],
                    _ => (0..next() % 4).map(|_| (next() % 256) as u8).collect(),
                };
                command.push(word);
            }
            let _ = route(&command);
            let _ = transaction_slot(&[&command, &command]);
        }
    }
}
