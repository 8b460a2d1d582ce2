//! Commands the bridge refuses, and why.
//!
//! Every REST request shares one multiplexed Redis connection, so commands that change the connection's state
//! (MULTI, SELECT, SUBSCRIBE, …) or block it (BLPOP, WAIT, …) would leak into or stall other clients' requests.
//! Upstash refuses them too; `/multi-exec` is the way to a transaction.

/// The reason `words` may not run over the shared connection, or `None` when it may.
pub fn refusal(words: &[Vec<u8>]) -> Option<String> {
    let name = String::from_utf8_lossy(words.first()?).to_ascii_uppercase();
    let why = match name.as_str() {
        "MULTI" | "EXEC" | "DISCARD" | "WATCH" | "UNWATCH" => "transactions go through POST /multi-exec",
        "SUBSCRIBE" | "PSUBSCRIBE" | "SSUBSCRIBE" | "UNSUBSCRIBE" | "PUNSUBSCRIBE" | "SUNSUBSCRIBE" | "MONITOR" => {
            "it would turn the shared connection into a push stream"
        }
        "SYNC" | "PSYNC" | "REPLCONF" => "it would turn the shared connection into a replica's replication stream",
        "SELECT" | "SWAPDB" | "AUTH" | "HELLO" | "RESET" | "QUIT" | "CLIENT" => {
            "it would change the state of a connection that all clients share"
        }
        "BLPOP" | "BRPOP" | "BLMOVE" | "BRPOPLPUSH" | "BLMPOP" | "BZPOPMIN" | "BZPOPMAX" | "BZMPOP" | "WAIT"
        | "WAITAOF" => "it blocks, and would stall every other request on the shared connection",
        "XREAD" | "XREADGROUP" if words.iter().any(|word| word.eq_ignore_ascii_case(b"BLOCK")) => {
            "BLOCK would stall every other request on the shared connection"
        }
        _ => return None,
    };
    Some(format!("ERR {name} is not allowed over the REST bridge: {why}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<Vec<u8>> {
        text.split(' ').map(|w| w.as_bytes().to_vec()).collect()
    }

    #[test]
    fn refuses_connection_state_and_blocking_commands_only() {
        assert!(refusal(&words("multi")).unwrap().contains("/multi-exec"));
        assert!(refusal(&words("BLPOP q 0")).is_some());
        assert!(refusal(&words("psync ? -1")).unwrap().contains("replication"));
        assert!(refusal(&words("XREAD BLOCK 0 STREAMS s $")).is_some());
        assert!(refusal(&words("XREAD COUNT 1 STREAMS s 0")).is_none());
        assert!(refusal(&words("EVALSHA abc 0")).is_none());
        assert!(refusal(&[]).is_none());
    }
}
