//! What the numbers were measured on: the machine, the tools and the commit, carried by every result file.

use std::path::Path;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::node::node_binary;
use crate::support::stdout_of;

/// The machine, the tools and the code of one run: the CPU model, the cores this process may use, the kernel,
/// `redis-server --version`'s version, the drivers' `node --version` (`None` without Node), the commit (`-dirty`
/// when tracked files differ from it) and when the run started (UTC, ISO 8601).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Machine {
    pub cpu: String,
    pub cores: usize,
    pub kernel: String,
    pub redis_server: String,
    pub node: Option<String>,
    pub git_commit: String,
    pub date: String,
}

const UNKNOWN: &str = "unknown";

impl Machine {
    /// Reads it all; what cannot be read is `unknown`.
    pub async fn describe(checkout: &Path) -> Machine {
        let cpu = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|info| {
                info.lines().find_map(|line| {
                    line.strip_prefix("model name")?.split_once(':').map(|(_, model)| model.trim().to_owned())
                })
            })
            .unwrap_or_else(|| UNKNOWN.to_owned());
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|release| format!("Linux {}", release.trim()))
            .unwrap_or_else(|_| UNKNOWN.to_owned());
        let redis_server = output_of("redis-server", &["--version"], checkout)
            .await
            .and_then(|version| version.split_whitespace().find_map(|word| word.strip_prefix("v=")).map(str::to_owned))
            .unwrap_or_else(|| UNKNOWN.to_owned());
        let node = output_of(&node_binary(checkout).to_string_lossy(), &["--version"], checkout).await;
        Machine {
            cpu,
            cores: std::thread::available_parallelism().map_or(1, |cores| cores.get()),
            kernel,
            redis_server,
            node,
            git_commit: git_commit(checkout).await,
            date: humantime::format_rfc3339_seconds(SystemTime::now()).to_string(),
        }
    }
}

/// The checkout's commit; `--no-optional-locks` so that reading the status never writes git's index.
async fn git_commit(checkout: &Path) -> String {
    let Some(commit) = output_of("git", &["rev-parse", "--short=12", "HEAD"], checkout).await else {
        return UNKNOWN.to_owned();
    };
    let status = ["--no-optional-locks", "status", "--porcelain", "--untracked-files=no"];
    match output_of("git", &status, checkout).await {
        Some(changes) if !changes.is_empty() => format!("{commit}-dirty"),
        _ => commit,
    }
}

/// A command's trimmed stdout, or `None` when it could not run or failed.
async fn output_of(program: &str, args: &[&str], dir: &Path) -> Option<String> {
    let mut command = tokio::process::Command::new(program);
    let stdout = stdout_of(command.args(args).current_dir(dir), program).await.ok()?;
    Some(stdout.trim().to_owned())
}
