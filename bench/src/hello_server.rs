//! `edgelimit-bench-hello [ADDR]`: a hello-world HTTP server, scenario 3's baseline for what HTTP alone costs. It
//! runs on the bridge's stack (the `edgelimit` binary's runtime, allocator, axum and hyper) and answers every
//! `POST /` at once with the bridge's answer to `PING`. Prints `listening on http://ADDR`, then serves until killed.

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
    edgelimit_cli::bridge::serving::serve(listener, app, Default::default(), std::future::pending()).await
}
