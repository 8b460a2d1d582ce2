//! Batching the bridge's writes to Redis: many requests' commands in one write.
//!
//! All requests of a profile share one multiplexed connection ([`super::redis_link`]), whose driver would otherwise
//! write once per command, and each write costs a syscall on both ends. [`WriteBatching`] makes the driver yield one
//! scheduler turn before each batch's first write, so the requests ready to run queue their commands first. Redis sees
//! the same bytes in the same order; only how they are cut into writes changes.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A socket whose first write after each flush waits for one turn of the scheduler.
pub(super) struct WriteBatching<S> {
    inner: S,
    /// Whether this batch has yielded already: set by the yield, cleared once a flush completes.
    yielded: bool,
}

impl<S> WriteBatching<S> {
    pub(super) fn new(inner: S) -> Self {
        WriteBatching { inner, yielded: false }
    }

    /// `Pending` (woken at once, behind the tasks already ready) the first time in a batch; then `Ready` until the
    /// batch is flushed.
    fn yield_once(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if self.yielded {
            return Poll::Ready(());
        }
        self.yielded = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for WriteBatching<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for WriteBatching<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        std::task::ready!(self.yield_once(cx));
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        std::task::ready!(self.yield_once(cx));
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        std::task::ready!(Pin::new(&mut self.inner).poll_flush(cx))?;
        self.yielded = false;
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    /// Counts the writes that reach the socket.
    struct Counted<S> {
        inner: S,
        writes: Arc<AtomicUsize>,
    }

    impl<S: AsyncRead + Unpin> AsyncRead for Counted<S> {
        fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
            Pin::new(&mut self.inner).poll_read(cx, buf)
        }
    }

    impl<S: AsyncWrite + Unpin> AsyncWrite for Counted<S> {
        fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
            let written = Pin::new(&mut self.inner).poll_write(cx, buf);
            if matches!(written, Poll::Ready(Ok(_))) {
                self.writes.fetch_add(1, Ordering::Relaxed);
            }
            written
        }

        fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Pin::new(&mut self.inner).poll_flush(cx)
        }

        fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Pin::new(&mut self.inner).poll_shutdown(cx)
        }
    }

    /// A stand-in Redis on the other end of `stream`: answers every RESP2 command (`*<n>`, then `$<len>` and the word
    /// for each of its n words) with its last word, as `ECHO` does.
    async fn serve_echo(stream: tokio::io::DuplexStream) {
        let (read, mut write) = tokio::io::split(stream);
        let mut lines = BufReader::new(read).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let Some(words) = line.strip_prefix('*').and_then(|n| n.parse::<usize>().ok()) else {
                return;
            };
            let mut last = String::new();
            for _ in 0..words {
                match (lines.next_line().await, lines.next_line().await) {
                    (Ok(Some(_length)), Ok(Some(word))) => last = word,
                    _ => return,
                }
            }
            let reply = format!("${}\r\n{last}\r\n", last.len());
            if write.write_all(reply.as_bytes()).await.is_err() {
                return;
            }
        }
    }

    /// Commands sent at once by many tasks over one multiplexed connection reach the socket in fewer writes than
    /// there are commands, and every task gets its own reply.
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn commands_sent_together_reach_redis_in_one_write_and_each_gets_its_reply() {
        let (ours, theirs) = tokio::io::duplex(1 << 16);
        tokio::spawn(serve_echo(theirs));
        let writes = Arc::new(AtomicUsize::new(0));
        let socket = WriteBatching::new(Counted { inner: ours, writes: writes.clone() });
        let settings = redis::RedisConnectionInfo::default().set_protocol(redis::ProtocolVersion::RESP2);
        let (connection, driver) =
            redis::aio::MultiplexedConnection::new_with_config(&settings, socket, redis::AsyncConnectionConfig::new())
                .await
                .unwrap();
        tokio::spawn(driver);
        let before = writes.load(Ordering::Relaxed);
        let mut requests = tokio::task::JoinSet::new();
        for i in 0..16 {
            let mut connection = connection.clone();
            requests.spawn(async move {
                let reply: i64 = redis::cmd("ECHO").arg(i).query_async(&mut connection).await.unwrap();
                (i, reply)
            });
        }
        for (sent, reply) in requests.join_all().await {
            assert_eq!(sent, reply, "each request gets its own reply");
        }
        let sent = writes.load(Ordering::Relaxed) - before;
        assert!(sent < 16, "16 commands took {sent} writes");
    }
}
