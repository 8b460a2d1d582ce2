//! A real `redis-server` child process on a loopback port, for the dev stack and the tests.
//!
//! It keeps nothing on disk and dies with its owner (`kill_on_drop`), so a crashed test leaves no server behind.

use std::io;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};

/// A running `redis-server`.
#[derive(Debug)]
pub struct RedisServer {
    child: Child,
    port: u16,
    dir: PathBuf,
}

/// How long a starting server may take to answer PING.
const READY_TIMEOUT: Duration = Duration::from_secs(10);

impl RedisServer {
    /// Starts a server on a free loopback port.
    pub async fn start() -> io::Result<RedisServer> {
        let mut last_error = None;
        // Another process can take the free port between probing and binding; try a few ports before giving up.
        for _ in 0..5 {
            match Self::start_on(free_port()?).await {
                Ok(server) => return Ok(server),
                Err(e) => last_error = Some(e),
            }
        }
        Err(last_error.expect("at least one attempt was made"))
    }

    /// Starts a server on `port` (e.g. to bring one back on the port a stopped one had).
    pub async fn start_on(port: u16) -> io::Result<RedisServer> {
        Self::start_with(port, &[]).await
    }

    /// Starts a server on `port` with `extra` arguments after the usual ones (e.g. cluster mode, see
    /// [`crate::redis_cluster`]).
    pub async fn start_with(port: u16, extra: &[&str]) -> io::Result<RedisServer> {
        let dir = std::env::temp_dir().join(format!("edgelimit-redis-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(["--loglevel", "warning", "--dir"])
            .arg(&dir)
            .args(extra)
            .stdout(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!(
                        "could not run redis-server ({e}); run scripts/setup, which installs Debian's redis-server"
                    ),
                )
            })?;
        let mut server = RedisServer { child, port, dir };
        server.wait_until_ready().await?;
        Ok(server)
    }

    async fn wait_until_ready(&mut self) -> io::Result<()> {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Err(io::Error::other(format!(
                    "redis-server exited ({status}) before answering on port {}",
                    self.port
                )));
            }
            if ping(self.port).await.is_ok() {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("redis-server did not answer PING on port {} within {READY_TIMEOUT:?}", self.port),
                ));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Its URL, e.g. `redis://127.0.0.1:6390`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Kills the server and waits until it is gone (its port is free again).
    pub async fn stop(mut self) -> io::Result<()> {
        self.child.kill().await
    }

    /// Kills the server in place (it stays in its owner's list, dead): a node of a cluster that crashed.
    pub async fn kill(&mut self) -> io::Result<()> {
        self.child.kill().await
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Sends a raw RESP PING and expects `+PONG`.
async fn ping(port: u16) -> io::Result<()> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).await?;
    stream.write_all(b"PING\r\n").await?;
    let mut reply = [0u8; 7];
    stream.read_exact(&mut reply).await?;
    if &reply == b"+PONG\r\n" {
        Ok(())
    } else {
        Err(io::Error::other("unexpected PING reply"))
    }
}

/// A loopback port that was free a moment ago.
pub fn free_port() -> io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}
