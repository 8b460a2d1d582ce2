//! Graceful shutdown: the servers stop accepting, finish what is in flight, then exit.

/// Completes on the first SIGINT (Ctrl-C) or SIGTERM.
pub async fn shutdown_requested() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("installing a SIGTERM handler cannot fail on a running tokio runtime");
        tokio::select! {
            _ = interrupt => {}
            _ = terminate.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = interrupt.await;
    }
}
