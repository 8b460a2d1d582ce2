//! The Node drivers `bench/npm.mjs` (the npm package: size, cold start, decisions/s next to `@upstash/ratelimit`) and
//! `bench/worker.mjs` (the Worker in local workerd). Run with `--json` against the bench's bridge; each prints one JSON
//! object, read into the reports below.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::latency::RunStats;
use crate::stack::{BenchStack, TOKEN};
use crate::support::{stdout_of, Context};

/// What `node bench/npm.mjs --json` prints: the package's size, its cold start to the first decision, and
/// decisions per second through the bridge next to `@upstash/ratelimit`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NpmReport {
    pub package: PackageSize,
    pub cold_start: ColdStart,
    pub throughput: NpmThroughput,
}

/// Bytes of `pkg/`: `core_bg.wasm` and the JS files (glue, layer, entry points), raw and gzip -9, and `index.d.ts`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PackageSize {
    pub wasm_raw: u64,
    pub wasm_gzip: u64,
    pub js_raw: u64,
    pub js_gzip: u64,
    pub types: u64,
}

/// Median cold starts over `samples` runs, ms: a fresh Node process importing edgelimit (or `@upstash/ratelimit` +
/// `@upstash/redis`) to its first decision; a fresh workerd (Miniflare) with edgelimit (or a Worker that limits
/// nothing) to its first response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ColdStart {
    pub samples: u32,
    pub node_edgelimit_ms: f64,
    pub node_upstash_ms: f64,
    pub workerd_edgelimit_ms: f64,
    pub workerd_no_limiter_ms: f64,
}

/// Decisions per second from Node, `in_flight` at a time, the best of `rounds` runs of `seconds`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NpmThroughput {
    pub in_flight: u32,
    pub seconds: f64,
    pub rounds: u32,
    pub algorithms: Vec<NpmAlgorithm>,
}

/// One algorithm both libraries have: the edgelimit npm package, and `@upstash/ratelimit` with auto-pipelining off
/// (one request per decision) and on (as it comes).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NpmAlgorithm {
    pub algorithm: String,
    pub edgelimit: RunStats,
    pub upstash_plain: RunStats,
    pub upstash_pipelined: RunStats,
}

/// What `node bench/worker.mjs --json` prints: `rounds` of `requests` sequential requests per Worker, cold starts
/// the median of `cold_starts` launches (the Workers taking turns), the baseline Worker first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkerReport {
    pub rounds: u32,
    pub requests: u32,
    pub cold_starts: u32,
    pub workers: Vec<WorkerRun>,
}

/// One Worker in workerd: request latency (ms), what it adds to the baseline's (`None` for the baseline), a fresh
/// workerd's time to its first response (ms), and its bundle as `wrangler deploy --dry-run` reports it (KiB).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkerRun {
    pub name: String,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub added_p50_ms: Option<f64>,
    pub added_p99_ms: Option<f64>,
    pub cold_start_ms: f64,
    pub bundle_kib: f64,
    pub bundle_gzip_kib: f64,
}

/// Runs the Node drivers from the checkout.
#[derive(Debug, Clone)]
pub struct NodeRunner {
    node: PathBuf,
    checkout: PathBuf,
}

/// What the drivers need, and how to get it.
const PREREQUISITES: [(&str, &str); 5] = [
    ("node_modules/@upstash/ratelimit", "run `npm ci` (or scripts/setup)"),
    ("node_modules/miniflare", "run `npm ci` (or scripts/setup)"),
    ("node_modules/wrangler", "run `npm ci` (or scripts/setup)"),
    ("pkg/core_bg.wasm", "run scripts/build-wasm"),
    ("worker/wasm/core_bg.wasm", "run scripts/build-wasm"),
];

impl NodeRunner {
    /// Checks that the checkout has what the drivers need.
    pub fn find(checkout: &Path) -> Result<NodeRunner, String> {
        for (path, remedy) in PREREQUISITES {
            if !checkout.join(path).exists() {
                return Err(format!(
                    "{path} is missing in {} (run scripts/bench, or `edgelimit-bench` from the repository root): \
                     {remedy}, or pass --no-node",
                    checkout.display()
                ));
            }
        }
        Ok(NodeRunner { node: node_binary(checkout), checkout: checkout.to_owned() })
    }

    /// `node <script> --json` (`bench/npm.mjs`, `bench/worker.mjs`) against the stack's bridge, its report read.
    pub async fn run<T: DeserializeOwned>(&self, script: &str, stack: &BenchStack, quick: bool) -> Result<T, String> {
        let mut command = tokio::process::Command::new(&self.node);
        command
            .arg(script)
            .args(["--json", "--url", stack.url(), "--token", TOKEN])
            .current_dir(&self.checkout)
            .stdin(Stdio::null())
            .kill_on_drop(true);
        if quick {
            command.arg("--quick");
        }
        let stdout = stdout_of(&mut command, &format!("{} {script}", self.node.display())).await?;
        serde_json::from_str(&stdout).context(format_args!("node {script} printed no report of the expected shape"))
    }
}

/// The Node to run: the workspace's own (`npm ci` installs Node 22 where the machine's is older; wrangler needs
/// it), else the one on PATH.
pub fn node_binary(checkout: &Path) -> PathBuf {
    let workspace_node = checkout.join("node_modules/.bin/node");
    if workspace_node.exists() {
        workspace_node
    } else {
        PathBuf::from("node")
    }
}
