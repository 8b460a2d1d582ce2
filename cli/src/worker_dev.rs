//! The Worker in the dev stack: `wrangler dev` on the repository's `wrangler.toml` (real workerd), pointed at the
//! dev bridge, in front of a small demo origin that echoes what reaches it.
//!
//! Part of `edgelimit dev` in a checkout where `scripts/setup` installed wrangler, unless `--no-worker`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use axum::extract::Request;
use axum::Json;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::task::JoinHandle;

/// What runs the Worker, and where it and its origin listen.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// The checkout holding `wrangler.toml` and `node_modules/wrangler`.
    pub root: PathBuf,
    /// The Node that runs wrangler.
    pub node: PathBuf,
    /// wrangler's CLI script.
    pub wrangler: PathBuf,
    /// Port of `wrangler dev`.
    pub port: u16,
    /// Port of the demo origin.
    pub origin_port: u16,
}

impl WorkerConfig {
    /// The Worker of the checkout at `root`, if it has `wrangler.toml` and wrangler, with the Node wrangler needs.
    /// It runs wrangler's CLI script, not its `bin` wrapper, whose grandchild would outlive a stopped wrapper.
    pub fn in_checkout(root: &Path, port: u16, origin_port: u16) -> Option<WorkerConfig> {
        let wrangler = root.join("node_modules/wrangler/wrangler-dist/cli.js");
        if !root.join("wrangler.toml").is_file() || !wrangler.is_file() {
            return None;
        }
        let local_node = root.join("node_modules/.bin/node");
        let node = if local_node.exists() { local_node } else { PathBuf::from("node") };
        Some(WorkerConfig { root: root.to_owned(), node, wrangler, port, origin_port })
    }
}

/// The running Worker and origin.
#[derive(Debug)]
pub struct WorkerDev {
    wrangler: Child,
    origin: JoinHandle<()>,
    /// The Worker's URL.
    pub url: String,
    /// The demo origin's URL.
    pub origin_url: String,
}

impl WorkerDev {
    /// Stops wrangler with SIGTERM so it stops its workerd processes (SIGKILL would orphan them), killing it after
    /// 5 s; then stops the origin.
    pub async fn stop(mut self) {
        if let Some(pid) = self.wrangler.id() {
            let _ = Command::new("kill").args(["-TERM", &pid.to_string()]).status().await;
        }
        if tokio::time::timeout(Duration::from_secs(5), self.wrangler.wait()).await.is_err() {
            let _ = self.wrangler.kill().await;
        }
        self.origin.abort();
    }
}

/// Starts the demo origin and `wrangler dev` against `bridge_url`; wrangler's output is passed on, each line marked.
pub async fn start(config: &WorkerConfig, bridge_url: &str, token: &str) -> Result<WorkerDev, String> {
    let origin_address = SocketAddr::from(([127, 0, 0, 1], config.origin_port));
    let listener = tokio::net::TcpListener::bind(origin_address)
        .await
        .map_err(|e| format!("could not listen on {origin_address} for the demo origin: {e}; pass --origin-port"))?;
    let origin = tokio::spawn(async move {
        let _ = axum::serve(listener, axum::Router::new().fallback(echo)).await;
    });
    let origin_url = format!("http://{origin_address}");
    let vars =
        [format!("ORIGIN:{origin_url}"), format!("EDGELIMIT_URL:{bridge_url}"), format!("EDGELIMIT_TOKEN:{token}")];
    let mut command = Command::new(&config.node);
    command
        .arg("--no-warnings")
        .arg(&config.wrangler)
        .args(["dev", "--ip", "127.0.0.1", "--port", &config.port.to_string()])
        .args(["--show-interactive-dev-session", "false"])
        .args(vars.iter().flat_map(|var| ["--var", var.as_str()]))
        .current_dir(&config.root)
        .env("WRANGLER_SEND_METRICS", "false")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .kill_on_drop(true);
    let mut child = command
        .spawn()
        .map_err(|e| format!("could not run {} {}: {e}", config.node.display(), config.wrangler.display()))?;
    if let Some(stdout) = child.stdout.take() {
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                crate::say!("  [worker] {line}");
            }
        });
    }
    Ok(WorkerDev { wrangler: child, origin, url: format!("http://127.0.0.1:{}", config.port), origin_url })
}

/// The demo origin's answer: what reached it.
async fn echo(request: Request) -> Json<serde_json::Value> {
    let headers: serde_json::Map<String, serde_json::Value> = request
        .headers()
        .iter()
        .map(|(name, value)| (name.to_string(), String::from_utf8_lossy(value.as_bytes()).into()))
        .collect();
    Json(json!({
        "origin": "edgelimit dev demo origin: this request was allowed through the Worker",
        "method": request.method().as_str(),
        "uri": request.uri().to_string(),
        "headers": headers,
    }))
}
