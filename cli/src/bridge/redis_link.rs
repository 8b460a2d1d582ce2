//! The bridge's multiplexed connections to Redis, one per [`Lane`], each made on first use and remade after it breaks.
//!
//! The bridge opens the socket itself so that everything Redis sends passes through the reply cap
//! ([`super::reply_cap`]); the redis crate's `ConnectionManager` cannot take such a socket, so reconnecting is done
//! here: when the driver ends, the next request connects anew. A bridge started before Redis answers 503 until then.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, ConnectionAddr, ConnectionInfo};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::Mutex;

use super::reply_cap::CappedStream;
use super::write_batch::WriteBatching;

/// A socket to Redis, TCP or Unix.
pub(super) trait Socket: AsyncRead + AsyncWrite + Send + Unpin {}
impl<S: AsyncRead + AsyncWrite + Send + Unpin> Socket for S {}

/// A new socket to the Redis `info` names, read through the reply cap (`cap` bytes) and with batched writes
/// ([`WriteBatching`]): what every connection of the bridge is made of.
pub(super) async fn open_capped(
    info: &ConnectionInfo,
    cap: u64,
) -> redis::RedisResult<CappedStream<Pin<Box<dyn Socket>>>> {
    let socket: Pin<Box<dyn Socket>> = match info.addr() {
        ConnectionAddr::Tcp(host, port) => {
            let stream = tokio::net::TcpStream::connect((host.as_str(), *port)).await?;
            stream.set_nodelay(true)?;
            Box::pin(WriteBatching::new(stream))
        }
        #[cfg(unix)]
        ConnectionAddr::Unix(path) => Box::pin(WriteBatching::new(tokio::net::UnixStream::connect(path).await?)),
        other => {
            return Err(redis::RedisError::from(io::Error::new(
                io::ErrorKind::Unsupported,
                format!("the bridge connects to Redis over TCP or a Unix socket only, not {other}"),
            )))
        }
    };
    Ok(CappedStream::new(socket, cap))
}

/// Which connection a request runs on: bulk requests have their own, so that Redis serves the others' commands
/// between theirs instead of after them ([`super::fair_share`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    /// Decisions and every other small request.
    Main,
    /// Requests of many commands or large bodies.
    Bulk,
}

/// A lazily connected, self-healing handle to Redis: one connection per [`Lane`].
pub struct RedisLink {
    info: ConnectionInfo,
    timeout: Duration,
    max_reply_bytes: u64,
    lanes: [Mutex<Option<Live>>; 2],
}

/// The current connection and whether its driver still runs.
struct Live {
    connection: MultiplexedConnection,
    running: Arc<AtomicBool>,
}

/// Clears the flag when the driver task ends, however it ends (a panic included).
struct ClearOnDrop(Arc<AtomicBool>);

impl Drop for ClearOnDrop {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

impl RedisLink {
    /// A link to the Redis `info` names, as its user; connects on first use. `timeout` bounds connecting and each
    /// reply; no reply larger than `max_reply_bytes` reaches the bridge.
    pub fn new(info: ConnectionInfo, timeout: Duration, max_reply_bytes: u64) -> Self {
        RedisLink { info, timeout, max_reply_bytes, lanes: [Mutex::new(None), Mutex::new(None)] }
    }

    /// A handle to the main lane's connection, connecting first if there is none or it broke.
    pub async fn connection(&self) -> redis::RedisResult<MultiplexedConnection> {
        self.connection_after(Lane::Main, || async { Ok(()) }).await
    }

    /// `lane`'s connection, running `before_connecting` first whenever a connection must be made (once, under the
    /// lock). Its error is the request's, and nothing connects.
    pub async fn connection_after<F, Fut>(
        &self,
        lane: Lane,
        before_connecting: F,
    ) -> redis::RedisResult<MultiplexedConnection>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = redis::RedisResult<()>>,
    {
        let mut live = self.lanes[lane as usize].lock().await;
        if let Some(current) = live.as_ref() {
            if current.running.load(Ordering::Acquire) {
                return Ok(current.connection.clone());
            }
        }
        *live = None;
        before_connecting().await?;
        let connected = tokio::time::timeout(self.timeout, self.connect()).await.map_err(|_| {
            redis::RedisError::from(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("no connection within {} ms", self.timeout.as_millis()),
            ))
        })??;
        let connection = connected.connection.clone();
        *live = Some(connected);
        Ok(connection)
    }

    async fn connect(&self) -> redis::RedisResult<Live> {
        let socket = open_capped(&self.info, self.max_reply_bytes).await?;
        let config = AsyncConnectionConfig::new().set_response_timeout(Some(self.timeout));
        let (connection, driver) =
            MultiplexedConnection::new_with_config(self.info.redis_settings(), socket, config).await?;
        let running = Arc::new(AtomicBool::new(true));
        let clear = ClearOnDrop(running.clone());
        tokio::spawn(async move {
            let _clear = clear;
            driver.await;
        });
        Ok(Live { connection, running })
    }

    /// Where this link points, for error messages (without any password).
    pub fn describe(&self) -> String {
        format!("{}", self.info.addr())
    }
}
