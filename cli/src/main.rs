//! The `edgelimit` command line. See `edgelimit --help`.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use edgelimit_cli::bridge::{self, BridgeConfig};
use edgelimit_cli::dev::{self, DevConfig};
use edgelimit_cli::signals::shutdown_requested;

/// Exact distributed rate limiting for the edge.
#[derive(Parser)]
#[command(name = "edgelimit", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Commands,
}

#[derive(Subcommand)]
enum Commands {
    /// Serve the Upstash-compatible REST protocol over a real Redis.
    Bridge {
        /// Address to listen on (port 0 picks a free one; the chosen address is printed).
        #[arg(long, default_value = "127.0.0.1:8079")]
        listen: SocketAddr,
        /// Redis to forward to.
        #[arg(
            long = "redis",
            env = "EDGELIMIT_REDIS_URL",
            default_value = "redis://127.0.0.1:6379"
        )]
        redis_url: String,
        /// Bearer token clients must send.
        #[arg(long, env = "EDGELIMIT_TOKEN", hide_env_values = true)]
        token: String,
        /// Largest request body accepted, in bytes.
        #[arg(long, default_value_t = 1 << 20)]
        max_request_bytes: usize,
        /// Bound on connecting to Redis and on each reply, in milliseconds.
        #[arg(long, default_value_t = 2000)]
        redis_timeout_ms: u64,
    },
    /// Start the local stack: a private redis-server and the bridge in front of it.
    Dev {
        /// Address of the bridge.
        #[arg(long, default_value = "127.0.0.1:8079")]
        listen: SocketAddr,
        /// Port of the private redis-server.
        #[arg(long, default_value_t = 6390)]
        redis_port: u16,
        /// Token the bridge requires.
        #[arg(long, env = "EDGELIMIT_TOKEN", default_value = "dev-token")]
        token: String,
    },
}

#[tokio::main]
async fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Commands::Bridge {
            listen,
            redis_url,
            token,
            max_request_bytes,
            redis_timeout_ms,
        } => {
            run_bridge(
                listen,
                BridgeConfig {
                    redis_url,
                    token,
                    max_request_bytes,
                    redis_timeout: Duration::from_millis(redis_timeout_ms),
                },
            )
            .await
        }
        Commands::Dev {
            listen,
            redis_port,
            token,
        } => {
            dev::run(
                DevConfig {
                    listen,
                    redis_port,
                    token,
                },
                shutdown_requested(),
            )
            .await
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("edgelimit: {message}");
            ExitCode::from(2)
        }
    }
}

async fn run_bridge(listen: SocketAddr, config: BridgeConfig) -> Result<(), String> {
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| format!("could not listen on {listen}: {e}"))?;
    let address = listener.local_addr().map_err(|e| e.to_string())?;
    // Tests and scripts read this line to learn the port when --listen asked for port 0.
    println!(
        "edgelimit bridge listening on http://{address} (redis: {})",
        config.redis_url
    );
    bridge::serve(listener, config, shutdown_requested())
        .await
        .map_err(|e| e.to_string())
}
