//! The `edgelimit` command line. See `edgelimit --help`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

mod rules;

use clap::{Args, Parser, Subcommand};
use edgelimit::limit::Limiter;
use edgelimit::{Mode, Rate, RedissonLimiter, RestClient};
use edgelimit_cli::admin::{self, duration, Outcome, SetHow};
use edgelimit_cli::bridge::{self, BridgeConfig, CorsOrigins, Profile, RedisAcl};
use edgelimit_cli::dev::{self, DevConfig};
use edgelimit_cli::doctor;
use edgelimit_cli::limiter_commands::{self, AlgorithmArgs, QuotaArgs, Target};
use edgelimit_cli::playground::PlaygroundConfig;
use edgelimit_cli::say;
use edgelimit_cli::signals::shutdown_requested;
use edgelimit_cli::worker_dev::WorkerConfig;

/// Exact distributed rate limiting for the edge.
#[derive(Parser)]
#[command(name = "edgelimit", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Commands,
}

/// The servers' runtime (bridge, dev).
#[derive(Args)]
struct Threads {
    /// Worker threads of the async runtime, which runs the bridge's requests [default: half the machine's cores,
    /// at least 1: the bridge's Redis and clients often share its host].
    #[arg(long, env = "EDGELIMIT_THREADS", value_parser = clap::value_parser!(u16).range(1..=1024))]
    threads: Option<u16>,
}

/// The limiter a command acts on, by name, and the REST endpoint it lives behind.
#[derive(Args)]
struct Named {
    /// The limiter's name: its keys live under `edgelimit:{NAME}`, as npm's `name` (npm's default name is the
    /// algorithm and interval, e.g. `sliding_log-10000ms`); with `--algorithm redisson`, Redisson's
    /// `getRateLimiter(NAME)`.
    name: String,
    /// REST endpoint URL [env: EDGELIMIT_URL, then UPSTASH_REDIS_REST_URL].
    #[arg(long)]
    url: Option<String>,
    /// REST token [env: EDGELIMIT_TOKEN, then UPSTASH_REDIS_REST_TOKEN].
    #[arg(long)]
    token: Option<String>,
    /// How long each REST request may take, in milliseconds.
    #[arg(long, env = "EDGELIMIT_TIMEOUT_MS", default_value_t = admin::DEFAULT_TIMEOUT_MS,
          value_parser = clap::value_parser!(u64).range(1..))]
    timeout_ms: u64,
}

impl Named {
    fn client(&self) -> Result<RestClient, String> {
        admin::endpoint(self.url.clone(), self.token.clone(), self.timeout_ms)
    }

    /// The limiter `--algorithm` and its flags choose under this name.
    fn target(&self, algorithm: AlgorithmArgs) -> Result<Target, String> {
        algorithm.target(&self.name, || self.client())
    }
}

#[derive(Subcommand)]
enum RulesCommand {
    /// Check RULES, EDGELIMIT_PREFIX and EDGELIMIT_LAYOUT of a wrangler.toml's [vars] with the Worker's own code and
    /// messages: exit 0 when the Worker would start, 1 with its message when not, 2 when the file is no TOML.
    Check {
        #[arg(default_value = "wrangler.toml")]
        path: PathBuf,
    },
}

#[derive(Subcommand)]
enum Commands {
    /// Serve the Upstash-compatible REST protocol over a real Redis.
    Bridge {
        /// Address to listen on (port 0 picks a free one; the chosen address is printed).
        #[arg(long, env = "EDGELIMIT_LISTEN", default_value = "127.0.0.1:8079")]
        listen: SocketAddr,
        /// Redis to forward to: one Redis, `redis://[user:password@]host:port` (or `unix:///path`); or a Redis
        /// Cluster, `redis+cluster://[user:password@]host:port[,host:port…]`, any of its nodes (the bridge reads the
        /// others from them, routes each command to its key's master, and follows MOVED/ASK).
        #[arg(long = "redis", env = "EDGELIMIT_REDIS_URL", default_value = "redis://127.0.0.1:6379")]
        redis_url: String,
        /// An admin token: it may run everything the bridge serves. Give Workers a limiter token instead
        /// (--tokens-file).
        #[arg(long, env = "EDGELIMIT_TOKEN", hide_env_values = true)]
        token: Option<String>,
        /// Tokens with their profiles, as in a tokens file: `limiter:<token> readonly:<token>`.
        #[arg(long, env = "EDGELIMIT_TOKENS", hide_env_values = true, value_parser = parse_tokens)]
        tokens: Option<TokenList>,
        /// A file of tokens, `<profile>:<token>` each (profiles: limiter, readonly, admin), read again when it
        /// changes, so tokens rotate without a restart.
        #[arg(long, env = "EDGELIMIT_TOKENS_FILE")]
        tokens_file: Option<PathBuf>,
        /// `provision`: run each profile's requests as its own Redis ACL user (edgelimit-limiter,
        /// edgelimit-readonly), which the bridge creates; `off`: run every request as the --redis user (a Redis whose
        /// ACL the bridge may not change; readonly tokens are then refused).
        #[arg(long, env = "EDGELIMIT_REDIS_ACL", default_value = "provision", value_parser = parse_redis_acl)]
        redis_acl: RedisAcl,
        /// A key pattern a limiter token's scripts may be given, held by the bridge's fence and by the limiter
        /// profile's Redis user (`*` and `?`; repeat for several).
        #[arg(long = "limiter-keys", env = "EDGELIMIT_LIMITER_KEYS", value_delimiter = ',',
              default_values_t = bridge::profile::DEFAULT_LIMITER_KEYS.map(str::to_owned))]
        limiter_keys: Vec<String>,
        /// Largest request body accepted, in bytes.
        #[arg(long, env = "EDGELIMIT_MAX_REQUEST_BYTES", default_value_t = 1 << 20)]
        max_request_bytes: usize,
        /// Largest Redis reply passed on, in bytes as Redis sends them: a larger one is discarded as it arrives and
        /// answered HTTP 413, never buffered (the command has run all the same).
        #[arg(long, env = "EDGELIMIT_MAX_REPLY_BYTES", default_value_t = bridge::DEFAULT_MAX_REPLY_BYTES,
              value_parser = clap::value_parser!(u64).range(1..))]
        max_reply_bytes: u64,
        /// The most bytes held at once for large requests (above 64 KiB, counted ten times while they are parsed)
        /// and large responses (until their clients have read them), all requests together: one that finds them
        /// taken is answered HTTP 429 (retry), one larger than all of them HTTP 413.
        #[arg(long, env = "EDGELIMIT_MAX_MEMORY_IN_FLIGHT", default_value_t = bridge::DEFAULT_MAX_MEMORY_IN_FLIGHT,
              value_parser = clap::value_parser!(u64).range(1..))]
        max_memory_in_flight: u64,
        /// Bound on connecting to Redis and on each reply, in milliseconds; on a cluster also how long a request
        /// keeps trying while the cluster moves a slot or fails over (a command is sent again only on replies that
        /// prove it did not run).
        #[arg(long, env = "EDGELIMIT_REDIS_TIMEOUT_MS", default_value_t = 2000)]
        redis_timeout_ms: u64,
        /// A web page origin allowed to call the bridge from a browser, e.g. http://127.0.0.1:8080 (repeat for
        /// several; `*` for any). None by default.
        #[arg(long = "cors-origin", env = "EDGELIMIT_CORS_ORIGINS", value_delimiter = ',')]
        cors_origins: Vec<String>,
        /// The most HTTP connections open at once; past it new ones wait in the listen backlog. Keep it below the
        /// file descriptors the bridge may open (`ulimit -n`).
        #[arg(long, env = "EDGELIMIT_MAX_CONNECTIONS", default_value_t = bridge::DEFAULT_MAX_CONNECTIONS as u32,
              value_parser = clap::value_parser!(u32).range(1..))]
        max_connections: u32,
        /// The largest limit a limiter token may give a sliding log or a concurrency limit: their state holds one entry
        /// per grant, and each decision's work in Redis grows with it. Larger ones need a stored quota (admin).
        #[arg(long, env = "EDGELIMIT_MAX_LOG_LIMIT", default_value_t = bridge::fence::MAX_LOG_LIMIT,
              value_parser = clap::value_parser!(u64).range(1..))]
        max_log_limit: u64,
        /// A token that may read GET /metrics and nothing else (admin tokens may too).
        #[arg(long, env = "EDGELIMIT_METRICS_TOKEN", hide_env_values = true)]
        metrics_token: Option<String>,
        /// How refused requests are logged on stderr: `text` or `json` (one object per line).
        #[arg(long, env = "EDGELIMIT_LOG_FORMAT", default_value = "text", value_parser = ["text", "json"])]
        log_format: String,
        #[command(flatten)]
        threads: Threads,
    },
    /// Start the local stack: a private redis-server, the bridge in front of it, the playground page, and the Worker
    /// (wrangler dev) in front of a demo origin.
    Dev {
        /// Address of the bridge.
        #[arg(long, default_value = "127.0.0.1:8079")]
        listen: SocketAddr,
        /// Port of the private redis-server.
        #[arg(long, default_value_t = 6390)]
        redis_port: u16,
        /// Run a private Redis Cluster (3 masters, 3 replicas, on free ports) instead of one redis-server, the bridge
        /// in front of it (`--redis redis+cluster://…`).
        #[arg(long, conflicts_with = "redis_port")]
        cluster: bool,
        /// The bridge's admin token (for your clients, the CLI and the playground).
        #[arg(long, env = "EDGELIMIT_TOKEN", default_value = "dev-token")]
        token: String,
        /// The bridge's limiter token, which the Worker gets.
        #[arg(long, env = "EDGELIMIT_LIMITER_TOKEN", default_value = "dev-limiter-token")]
        limiter_token: String,
        /// Leave out the Worker (it runs when the current directory is a checkout with wrangler installed).
        #[arg(long)]
        no_worker: bool,
        /// Port of the Worker (`wrangler dev`).
        #[arg(long, default_value_t = 8787)]
        worker_port: u16,
        /// Port of the demo origin behind the Worker.
        #[arg(long, default_value_t = 8081)]
        origin_port: u16,
        /// Leave out the playground page (it is served when the current directory is a checkout with `www/`).
        #[arg(long)]
        no_playground: bool,
        #[command(flatten)]
        threads: Threads,
        /// Port of the playground page.
        #[arg(long, default_value_t = 8080)]
        playground_port: u16,
    },
    /// Check a Worker's rules offline, as the Worker does when it starts.
    Rules {
        #[command(subcommand)]
        command: RulesCommand,
    },
    /// Print the scripts edgelimit sends to Redis: with a NAME its exact text, else each one's SHA1 and name.
    Scripts {
        /// A script's name, as listed (e.g. `limits`, `batch/gcra`).
        name: Option<String>,
        /// Write every script to DIR/<name>.lua instead (for luacheck).
        #[arg(long, conflicts_with = "name")]
        out: Option<PathBuf>,
    },
    /// Check that an endpoint and the Redis behind it can hold limits safely (reachable, token, maxmemory-policy
    /// noeviction, scripts, clock): one JSON line per check, then a summary; exit 0 when none failed, 1 otherwise.
    Doctor {
        /// REST endpoint URL [env: EDGELIMIT_URL, then UPSTASH_REDIS_REST_URL].
        #[arg(long)]
        url: Option<String>,
        /// REST token [env: EDGELIMIT_TOKEN, then UPSTASH_REDIS_REST_TOKEN].
        #[arg(long)]
        token: Option<String>,
        /// How long each REST request may take, in milliseconds.
        #[arg(long, env = "EDGELIMIT_TIMEOUT_MS", default_value_t = admin::DEFAULT_TIMEOUT_MS,
              value_parser = clap::value_parser!(u64).range(1..))]
        timeout_ms: u64,
    },
    /// Set the rate of the Redisson-layout limiter (`--algorithm redisson`, shared with Java's Redisson
    /// `RRateLimiter`), by default replacing any rate and clearing the state. The other algorithms take their numbers
    /// on each command line, or from a quota stored with `configure`.
    SetRate {
        #[command(flatten)]
        named: Named,
        /// Permits per interval.
        #[arg(long)]
        rate: u32,
        /// The interval, e.g. 1s, 250ms, 1m.
        #[arg(long, value_parser = duration)]
        interval: Duration,
        /// Let the configuration vanish after this long unused (at least the interval).
        #[arg(long, value_parser = duration)]
        keep_alive: Option<Duration>,
        /// Give each client id its own budget (`acquire --algorithm redisson --client-id ID`).
        #[arg(long)]
        per_client: bool,
        /// Only set it when no rate is set (first set wins).
        #[arg(long, conflicts_with = "keep_state")]
        if_absent: bool,
        /// Change the rate of an existing limiter, keeping the permits in use under the new rate (Redisson's
        /// updateRate: exit 1, writing nothing, when no rate is set).
        #[arg(long)]
        keep_state: bool,
    },
    /// Change the keep-alive of an existing Redisson-layout limiter: it vanishes after this long unused (every use
    /// from either side renews it), or with `none` stays until deleted. Exit 1 when no rate is set.
    KeepAlive {
        #[command(flatten)]
        named: Named,
        /// The keep-alive (at least the interval), e.g. 1h; or `none`.
        #[arg(value_parser = duration_or_none)]
        keep_alive: Lifetime,
    },
    /// Expire every key of an existing Redisson-layout limiter (its rate and state) after this long, as Redisson's
    /// `expire`; `none` clears the expiry (`clearExpire`). Exit 1 when no rate is set.
    Expire {
        #[command(flatten)]
        named: Named,
        /// How long until it vanishes, e.g. 10m; or `none`.
        #[arg(value_parser = duration_or_none)]
        ttl: Lifetime,
    },
    /// Take permits; prints the decision (and, but for redisson, the grant's receipt for `release --receipt`).
    /// Exit 0 granted, 1 denied, 2 error.
    Acquire {
        #[command(flatten)]
        named: Named,
        #[command(flatten)]
        algorithm: AlgorithmArgs,
        /// Permits to take.
        #[arg(long, default_value_t = 1)]
        permits: u32,
        /// Wait up to this long for the permits (default: do not wait).
        #[arg(long, value_parser = duration)]
        timeout: Option<Duration>,
    },
    /// Print the permits available now, taking nothing.
    Permits {
        #[command(flatten)]
        named: Named,
        #[command(flatten)]
        algorithm: AlgorithmArgs,
    },
    /// Print the configuration stored in Redis (exit 1 when none): with `--algorithm redisson` the rate `set-rate`
    /// set, with `--algorithm stored` the quota `configure` saved.
    Config {
        #[command(flatten)]
        named: Named,
        #[command(flatten)]
        algorithm: AlgorithmArgs,
    },
    /// Give back a grant by the receipt acquire printed (`--receipt`; a concurrency lease is released), or with
    /// `--algorithm redisson` a number of permits, newest grants first.
    Release {
        #[command(flatten)]
        named: Named,
        #[command(flatten)]
        algorithm: AlgorithmArgs,
        /// With redisson only: permits to give back [default: 1].
        permits: Option<u32>,
        /// The grant's receipt, as acquire printed it (not with redisson).
        #[arg(long, alias = "lease")]
        receipt: Option<String>,
    },
    /// Forget the identifier's state (`--id`), or with `--algorithm redisson` delete the limiter (rate and state).
    Delete {
        #[command(flatten)]
        named: Named,
        #[command(flatten)]
        algorithm: AlgorithmArgs,
    },
    /// Store a quota in Redis under the limiter's name: every limiter built as stored (`--algorithm stored`, Rust's
    /// `Limiter::stored`) uses it from its next decision on, with no redeploy.
    Configure {
        #[command(flatten)]
        named: Named,
        #[command(flatten)]
        quota: QuotaArgs,
        /// Remove the stored quota instead.
        #[arg(long, conflicts_with_all = ["algorithm", "limit", "interval", "rate"])]
        remove: bool,
    },
}

/// `edgelimit scripts`: one script's text, every script's SHA1, or every script written under `out`.
fn print_scripts(name: Option<String>, out: Option<PathBuf>) -> Result<(), String> {
    if let Some(dir) = out {
        for (name, script) in edgelimit::lua::NAMES.iter().zip(edgelimit::lua::every_script()) {
            let path = dir.join(format!("{name}.lua"));
            let written = std::fs::create_dir_all(path.parent().unwrap_or(&dir))
                .and_then(|()| std::fs::write(&path, script.source()));
            written.map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        }
        return Ok(());
    }
    match name {
        None => print!("{}", edgelimit::lua::sha1sums()),
        Some(name) => match edgelimit::lua::script_named(name.trim_end_matches(".lua")) {
            Some(script) => print!("{}", script.source()),
            None => {
                let names = edgelimit::lua::NAMES.join(", ");
                return Err(format!("no script named {name:?}; the scripts are {names}"));
            }
        },
    }
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Commands::Rules { command: RulesCommand::Check { path } } = &cli.command {
        return rules::check(path);
    }
    let threads = match &cli.command {
        Commands::Bridge { threads, .. } | Commands::Dev { threads, .. } => threads.threads,
        _ => None,
    };
    match edgelimit_cli::runtime::build(threads) {
        Ok(runtime) => runtime.block_on(run_to_exit(cli.command)),
        Err(e) => {
            eprintln!("edgelimit: {e}");
            ExitCode::from(2)
        }
    }
}

async fn run_to_exit(command: Commands) -> ExitCode {
    match run(command).await {
        Ok(Some(outcome)) => {
            say!("{}", outcome.output);
            ExitCode::from(outcome.exit_code)
        }
        Ok(None) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("edgelimit: {message}");
            ExitCode::from(2)
        }
    }
}

/// Runs one command: servers return `None` when they stop, limiter commands their outcome.
async fn run(command: Commands) -> Result<Option<Outcome>, String> {
    let outcome = match command {
        // Checked in main, with no runtime.
        Commands::Rules { .. } => return Err("rules check runs before the runtime (a bug in edgelimit)".into()),
        Commands::Bridge {
            listen,
            redis_url,
            token,
            tokens,
            tokens_file,
            redis_acl,
            limiter_keys,
            max_request_bytes,
            max_reply_bytes,
            max_memory_in_flight,
            redis_timeout_ms,
            cors_origins,
            metrics_token,
            log_format,
            max_connections,
            max_log_limit,
            threads: _,
        } => {
            bridge::init_logs(log_format == "json");
            let config = BridgeConfig {
                redis_url,
                token: token.unwrap_or_default(),
                tokens: tokens.map(|list| list.0).unwrap_or_default(),
                tokens_file,
                redis_acl,
                limiter_keys,
                max_request_bytes,
                max_reply_bytes,
                max_memory_in_flight,
                redis_timeout: Duration::from_millis(redis_timeout_ms),
                cors_origins: CorsOrigins(cors_origins),
                metrics_token,
                max_connections: max_connections as usize,
                max_log_limit,
            };
            return run_bridge(listen, config).await.map(|()| None);
        }
        Commands::Dev {
            listen,
            redis_port,
            cluster,
            token,
            limiter_token,
            no_worker,
            worker_port,
            origin_port,
            no_playground,
            playground_port,
            threads: _,
        } => {
            let root = std::env::current_dir().map_err(|e| format!("no current directory: {e}"))?;
            let worker = (!no_worker).then(|| WorkerConfig::in_checkout(&root, worker_port, origin_port)).flatten();
            let playground = (!no_playground).then(|| PlaygroundConfig::in_checkout(&root, playground_port)).flatten();
            let config = DevConfig { listen, redis_port, cluster, token, limiter_token, worker, playground };
            return dev::run(config, shutdown_requested()).await.map(|()| None);
        }
        Commands::Scripts { name, out } => return print_scripts(name, out).map(|()| None),
        Commands::Doctor { url, token, timeout_ms } => doctor::run(&admin::endpoint(url, token, timeout_ms)?).await,
        Commands::KeepAlive { named, keep_alive } => {
            let limiter = RedissonLimiter::new(named.client()?, &named.name).map_err(|e| e.to_string())?;
            admin::lifetime(&limiter, admin::Lifetime::KeepAlive, keep_alive.0).await.map_err(|e| e.to_string())?
        }
        Commands::Expire { named, ttl } => {
            let limiter = RedissonLimiter::new(named.client()?, &named.name).map_err(|e| e.to_string())?;
            admin::lifetime(&limiter, admin::Lifetime::Expire, ttl.0).await.map_err(|e| e.to_string())?
        }
        Commands::SetRate { named, rate, interval, keep_alive, per_client, if_absent, keep_state } => {
            let mut rate = Rate::new(rate, interval).map_err(|e| e.to_string())?;
            if let Some(keep_alive) = keep_alive {
                rate = rate.with_keep_alive(keep_alive).map_err(|e| e.to_string())?;
            }
            let mode = if per_client { Mode::PerClient } else { Mode::Overall };
            let how = match (if_absent, keep_state) {
                (true, _) => SetHow::IfAbsent,
                (_, true) => SetHow::KeepState,
                _ => SetHow::Replace,
            };
            let limiter = RedissonLimiter::new(named.client()?, &named.name).map_err(|e| e.to_string())?;
            admin::set_rate(&limiter, rate, mode, how).await.map_err(|e| e.to_string())?
        }
        Commands::Acquire { named, algorithm, permits, timeout } => {
            named.target(algorithm)?.acquire(permits, timeout).await?
        }
        Commands::Permits { named, algorithm } => named.target(algorithm)?.permits().await?,
        Commands::Config { named, algorithm } => named.target(algorithm)?.config().await?,
        Commands::Release { named, algorithm, permits, receipt } => {
            named.target(algorithm)?.release(permits, receipt.as_deref()).await?
        }
        Commands::Delete { named, algorithm } => named.target(algorithm)?.delete().await?,
        Commands::Configure { named, quota, remove } => {
            let quota = if remove { None } else { Some(quota.quota()?) };
            let limiter = Limiter::stored(named.client()?, &named.name).map_err(|e| e.to_string())?;
            limiter_commands::configure(&limiter, quota).await.map_err(|e| e.to_string())?
        }
    };
    Ok(Some(outcome))
}

async fn run_bridge(listen: SocketAddr, config: BridgeConfig) -> Result<(), String> {
    // Before listening: nothing should announce an address that will not serve.
    bridge::check(&config).map_err(|e| e.to_string())?;
    let listener =
        tokio::net::TcpListener::bind(listen).await.map_err(|e| format!("could not listen on {listen}: {e}"))?;
    let address = listener.local_addr().map_err(|e| e.to_string())?;
    // Tests and scripts read this line to learn the port when --listen asked for port 0.
    say!("edgelimit bridge listening on http://{address} (redis: {})", bridge::redis_address(&config.redis_url));
    bridge::serve(listener, config, shutdown_requested()).await.map_err(|e| e.to_string())
}

/// A lifetime argument: a duration, or `none` (a type of its own, so clap does not read it as a list).
#[derive(Clone)]
struct Lifetime(Option<Duration>);

fn duration_or_none(text: &str) -> Result<Lifetime, String> {
    if text == "none" {
        return Ok(Lifetime(None));
    }
    duration(text).map(|d| Lifetime(Some(d)))
}

/// `--redis-acl`: `provision` or `off`.
fn parse_redis_acl(text: &str) -> Result<RedisAcl, String> {
    match text {
        "provision" => Ok(RedisAcl::Provision),
        "off" => Ok(RedisAcl::Off),
        _ => Err("expected provision (an ACL user per profile) or off (every request as the --redis user)".into()),
    }
}

/// `--tokens`: entries as in a tokens file (one value holding them all, hence a type of its own for clap).
#[derive(Clone)]
struct TokenList(Vec<(Profile, String)>);

fn parse_tokens(text: &str) -> Result<TokenList, String> {
    bridge::tokens::entries(text, "--tokens (EDGELIMIT_TOKENS)").map(TokenList)
}
