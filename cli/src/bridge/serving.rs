//! The bridge's accept loop: what `axum::serve` does for the bridge (HTTP/1.1 with keep-alive, a graceful shutdown
//! that lets requests in flight finish), plus a deadline for a request's head.
//!
//! Why not `axum::serve`: it runs hyper without a timer, so a connection that sends the first bytes of a request and
//! then nothing is held open forever. Enough of them (one client opening a few thousand, "slowloris") took every file
//! descriptor the bridge had, and every other client was locked out until they let go. Here each connection must
//! send a whole request head within [`HEADER_READ_TIMEOUT`], an idle keep-alive connection its next one too, or
//! hyper closes it. What a request does after its head (its body, capped in size; the handler, bounded by the Redis
//! timeout; an event stream, which writes a heartbeat) is not affected.
//!
//! A connection whose client stops reading is closed once a write has waited [`WRITE_STALL_TIMEOUT`] (the clock
//! starts again whenever a write makes progress): a response held for a client that never reads it is memory the
//! bridge never gets back ([`super::memory_budget`]). A slow reader is not cut off, only one that reads nothing.
//!
//! HTTP/1.1 only: every client of the REST protocol speaks it, and serving HTTP/2 as well first reads a
//! connection's opening bytes to tell the two apart, with no deadline, so a connection that sent nothing (or part of
//! HTTP/2's preface) was held forever all the same; HTTP/2 has no header timer either.

use std::future::Future;
use std::io;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio_io_timeout::TimeoutStream;

/// How long a connection may take to send a request's head (the request line and headers), and an idle keep-alive
/// connection its next one. A REST client sends its request at once; 10 s leaves room for a slow network.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a write to a client may wait without any progress before the connection is closed.
pub const WRITE_STALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Serves `app` on `listener` until `shutdown` completes, then lets the requests in flight finish.
pub async fn serve(listener: TcpListener, app: Router, shutdown: impl Future<Output = ()>) -> io::Result<()> {
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(error) => {
                    wait_after_accept_error(error).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        // A Router takes requests of any body type, hyper's `Incoming` too.
        let service = TowerToHyperService::new(app.clone());
        let mut stream = TimeoutStream::new(stream);
        stream.set_write_timeout(Some(WRITE_STALL_TIMEOUT));
        let connection = http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(HEADER_READ_TIMEOUT)
            .serve_connection(TokioIo::new(Box::pin(stream)), service);
        // A connection's own failure (a client gone, a head too slow) ends that connection only.
        let served = graceful.watch(connection);
        tokio::spawn(async move {
            let _ = served.await;
        });
    }
    // Refuse new connections at once while the ones open finish, rather than leave them in the backlog unserved.
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// After a failed accept, as `axum::serve` does: out of file descriptors (EMFILE, ENFILE) waits a second for
/// connections to close rather than spinning; a connection reset before it was accepted is tried again at once.
async fn wait_after_accept_error(error: io::Error) {
    if !matches!(
        error.kind(),
        io::ErrorKind::ConnectionRefused | io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset
    ) {
        eprintln!("edgelimit bridge: accepting a connection failed ({error}); trying again in 1 s");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
