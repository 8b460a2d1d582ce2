//! The bridge binary as it is shipped (`cargo build --profile bridge`: optimised, panics unwinding to a per-request
//! catch), as a child process: for the tests that need its speed or its process (fuzzing, peak memory, neighbours).

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// The bridge binary built with `--profile bridge` (once per test run; cargo does nothing when it is up to date).
pub fn bridge_binary() -> &'static Path {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| {
        if let Some(prebuilt) = std::env::var_os("EDGELIMIT_BRIDGE_BIN") {
            return PathBuf::from(prebuilt);
        }
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let output = Command::new(cargo)
            .args(["build", "--profile", "bridge", "-p", "edgelimit-cli", "--bin", "edgelimit"])
            .arg("--message-format=json-render-diagnostics")
            .current_dir(&workspace)
            .stderr(Stdio::inherit())
            .output()
            .expect("run cargo build --profile bridge");
        assert!(output.status.success(), "cargo build --profile bridge failed");
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .filter(|message| message["reason"] == "compiler-artifact" && message["target"]["name"] == "edgelimit")
            .find_map(|message| message["executable"].as_str().map(PathBuf::from))
            .expect("cargo named the built edgelimit binary")
    })
}

/// A tokens file of its own for one bridge (removed with it), holding `tokens` (`<profile>:<token>` lines).
fn tokens_file(tokens: &str) -> PathBuf {
    static FILES: AtomicUsize = AtomicUsize::new(0);
    let n = FILES.fetch_add(1, Ordering::Relaxed);
    let path = std::env::temp_dir().join(format!("edgelimit-test-tokens-{}-{n}", std::process::id()));
    std::fs::write(&path, tokens).expect("write the tokens file");
    path
}

/// `edgelimit bridge` started from the release binary; killed on drop, and its tokens file removed.
pub struct ReleaseBridge {
    /// The process.
    pub child: Child,
    tokens_file: PathBuf,
    /// Where it listens: `127.0.0.1:<port>`.
    pub url: String,
    stderr: Arc<Mutex<String>>,
}

impl ReleaseBridge {
    /// Starts it in front of `redis_url` with the admin token `admin`, the tokens file `tokens` and more `env`.
    pub fn start(redis_url: &str, admin: &str, tokens: &str, env: &[(&str, &str)]) -> ReleaseBridge {
        let tokens_file = tokens_file(tokens);
        let mut child = Command::new(bridge_binary())
            .args(["bridge", "--listen", "127.0.0.1:0", "--redis", redis_url, "--redis-timeout-ms", "5000"])
            .env("EDGELIMIT_TOKEN", admin)
            .env("EDGELIMIT_TOKENS_FILE", &tokens_file)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the release bridge");
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut child_stderr = child.stderr.take().expect("piped stderr");
        let collected = stderr.clone();
        std::thread::spawn(move || {
            let mut chunk = [0u8; 4096];
            while let Ok(n @ 1..) = child_stderr.read(&mut chunk) {
                collected.lock().unwrap().push_str(&String::from_utf8_lossy(&chunk[..n]));
            }
        });
        let mut stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        let mut line = String::new();
        stdout.read_line(&mut line).expect("read the bridge's first line");
        // Keep draining stdout, so that nothing the bridge prints later can block it.
        std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
        let address = line
            .split_once("listening on ")
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .map(|url| url.trim_start_matches("http://"))
            .unwrap_or_else(|| panic!("no address in {line:?}; stderr: {}", stderr.lock().unwrap()))
            .to_owned();
        ReleaseBridge { child, tokens_file, url: address, stderr }
    }

    /// Whether the process still runs.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The process's peak resident memory (VmHWM), in bytes.
    pub fn peak_rss(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).expect("read /proc status");
        let kib: u64 = status
            .lines()
            .find_map(|line| line.strip_prefix("VmHWM:"))
            .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmHWM in /proc status");
        kib * 1024
    }

    /// What it printed on stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }
}

impl Drop for ReleaseBridge {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.tokens_file);
    }
}
