//! The bridge's accept loop: HTTP/1.1 with keep-alive and a graceful shutdown, as `axum::serve`, plus deadlines.
//!
//! `axum::serve` runs hyper without a timer, so a connection that sends part of a request head and then nothing is
//! held forever (slowloris: enough of them take every file descriptor). Here a request head must arrive within
//! [`HEADER_READ_TIMEOUT`], and a connection whose client stops reading is closed after [`WRITE_STALL_TIMEOUT`]
//! without progress, freeing what its response held. HTTP/1.1 only: telling HTTP/2 apart reads bytes with no deadline.

use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use prometheus_client::metrics::gauge::Gauge;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_io_timeout::TimeoutStream;

/// How long a connection may take to send a request's head, and an idle keep-alive connection its next one.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a write to a client may wait without any progress before the connection is closed.
pub const WRITE_STALL_TIMEOUT: Duration = Duration::from_secs(30);

/// The connections the accept loop counts and bounds.
#[derive(Clone, Default)]
pub struct Connections {
    /// Open now.
    pub open: Gauge,
    /// At most this many at once; past it new ones wait in the listen backlog. `None`: no bound.
    pub max: Option<usize>,
}

/// Serves `app` on `listener` until `shutdown` completes, then lets the requests in flight finish.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    connections: Connections,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    let slots = Arc::new(Semaphore::new(connections.max.unwrap_or(Semaphore::MAX_PERMITS)));
    loop {
        let slot = tokio::select! {
            slot = slots.clone().acquire_owned() => slot.map_err(io::Error::other)?,
            () = &mut shutdown => break,
        };
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
        let open = connections.open.clone();
        open.inc();
        tokio::spawn(async move {
            let _ = served.await;
            open.dec();
            drop(slot);
        });
    }
    // Refuse new connections at once while the ones open finish, rather than leave them in the backlog unserved.
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// After a failed accept, as `axum::serve` does: out of file descriptors waits a second rather than spin; a
/// connection reset before it was accepted is tried again at once.
async fn wait_after_accept_error(error: io::Error) {
    if !matches!(
        error.kind(),
        io::ErrorKind::ConnectionRefused | io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset
    ) {
        eprintln!("edgelimit bridge: accepting a connection failed ({error}); trying again in 1 s");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
