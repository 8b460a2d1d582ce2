//! `edgelimit-bench-hello`: a hello-world HTTP server, the baseline of scenario 3 that says what HTTP costs on this
//! machine without the bridge. It runs as a process of its own (the bridge it stands beside runs in the benchmark's
//! process, idle but for it while the load generator runs), on the same stack (the `edgelimit` binary's runtime and
//! worker threads, its allocator, its accept loop, axum, hyper), and answers every `POST /` with what the bridge
//! answers to `PING`, at once: no token, no body read, no Redis.
//!
//! Usage: `edgelimit-bench-hello [ADDR]` (default `127.0.0.1:0`); prints `listening on http://ADDR` once it listens,
//! then serves until killed.

use std::io::Write;
use std::process::ExitCode;

use axum::routing::post;
use axum::Router;

/// The bridge's answer to `PING` with `Upstash-Encoding: base64`, as the benchmark's clients ask.
const PONG: &str = r#"{"result":"UE9ORw=="}"#;

fn main() -> ExitCode {
    let address = std::env::args().nth(1).unwrap_or_else(|| "127.0.0.1:0".to_owned());
    let served = edgelimit_cli::runtime::build(None).and_then(|runtime| runtime.block_on(serve(&address)));
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("edgelimit-bench-hello: {e}");
            ExitCode::from(2)
        }
    }
}

async fn serve(address: &str) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(address).await?;
    let mut stdout = std::io::stdout();
    writeln!(stdout, "listening on http://{}", listener.local_addr()?)?;
    stdout.flush()?;
    let app = Router::new().route("/", post(|| async { PONG }));
    edgelimit_cli::bridge::serving::serve(listener, app, std::future::pending()).await
}
