//! Stopping a script that runs too long, so that one request cannot stall every other.
//!
//! Redis runs one command at a time: while a script runs, every other client waits (a pool of connections would not
//! help). When a request times out or Redis answers `BUSY`, the bridge sends `SCRIPT KILL` on a connection of its
//! own, as the `--redis` URL's user (which must hold `+script|kill`), or `FUNCTION KILL` when Redis says a function
//! (`FCALL`) is what runs (`+function|kill`). Redis reads other clients only once the script
//! has run `busy-reply-threshold` ms (5000 by default), so that is when the kill lands and the requests waiting
//! behind the script go on: the recovery bound is that threshold plus one connect, whatever the bridge's timeout.
//!
//! A script that has written cannot be killed (Redis would lose atomicity): Redis answers `UNKILLABLE`, and only
//! `SHUTDOWN NOSAVE` ends it, which the bridge will not do on its own (it loses every write since the last save).
//! The bridge then says so on stderr and in each 503 until the script ends by itself.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redis::{AsyncConnectionConfig, ConnectionInfo};

/// How long the kill may wait for Redis to read it: far above the default `busy-reply-threshold` of 5 s. A Redis
/// configured with a longer threshold answers later than this; the next timed-out request then tries again.
const KILL_WAIT: Duration = Duration::from_secs(60);

/// What the bridge tells a client while an unkillable script holds Redis.
pub const UNKILLABLE_NOTE: &str = "a script that has written is running past the timeout and cannot be killed (only \
     SHUTDOWN NOSAVE would end it, losing writes): Redis answers again when it ends";

/// Sends `SCRIPT KILL` when asked, one at a time.
#[derive(Debug)]
pub struct ScriptKiller {
    info: ConnectionInfo,
    connect_timeout: Duration,
    busy: AtomicBool,
    unkillable: AtomicBool,
}

impl ScriptKiller {
    /// A killer that connects as `info`'s user, within `connect_timeout`.
    pub fn new(info: ConnectionInfo, connect_timeout: Duration) -> Self {
        ScriptKiller {
            info,
            connect_timeout,
            busy: AtomicBool::new(false),
            unkillable: AtomicBool::new(false),
        }
    }

    /// Starts a kill in the background, unless one is under way already.
    pub fn start(self: &Arc<Self>) {
        if self.busy.swap(true, Ordering::AcqRel) {
            return;
        }
        let killer = self.clone();
        tokio::spawn(async move {
            killer.kill().await;
            killer.busy.store(false, Ordering::Release);
        });
    }

    /// True while the last kill found a script that has written (see the module's docs).
    pub fn unkillable(&self) -> bool {
        self.unkillable.load(Ordering::Acquire)
    }

    async fn kill(&self) {
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.connect_timeout))
            .set_response_timeout(Some(KILL_WAIT));
        let connection = match redis::Client::open(self.info.clone()) {
            Ok(client) => client.get_multiplexed_async_connection_with_config(&config).await,
            Err(e) => Err(e),
        };
        let reply: redis::RedisResult<()> = match connection {
            Ok(mut connection) => match redis::cmd("SCRIPT").arg("KILL").query_async(&mut connection).await {
                // What runs is a function (FCALL), not a script: Redis stops it with FUNCTION KILL only.
                Err(e) if e.code() == Some("BUSY") => {
                    redis::cmd("FUNCTION").arg("KILL").query_async(&mut connection).await
                }
                reply => reply,
            },
            Err(e) => Err(e),
        };
        let unkillable = match reply {
            Ok(()) => {
                eprintln!("edgelimit bridge: a script or function ran past the timeout; stopped it");
                false
            }
            // Nothing ran: the timeout had another cause (Redis slow or unreachable), or the script ended.
            Err(e) if e.code() == Some("NOTBUSY") => false,
            Err(e) if e.code() == Some("UNKILLABLE") => {
                eprintln!("edgelimit bridge: ERROR: {UNKILLABLE_NOTE}");
                true
            }
            Err(e) => {
                eprintln!(
                    "edgelimit bridge: WARNING: could not stop a script or function for a request that timed out \
                     (SCRIPT KILL, FUNCTION KILL): {e}"
                );
                self.unkillable()
            }
        };
        self.unkillable.store(unkillable, Ordering::Release);
    }
}
