//! Coalescing: the commands that concurrent callers send through one client (and its clones) within one turn of the
//! executor go to the endpoint as one `/pipeline` request, and each caller gets its own command's reply.
//!
//! Why: a decision is one script call, and the price of a call through a REST endpoint is mostly its HTTP request
//! (a request, headers, a token check, a reply), not the script. Callers that decide at once (a burst of requests
//! in one Node process, `Promise.all` over identifiers) share that price. `@upstash/redis` does the same ("auto-
//! pipelining"); edgelimit's scripts are still one call per decision, each atomic on its own.
//!
//! How: the first command of a turn starts a flush task and every command queued before that task runs rides along.
//! The task yields once first, so that callers whose futures run in the same turn (all the promises a loop of
//! `limit()` calls creates, or tasks woken together by one reply) are queued by then. One command alone goes as
//! `POST /`, exactly as without coalescing; two or more as one `/pipeline`. A caller that stops waiting (its future
//! dropped) loses nothing but its reply: the flush is a task of its own, so the other callers' commands are sent
//! and answered whoever waits.
//!
//! Partial failure: a request that fails as a whole (timeout, transport, HTTP error) fails every command in it with
//! the same error, as each would have failed alone, and "may have run" stays true for each. A pipeline runs its
//! commands one by one, so one command's error (a script's refusal) is that command's alone.
//!
//! Size: a request carries at most [`MAX_REQUEST_BYTES`] of commands; what the turn queued beyond that goes in more
//! requests, sent at the same time.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use futures_channel::oneshot;

use super::{http, Command, RestClient};
use crate::error::{Error, Result};
use crate::value::Value;

/// The most bytes of commands (their JSON) that one coalesced request carries. An endpoint caps a request's body
/// (the bridge at 1 MiB by default, Upstash at 1 MB on its smallest plans), and a request above the cap fails every
/// command in it. Unbounded, that struck hardest when Redis had lost its scripts (a restart, a failover): every
/// caller's fallback carries a script's text (up to 28 KB), enough of them together were refused again, and the
/// scripts never loaded, so every decision failed from then on.
const MAX_REQUEST_BYTES: usize = 256 * 1024;

/// Commands waiting for the next request, each with where its reply goes.
#[derive(Debug, Default)]
pub(super) struct Queue(Mutex<Vec<Waiting>>);

type Waiting = (Command, oneshot::Sender<Result<Value>>);

impl Queue {
    /// Queues `waiting`; true when it is the first of its request, whose caller starts the flush.
    fn push(&self, waiting: Waiting) -> bool {
        // A panic never happens while the lock is held (a push or a take), so a poisoned queue is still whole.
        let mut queue = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        queue.push(waiting);
        queue.len() == 1
    }

    /// Every command queued until now; the next one pushed starts a new request.
    fn take(&self) -> Vec<Waiting> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

impl RestClient {
    /// Runs `command` in the next request this client sends, alone or pipelined with the commands of other callers
    /// queued in the same turn on `queue` (the client's).
    pub(super) async fn coalesced(&self, queue: &Arc<Queue>, command: Command) -> Result<Value> {
        let (sender, reply) = oneshot::channel();
        if queue.push((command, sender)) {
            let (client, queue) = (self.clone(), queue.clone());
            http::spawn(async move { client.flush(&queue).await });
        }
        reply.await.unwrap_or_else(|_| {
            Err(Error::Transport {
                url: self.base_url.clone(),
                source: Arc::from(Box::from(
                    "the runtime stopped the request before its reply (is it shutting down?)",
                )),
            })
        })
    }

    /// Sends what is queued on `queue` after one yield, in requests of at most [`MAX_REQUEST_BYTES`] (a command
    /// larger than that alone), and hands each caller its reply.
    async fn flush(self, queue: &Queue) {
        yield_once().await;
        let mut request: Vec<Rendered> = Vec::new();
        let mut bytes = 0;
        for (command, caller) in queue.take() {
            let rendered = command.rendered();
            if !request.is_empty() && bytes + rendered.len() > MAX_REQUEST_BYTES {
                http::spawn(self.clone().send_request(std::mem::take(&mut request)));
                bytes = 0;
            }
            // One byte more for the comma between commands.
            bytes += rendered.len() + 1;
            request.push((rendered, caller));
        }
        self.send_request(request).await;
    }

    /// Sends `request`'s commands, alone as `POST /` or together as one `/pipeline`, and hands each caller its reply.
    async fn send_request(self, request: Vec<Rendered>) {
        let (commands, callers): (Vec<String>, Vec<_>) = request.into_iter().unzip();
        let replies = match <[String; 1]>::try_from(commands) {
            Ok([command]) => vec![self.send_rendered(command).await],
            Err(commands) => match self.batch_rendered("/pipeline", &commands).await {
                Ok(replies) => replies,
                Err(error) => vec![Err(error); commands.len()],
            },
        };
        for (caller, reply) in callers.into_iter().zip(replies) {
            // A caller that stopped waiting has dropped its receiver: nothing to hand it.
            let _ = caller.send(reply);
        }
    }
}

/// A queued command as the request carries it (its JSON array), and where its reply goes.
type Rendered = (String, oneshot::Sender<Result<Value>>);

/// Lets the rest of the executor's turn run: whatever other tasks were woken or spawned run before this returns.
/// What a flush awaits first, so that the turn's callers have queued (here, and in `crate::limit`'s merging).
pub(crate) async fn yield_once() {
    YieldOnce(false).await
}

/// A future that is pending once (asking to be polled again at once) and then ready: the rest of the turn's tasks
/// run in between.
struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            return Poll::Ready(());
        }
        self.0 = true;
        context.waker().wake_by_ref();
        Poll::Pending
    }
}
