//! Merged decisions: the common calls (one limit whose quota is in code, decided on the server's clock) that
//! concurrent callers make through one limiter and its clones within one turn of the executor run as one call of
//! `lua/batch/<algorithm>.lua`: one `EVALSHA` and one `TIME` for all of them. Each caller still gets its own decision,
//! exactly as alone: the script decides them one after the other, each on the state the ones before it left.
//!
//! Why: what a call costs Redis besides its decision (the call itself, reading its arguments, `TIME`) is most of a
//! single call for the cheap algorithms (`bench/instructions.mjs`: a script that only calls `INCR` costs 16.4K
//! instructions, with `TIME` 24.0K, of a fixed window's 51K). The client's coalescing (`src/rest/coalesce.rs`)
//! already sends the turn's commands as one HTTP request; this makes a limiter's decisions in it one command.
//!
//! How: as coalescing does. The first decision of a turn starts a flush task, which yields once and then takes every
//! decision queued by then. One decision alone runs its single-limit script, exactly as without merging. Decisions
//! on keys of different cluster slots go as separate calls (one script may touch only one slot), and so do more
//! decisions than one call holds (`MAX_DECISIONS_PER_CALL`), in the same turn, so the client still sends them
//! together. Merging is on exactly when the client coalesces
//! (`RestClient::without_coalescing` turns both off).
//!
//! Partial failure: a call that fails as a whole (timeout, transport, HTTP error) fails each of its decisions with
//! the same error, as each would have failed alone, and none is taken as granted. But a call Redis refused as one
//! of several keys in a slot being migrated (`TRYAGAIN`: nothing ran) is sent again as one call per decision, which
//! Redis serves at any point of the move: that refusal lasts as long as the move, a whole limiter's slot in the
//! per-limiter layout, and each of its decisions had otherwise been "store unavailable", which a fail-open policy
//! admits (review: up to 5 grants on a limit of 3 during a reshard). A decision the script refuses (a
//! request no client sends, state in no known layout) is that decision's error alone (the script catches it and
//! replies `'!'` and the error in its place); the others are decided. A reply that is not one entry per decision
//! fails them all as malformed. A caller that stops waiting loses only its reply: the flush is a task of its own.

use std::sync::{Arc, Mutex, PoisonError};

use futures_channel::oneshot;

use super::{hash_slot, Algorithm};
use crate::error::{Error, Result};
use crate::rest::{self, RestClient};
use crate::value::Value;

/// The decisions waiting for a limiter's next call; shared by the limiter's clones.
#[derive(Debug, Clone, Default)]
pub(super) struct Merged(Arc<Mutex<Vec<Pending>>>);

/// One decision waiting: its state key, its single-limit script's arguments (the request, then the grant id for an
/// algorithm that logs grants), and where its reply goes.
#[derive(Debug)]
struct Pending {
    key: String,
    args: Vec<String>,
    reply: oneshot::Sender<Result<Value>>,
}

impl Merged {
    /// Runs the common call of `algorithm`'s single-limit script on `key` with `args`, merged with the other
    /// decisions queued in this turn: the reply that script would give.
    pub(super) async fn run(
        &self,
        client: &RestClient,
        algorithm: Algorithm,
        key: String,
        args: Vec<String>,
    ) -> Result<Value> {
        let (sender, reply) = oneshot::channel();
        if self.push(Pending {
            key,
            args,
            reply: sender,
        }) {
            let (client, merged) = (client.clone(), self.clone());
            rest::spawn(async move { merged.flush(client, algorithm).await });
        }
        reply.await.unwrap_or_else(|_| {
            Err(Error::Transport {
                url: client.url().to_owned(),
                source: Arc::from(Box::from(
                    "the runtime stopped the decision before its reply (is it shutting down?)",
                )),
            })
        })
    }

    /// Queues `pending`; true when it is the first of its call, whose caller starts the flush.
    fn push(&self, pending: Pending) -> bool {
        // A panic never happens while the lock is held (a push or a take), so a poisoned queue is still whole.
        let mut queue = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        queue.push(pending);
        queue.len() == 1
    }

    /// After one yield, sends what is queued: one call per cluster slot, each a task of its own so that the client
    /// sends them together.
    async fn flush(self, client: RestClient, algorithm: Algorithm) {
        rest::yield_once().await;
        let queued = std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner));
        let mut by_slot: Vec<(u16, Vec<Pending>)> = Vec::new();
        for pending in queued {
            let slot = hash_slot(&pending.key);
            match by_slot.iter_mut().find(|(of, _)| *of == slot) {
                Some((_, group)) => group.push(pending),
                None => by_slot.push((slot, vec![pending])),
            }
        }
        for call in by_slot.into_iter().flat_map(|(_, group)| calls(group)) {
            let client = client.clone();
            rest::spawn(async move { decide(&client, algorithm, call).await });
        }
    }
}

/// A merged call decides at most this many decisions, of at most this many bytes of keys and arguments; a larger
/// group goes as several calls, which the client still sends together (in requests of at most its cap). One call
/// for all of a burst of 14,000 made a command larger than any request may be: the bridge refused it, and every
/// decision in it failed. And one call holds Redis for all its decisions: a few hundred take about a millisecond.
const MAX_DECISIONS_PER_CALL: usize = 256;
const MAX_BYTES_PER_CALL: usize = 64 * 1024;

/// `group` cut into calls within those bounds, in order.
fn calls(group: Vec<Pending>) -> Vec<Vec<Pending>> {
    let mut calls: Vec<Vec<Pending>> = Vec::new();
    let mut bytes = 0;
    for pending in group {
        let size = pending.key.len() + pending.args.iter().map(String::len).sum::<usize>();
        match calls.last_mut() {
            Some(call) if call.len() < MAX_DECISIONS_PER_CALL && bytes + size <= MAX_BYTES_PER_CALL => {
                bytes += size;
                call.push(pending);
            }
            _ => {
                bytes = size;
                calls.push(vec![pending]);
            }
        }
    }
    calls
}

/// Decides `group` (keys of one slot) in one call and hands each caller its reply.
async fn decide(client: &RestClient, algorithm: Algorithm, mut group: Vec<Pending>) {
    if group.len() == 1 {
        return decide_alone(client, algorithm, group.remove(0)).await;
    }
    let keys: Vec<&str> = group.iter().map(|pending| pending.key.as_str()).collect();
    // The requests, then (for an algorithm that logs grants) the grant ids: see lua/limits/batch.lua.
    let mut args: Vec<&str> = group.iter().map(|pending| pending.args[0].as_str()).collect();
    if algorithm.names_grants() {
        args.extend(
            group
                .iter()
                .map(|pending| pending.args.get(1).map_or("", String::as_str)),
        );
    }
    let replies = match algorithm
        .batch_script()
        .run(client, &keys, &args)
        .await
        .and_then(|reply| split(reply, keys.len()))
    {
        Ok(replies) => replies,
        Err(Error::Unavailable { code, .. }) if code == "TRYAGAIN" => {
            // Each decided alone, sent together (each a task, as in `flush`).
            for pending in group {
                let client = client.clone();
                rest::spawn(async move { decide_alone(&client, algorithm, pending).await });
            }
            return;
        }
        Err(error) => vec![Err(error); group.len()],
    };
    for (pending, reply) in group.into_iter().zip(replies) {
        // A caller that stopped waiting has dropped its receiver: nothing to hand it.
        let _ = pending.reply.send(reply);
    }
}

/// Decides one decision in a call of its own, its single-limit script's, and hands its caller the reply.
async fn decide_alone(client: &RestClient, algorithm: Algorithm, pending: Pending) {
    let reply = algorithm.script().run(client, &[&pending.key], &pending.args).await;
    let _ = pending.reply.send(reply);
}

/// The batch script's reply as each decision's: one entry per decision, its single-limit script's reply or `'!'`
/// and the error the script caught for it.
fn split(reply: Value, count: usize) -> Result<Vec<Result<Value>>> {
    let entries = reply.into_array()?;
    if entries.len() != count {
        return Err(Error::malformed(
            format!("{count} entries, one per decision"),
            entries.len(),
        ));
    }
    Ok(entries
        .into_iter()
        .map(|entry| match entry {
            Value::Bytes(text) if text.first() == Some(&b'!') => {
                Err(Error::from_redis_reply(&String::from_utf8_lossy(&text[1..])))
            }
            entry => Ok(entry),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_is_cut_into_calls_of_bounded_count_and_size_in_order() {
        let pending = |key: String, size: usize| Pending {
            key,
            args: vec!["x".repeat(size)],
            reply: oneshot::channel().0,
        };
        let group: Vec<_> = (0..600).map(|i| pending(format!("k{i:03}"), 1)).collect();
        let sizes: Vec<usize> = calls(group).iter().map(Vec::len).collect();
        assert_eq!(sizes, [256, 256, 88]);
        let big: Vec<_> = (0..5).map(|i| pending(format!("b{i}"), 30_000)).collect();
        let cut = calls(big);
        assert_eq!(cut.iter().map(Vec::len).collect::<Vec<_>>(), [2, 2, 1]);
        let keys: Vec<&str> = cut.iter().flatten().map(|pending| pending.key.as_str()).collect();
        assert_eq!(keys, ["b0", "b1", "b2", "b3", "b4"]);
    }

    #[test]
    fn a_reply_splits_into_each_decisions_reply_or_its_error() {
        let reply = Value::Array(vec![
            Value::Bytes(b"g1:2:".to_vec()),
            Value::Bytes(b"!WRONGTYPE Operation against a key holding the wrong kind of value".to_vec()),
            Value::Array(vec![Value::Int(1), Value::Int(2), Value::Int(3), Value::Int(4)]),
        ]);
        let replies = split(reply.clone(), 3).unwrap();
        assert_eq!(replies[0].as_ref().unwrap(), &Value::Bytes(b"g1:2:".to_vec()));
        assert!(matches!(replies[1], Err(Error::ForeignState(_))));
        assert!(replies[2].is_ok());
        // One entry per decision, or the whole call is malformed.
        assert!(matches!(split(reply, 2), Err(Error::MalformedReply { .. })));
        assert!(matches!(split(Value::Int(1), 1), Err(Error::MalformedReply { .. })));
    }
}
