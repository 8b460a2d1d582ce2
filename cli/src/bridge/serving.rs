//! The bridge's accept loop: what `axum::serve` does (HTTP/1.1 and HTTP/2 on each connection, upgrades, a graceful
//! shutdown that lets requests in flight finish), plus a deadline for a request's head.
//!
//! Why not `axum::serve`: it runs hyper without a timer, so a connection that sends the first bytes of a request and
//! then nothing is held open forever. Enough of them (one client opening a few thousand, "slowloris") took every file
//! descriptor the bridge had, and every other client was locked out until they let go. Here each connection must
//! send a whole request head within [`HEADER_READ_TIMEOUT`], an idle keep-alive connection its next one too, or
//! hyper closes it. What a request does after its head (its body, capped in size; the handler, bounded by the Redis
//! timeout; an event stream, which writes a heartbeat) is not affected.

use std::future::Future;
use std::io;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;

/// How long a connection may take to send a request's head (the request line and headers), and an idle keep-alive
/// connection its next one. A REST client sends its request at once; 10 s leaves room for a slow network.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

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
        let mut builder = Builder::new(TokioExecutor::new());
        builder
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(HEADER_READ_TIMEOUT);
        let connection = builder
            .serve_connection_with_upgrades(TokioIo::new(stream), service)
            .into_owned();
        // A connection's own failure (a client gone, a head too slow) ends that connection only.
        let served = graceful.watch(connection);
        tokio::spawn(async move {
            let _ = served.await;
        });
    }
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
