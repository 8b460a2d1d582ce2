//! Stopping a script that runs too long, so that one request cannot stall every other.
//!
//! Redis runs one command at a time, so a long script stalls every client. When a request times out or Redis answers
//! `BUSY`, the bridge sends `SCRIPT KILL` (or `FUNCTION KILL` for an `FCALL`) on a connection of its own, as the
//! `--redis` URL's user. Redis reads it only after `busy-reply-threshold` (5 s by default): that is the recovery bound.
//! A script that has written is `UNKILLABLE` (only `SHUTDOWN NOSAVE` ends it, which the bridge will not do): the
//! bridge says so on stderr and in each 503 until it ends.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redis::{AsyncConnectionConfig, ConnectionInfo};

/// How long the kill may wait for Redis to read it, far above the default `busy-reply-threshold`; past it the next
/// timed-out request tries again.
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
        ScriptKiller { info, connect_timeout, busy: AtomicBool::new(false), unkillable: AtomicBool::new(false) }
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
                super::observe::SCRIPTS_KILLED.inc();
                false
            }
            // Nothing ran: the timeout had another cause, or the script ended.
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
