//! The Node drivers `bench/npm.mjs` (the npm package: size, cold start, decisions/s next to `@upstash/ratelimit`) and
//! `bench/worker.mjs` (the Worker in local workerd). Run with `--json` against the bench's bridge; each prints one JSON
//! object, read into the reports below.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::latency::RunStats;
use crate::stack::{BenchStack, TOKEN};
use crate::support::Context;

/// What `node bench/npm.mjs --json` prints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NpmReport {
    /// The built package's size.
    pub package: PackageSize,
    /// Cold start to the first decision.
    pub cold_start: ColdStart,
    /// Decisions per second through the bridge, against `@upstash/ratelimit`.
    pub throughput: NpmThroughput,
}

/// Bytes of `pkg/`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PackageSize {
    /// `core_bg.wasm`, raw.
    pub wasm_raw: u64,
    /// `core_bg.wasm`, gzip -9.
    pub wasm_gzip: u64,
    /// The JS files (glue, layer, entry points), raw.
    pub js_raw: u64,
    /// The JS files, gzip -9.
    pub js_gzip: u64,
    /// `index.d.ts`.
    pub types: u64,
}

/// Median cold starts, ms.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ColdStart {
    /// Runs each median is taken over.
    pub samples: u32,
    /// A fresh Node process importing edgelimit, to its first decision.
    pub node_edgelimit_ms: f64,
    /// The same with `@upstash/ratelimit` + `@upstash/redis`.
    pub node_upstash_ms: f64,
    /// A fresh workerd (Miniflare) with edgelimit, to its first decision's response.
    pub workerd_edgelimit_ms: f64,
    /// A fresh workerd with a Worker that limits nothing.
    pub workerd_no_limiter_ms: f64,
}

/// Decisions per second from Node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NpmThroughput {
    /// Requests in flight.
    pub in_flight: u32,
    /// Seconds per run.
    pub seconds: f64,
    /// Rounds per contender (the best is kept).
    pub rounds: u32,
    /// Per algorithm both libraries have.
    pub algorithms: Vec<NpmAlgorithm>,
}

/// One algorithm from Node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NpmAlgorithm {
    /// The algorithm.
    pub algorithm: String,
    /// The edgelimit npm package.
    pub edgelimit: RunStats,
    /// `@upstash/ratelimit` with auto-pipelining off (one request per decision, as edgelimit).
    pub upstash_plain: RunStats,
    /// `@upstash/ratelimit` as it comes (auto-pipelining on).
    pub upstash_pipelined: RunStats,
}

/// What `node bench/worker.mjs --json` prints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkerReport {
    /// Rounds (the Workers take turns).
    pub rounds: u32,
    /// Sequential requests per Worker per round.
    pub requests: u32,
    /// Launches per Worker whose median is its cold start (the Workers take turns).
    pub cold_starts: u32,
    /// The baseline first, then the limited Workers.
    pub workers: Vec<WorkerRun>,
}

/// One Worker in workerd.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkerRun {
    /// `no limiter`, `edgelimit's wasm module, unused`, `edgelimit` or `@upstash/ratelimit`.
    pub name: String,
    /// Median request latency, ms.
    pub p50_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
    /// Median minus the baseline's; `None` for the baseline.
    pub added_p50_ms: Option<f64>,
    /// p99 minus the baseline's; `None` for the baseline.
    pub added_p99_ms: Option<f64>,
    /// A fresh workerd with the bundle, to its first response, ms: the median of the report's `cold_starts`.
    pub cold_start_ms: f64,
    /// The bundle as `wrangler deploy --dry-run` reports it, KiB.
    pub bundle_kib: f64,
    /// Its gzip size, KiB.
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
    ("pkg/core_bg.wasm", "build the npm package with scripts/build-wasm"),
    (
        "worker/wasm/core_bg.wasm",
        "build the Worker's module with scripts/build-wasm",
    ),
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
        Ok(NodeRunner {
            node: node_binary(checkout),
            checkout: checkout.to_owned(),
        })
    }

    /// `node bench/npm.mjs --json` against the stack's bridge.
    pub async fn npm(&self, stack: &BenchStack, quick: bool) -> Result<NpmReport, String> {
        self.run_json("bench/npm.mjs", stack, quick).await
    }

    /// `node bench/worker.mjs --json` against the stack's bridge.
    pub async fn worker(&self, stack: &BenchStack, quick: bool) -> Result<WorkerReport, String> {
        self.run_json("bench/worker.mjs", stack, quick).await
    }

    async fn run_json<T: DeserializeOwned>(&self, script: &str, stack: &BenchStack, quick: bool) -> Result<T, String> {
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
        let output = command
            .output()
            .await
            .context(format_args!("could not run {} {script}", self.node.display()))?;
        let stderr = String::from_utf8_lossy(&output.stderr);
        if !output.status.success() {
            return Err(format!("node {script} failed ({}):\n{stderr}", output.status));
        }
        serde_json::from_slice(&output.stdout).map_err(|e| {
            format!(
                "node {script} --json printed no report of the expected shape ({e}): {}\n{stderr}",
                String::from_utf8_lossy(&output.stdout)
            )
        })
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
