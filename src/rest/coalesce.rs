//! Coalescing: the commands and decisions that concurrent callers send through one client (and its clones) within
//! one turn of the executor go as one `/pipeline` request, each caller getting its own reply. Common decisions of
//! one algorithm and cluster slot share one call of its batch script (`batch/<algorithm>`), which decides them in
//! order. The first entry of a turn starts a flush task, which yields once and takes everything queued by then; one
//! entry alone goes exactly as without coalescing.

use std::borrow::Cow;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::Poll;

use futures_channel::oneshot;

use super::Script;
use super::{hash_slot, http, Command, RestClient};
use crate::error::{Error, Result};
use crate::value::Value;

/// The most bytes of commands one coalesced request carries, well under endpoints' caps (the bridge's 1 MiB,
/// Upstash's 1 MB on small plans).
const MAX_REQUEST_BYTES: usize = 256 * 1024;

/// A batch call's most decisions and bytes of keys and arguments: one call holds Redis for all of them.
const MAX_DECISIONS_PER_CALL: usize = 256;
const MAX_BYTES_PER_CALL: usize = 64 * 1024;

/// A common decision (one limit with its quota in the request, on the server's clock), which may share a call of
/// its algorithm's batch script.
#[derive(Debug)]
pub(crate) struct MergeableDecision {
    /// The algorithm's single-limit script, which decides it alone.
    pub(crate) alone: &'static Script,
    /// The algorithm's batch script.
    pub(crate) batch: &'static Script,
    /// The state key.
    pub(crate) key: String,
    /// The single-limit script's arguments: the request, then a log's grant id.
    pub(crate) args: Vec<String>,
    /// Whether the batch script takes a grant id per decision (after every request).
    pub(crate) names_grants: bool,
}

/// What waits in the queue: a command, or a decision.
#[derive(Debug)]
pub(super) enum Entry {
    Command(Command),
    Decision(MergeableDecision),
}

type Reply = oneshot::Sender<Result<Value>>;

/// Entries waiting for the next request, each with where its reply goes.
#[derive(Debug, Default)]
pub(super) struct Queue(Mutex<Vec<(Entry, Reply)>>);

impl Queue {
    /// Queues an entry; true when it is the first of its request, whose caller starts the flush.
    fn push(&self, entry: Entry, reply: Reply) -> bool {
        // Nothing panics while the lock is held, so a poisoned queue is still whole.
        let mut queue = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        queue.push((entry, reply));
        queue.len() == 1
    }

    /// Every entry queued until now; the next one pushed starts a new request.
    fn take(&self) -> Vec<(Entry, Reply)> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// One command of a request and who waits for its reply.
enum Call {
    Command(Command, Reply),
    /// A decision's single-limit script.
    Alone(MergeableDecision, Reply),
    /// Decisions of one batch script and slot, in order.
    Batch(Vec<(MergeableDecision, Reply)>),
}

impl Call {
    /// The command sent, by SHA1 or (`eval`) with the script's text: a batch call names its keys, then the requests,
    /// then a log's grant ids.
    fn command(&self, eval: bool) -> Cow<'_, Command> {
        let (script, keys, args): (&Script, Vec<&str>, Vec<&str>) = match self {
            Call::Command(command, _) => return Cow::Borrowed(command),
            Call::Alone(decision, _) => {
                let args = decision.args.iter().map(String::as_str).collect();
                (decision.alone, vec![&decision.key], args)
            }
            Call::Batch(group) => {
                let keys = group.iter().map(|(decision, _)| decision.key.as_str()).collect();
                let mut args: Vec<&str> = group.iter().map(|(decision, _)| decision.args[0].as_str()).collect();
                if group[0].0.names_grants {
                    args.extend(group.iter().map(|(d, _)| d.args.get(1).map_or("", String::as_str)));
                }
                (group[0].0.batch, keys, args)
            }
        };
        Cow::Owned(match eval {
            true => script.eval_command(&keys, &args),
            false => script.evalsha_command(&keys, &args),
        })
    }

    /// Hands each caller its reply. `NOSCRIPT` is resent with the script's text; a batch refused with `TRYAGAIN` (a
    /// slot migrating; nothing ran) as one call per decision; each in a task of its own.
    fn answer(self, client: &RestClient, reply: Result<Value>) {
        match (self, reply) {
            (call @ (Call::Alone(..) | Call::Batch(_)), Err(error)) if error.is_noscript() => {
                let client = client.clone();
                http::spawn(async move {
                    let reply = client.command(&call.command(true)).await;
                    call.answer(&client, reply);
                });
            }
            (Call::Batch(group), Err(Error::Unavailable { code, .. })) if code == "TRYAGAIN" => {
                for (decision, caller) in group {
                    let client = client.clone();
                    http::spawn(async move {
                        let reply = decision.alone.run(&client, &[&decision.key], &decision.args).await;
                        let _ = caller.send(reply);
                    });
                }
            }
            (Call::Batch(group), reply) => {
                let replies = reply.and_then(|reply| split(reply, group.len()));
                let replies = replies.unwrap_or_else(|error| vec![Err(error); group.len()]);
                for ((_, caller), reply) in group.into_iter().zip(replies) {
                    let _ = caller.send(reply);
                }
            }
            (Call::Command(_, caller) | Call::Alone(_, caller), reply) => {
                let _ = caller.send(reply);
            }
        }
    }
}

impl RestClient {
    /// Runs `entry` in the next request this client sends, with the other callers' entries queued this turn.
    pub(super) async fn coalesced(&self, queue: &Arc<Queue>, entry: Entry) -> Result<Value> {
        let (sender, reply) = oneshot::channel();
        if queue.push(entry, sender) {
            let (client, queue) = (self.clone(), queue.clone());
            http::spawn(async move { client.flush(&queue).await });
        }
        reply.await.unwrap_or_else(|_| {
            Err(Error::Transport {
                url: self.base_url.clone(),
                source: Arc::from(Box::from("the runtime stopped the request before its reply (is it shutting down?)")),
            })
        })
    }

    /// After one yield, sends what is queued in requests of at most [`MAX_REQUEST_BYTES`] (a larger command alone) and
    /// hands each caller its reply.
    async fn flush(self, queue: &Queue) {
        yield_once().await;
        let mut request: Vec<(String, Call)> = Vec::new();
        let mut bytes = 0;
        for call in calls(queue.take()) {
            let rendered = call.command(false).rendered();
            if !request.is_empty() && bytes + rendered.len() > MAX_REQUEST_BYTES {
                http::spawn(self.clone().send_request(std::mem::take(&mut request)));
                bytes = 0;
            }
            // One byte more for the comma between commands.
            bytes += rendered.len() + 1;
            request.push((rendered, call));
        }
        self.send_request(request).await;
    }

    /// Sends `request`'s commands, alone as `POST /` or together as one `/pipeline`, and answers each call.
    async fn send_request(self, request: Vec<(String, Call)>) {
        let (commands, calls): (Vec<String>, Vec<Call>) = request.into_iter().unzip();
        let replies = match <[String; 1]>::try_from(commands) {
            Ok([command]) => vec![self.send_rendered(command).await],
            Err(commands) => match self.batch_rendered("/pipeline", &commands).await {
                Ok(replies) => replies,
                Err(error) => vec![Err(error); commands.len()],
            },
        };
        for (call, reply) in calls.into_iter().zip(replies) {
            call.answer(&self, reply);
        }
    }
}

/// The queued entries as calls, in order: decisions of one batch script and slot (a script touches one slot) grouped
/// within the bounds above; a group of one as its single-limit script.
fn calls(queued: Vec<(Entry, Reply)>) -> Vec<Call> {
    let mut calls = Vec::new();
    // The group each batch script and slot is filling: its index in `calls`, its decisions and bytes.
    let mut open: Vec<(&'static Script, u16, usize, usize, usize)> = Vec::new();
    for (entry, reply) in queued {
        let decision = match entry {
            Entry::Command(command) => {
                calls.push(Call::Command(command, reply));
                continue;
            }
            Entry::Decision(decision) => decision,
        };
        let (batch, slot) = (decision.batch, hash_slot(&decision.key));
        let size = decision.key.len() + decision.args.iter().map(String::len).sum::<usize>();
        let group = open.iter_mut().find(|(script, of, ..)| *script == batch && *of == slot);
        match group {
            Some((_, _, at, count, bytes))
                if *count < MAX_DECISIONS_PER_CALL && *bytes + size <= MAX_BYTES_PER_CALL =>
            {
                let Call::Batch(group) = &mut calls[*at] else { unreachable!("an open group is a batch call") };
                group.push((decision, reply));
                (*count, *bytes) = (*count + 1, *bytes + size);
            }
            Some(full) => {
                *full = (batch, slot, calls.len(), 1, size);
                calls.push(Call::Batch(vec![(decision, reply)]));
            }
            None => {
                open.push((batch, slot, calls.len(), 1, size));
                calls.push(Call::Batch(vec![(decision, reply)]));
            }
        }
    }
    // A group of one is its single-limit script's call, exactly as without coalescing.
    calls
        .into_iter()
        .map(|call| match call {
            Call::Batch(mut group) if group.len() == 1 => {
                let (decision, reply) = group.remove(0);
                Call::Alone(decision, reply)
            }
            call => call,
        })
        .collect()
}

/// A batch reply as each decision's: its single-limit script's reply, or `'!'` and the error caught for it.
fn split(reply: Value, count: usize) -> Result<Vec<Result<Value>>> {
    let entries = reply.into_array()?;
    if entries.len() != count {
        return Err(Error::malformed(format!("{count} entries, one per decision"), entries.len()));
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

/// Lets the rest of the executor's turn run: whatever other tasks were woken or spawned run before this returns.
pub(crate) async fn yield_once() {
    let mut yielded = false;
    std::future::poll_fn(|context| {
        if std::mem::replace(&mut yielded, true) {
            return Poll::Ready(());
        }
        context.waker().wake_by_ref();
        Poll::Pending
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lua;

    fn decision(batch: &'static Script, key: &str, size: usize) -> (Entry, Reply) {
        let decision = MergeableDecision {
            alone: &lua::GCRA,
            batch,
            key: key.to_owned(),
            args: vec!["x".repeat(size)],
            names_grants: false,
        };
        (Entry::Decision(decision), oneshot::channel().0)
    }

    fn shape(calls: &[Call]) -> Vec<String> {
        let keys = |group: &[(MergeableDecision, Reply)]| group.iter().map(|(d, _)| d.key.clone()).collect::<Vec<_>>();
        calls
            .iter()
            .map(|call| match call {
                Call::Command(command, _) => command.words()[0].clone(),
                Call::Alone(decision, _) => format!("alone {}", decision.key),
                Call::Batch(group) if group.len() > 3 => format!("batch of {}", group.len()),
                Call::Batch(group) => format!("batch {}", keys(group).join(" ")),
            })
            .collect()
    }

    #[test]
    fn decisions_of_one_batch_script_and_slot_share_a_call_in_order_and_commands_go_as_they_are() {
        let queued = vec![
            decision(&lua::BATCH_GCRA, "{a}:1", 1),
            (Entry::Command(Command::new("PING")), oneshot::channel().0),
            decision(&lua::BATCH_GCRA, "{b}:1", 1),
            decision(&lua::BATCH_GCRA, "{a}:2", 1),
            decision(&lua::BATCH_FIXED_WINDOW, "{a}:3", 1),
        ];
        assert_eq!(shape(&calls(queued)), ["batch {a}:1 {a}:2", "PING", "alone {b}:1", "alone {a}:3"]);
    }

    #[test]
    fn a_group_is_cut_into_calls_of_bounded_count_and_size_in_order() {
        let many = (0..600).map(|i| decision(&lua::BATCH_GCRA, &format!("{{k}}{i:03}"), 1)).collect();
        assert_eq!(shape(&calls(many)), ["batch of 256", "batch of 256", "batch of 88"]);
        let big = (0..5).map(|i| decision(&lua::BATCH_GCRA, &format!("{{b}}{i}"), 30_000)).collect();
        assert_eq!(shape(&calls(big)), ["batch {b}0 {b}1", "batch {b}2 {b}3", "alone {b}4"]);
    }

    #[test]
    fn a_batch_call_names_keys_then_requests_then_grant_ids() {
        let log = |key: &str, id: &str| MergeableDecision {
            alone: &lua::SLIDING_LOG,
            batch: &lua::BATCH_SLIDING_LOG,
            key: key.to_owned(),
            args: vec!["1:3:1000".to_owned(), id.to_owned()],
            names_grants: true,
        };
        let call =
            Call::Batch(vec![(log("{l}:a", "id1"), oneshot::channel().0), (log("{l}:b", "id2"), oneshot::channel().0)]);
        let sha1 = lua::BATCH_SLIDING_LOG.sha1();
        assert_eq!(
            call.command(false).words(),
            ["EVALSHA", sha1, "2", "{l}:a", "{l}:b", "1:3:1000", "1:3:1000", "id1", "id2"]
        );
        assert_eq!(call.command(true).words()[1], lua::BATCH_SLIDING_LOG.source());
    }

    #[test]
    fn a_reply_splits_into_each_decisions_reply_or_its_error() {
        let reply = Value::Array(vec![
            Value::Array(vec![Value::Int(1), Value::Int(2), Value::Int(3), Value::Int(4)]),
            Value::Bytes(b"!WRONGTYPE Operation against a key holding the wrong kind of value".to_vec()),
        ]);
        let replies = split(reply.clone(), 2).unwrap();
        assert!(replies[0].is_ok());
        assert!(matches!(replies[1], Err(Error::ForeignState(_))));
        // One entry per decision, or the whole call is malformed.
        assert!(matches!(split(reply, 3), Err(Error::MalformedReply { .. })));
        assert!(matches!(split(Value::Int(1), 1), Err(Error::MalformedReply { .. })));
    }
}
