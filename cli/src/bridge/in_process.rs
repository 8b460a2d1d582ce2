//! The bridge as a task of the calling process, on a free loopback port, for the integration tests and the benchmark
//! driver: no built binary needed, and the caller can stop it (or Redis) at will.

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::{serve, BridgeConfig, BridgeError};

/// A bridge serving on `127.0.0.1:<free port>` until [`InProcessBridge::stop`] (or until dropped).
#[derive(Debug)]
pub struct InProcessBridge {
    url: String,
    stop: oneshot::Sender<()>,
    task: JoinHandle<Result<(), BridgeError>>,
}

impl InProcessBridge {
    /// Binds a free loopback port and serves the bridge there with `config`.
    pub async fn start(config: BridgeConfig) -> Result<InProcessBridge, BridgeError> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        let (stop, stopped) = oneshot::channel::<()>();
        // A dropped sender ends the wait too, so dropping the handle shuts the bridge down gracefully.
        let task = tokio::spawn(serve(listener, config, async {
            let _ = stopped.await;
        }));
        Ok(InProcessBridge { url, stop, task })
    }

    /// Its base URL, e.g. `http://127.0.0.1:40123`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Stops accepting, finishes the requests in flight and returns how serving ended.
    pub async fn stop(self) -> Result<(), BridgeError> {
        let _ = self.stop.send(());
        self.task
            .await
            .map_err(|e| BridgeError::Serve(std::io::Error::other(format!("the bridge task failed: {e}"))))?
    }
}
