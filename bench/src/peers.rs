//! The peers, called as their libraries call them: `@upstash/ratelimit`'s scripts read from the installed npm package
//! (with its keys, arguments and `Date.now()`), and Redisson's `RRateLimiter` acquire script
//! (`bench/peers/redisson_acquire.lua`) with a Java client's time and random id.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::LazyLock;

use edgelimit::{RestClient, Script, Value};

use crate::support::Context;

/// Where `@upstash/ratelimit` keeps its scripts, relative to the checkout.
const UPSTASH_BUNDLE: &str = "node_modules/@upstash/ratelimit/dist/index.mjs";

/// Redisson's `RRateLimiter` acquire script.
pub static REDISSON_ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../peers/redisson_acquire.lua")));

/// An algorithm `@upstash/ratelimit` has (its single-region variants), the index of its script in
/// [`UpstashScripts`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpstashAlgorithm {
    FixedWindow,
    SlidingWindow,
    TokenBucket,
}

/// The variables the bundle defines the scripts in, in [`UpstashAlgorithm`]'s order.
const UPSTASH_VARIABLES: [&str; 3] = ["fixedWindowLimitScript", "slidingWindowLimitScript", "tokenBucketLimitScript"];

/// `@upstash/ratelimit`'s limit scripts, as the installed package defines them.
#[derive(Debug, Clone)]
pub struct UpstashScripts([Script; 3]);

impl UpstashScripts {
    /// Reads the scripts from the checkout's `node_modules/`.
    pub fn load(checkout: &Path) -> Result<UpstashScripts, String> {
        let path = checkout.join(UPSTASH_BUNDLE);
        let bundle = std::fs::read_to_string(&path).map_err(|e| {
            format!(
                "could not read {} ({e}): @upstash/ratelimit's scripts are read from the checkout's node_modules; \
                 run scripts/bench, or `edgelimit-bench` from the repository root after `npm ci` (or scripts/setup)",
                path.display()
            )
        })?;
        let script = |variable: &str| -> Result<Script, String> {
            let declaration = format!("var {variable} = `");
            let text = bundle
                .find(&declaration)
                .map(|start| &bundle[start + declaration.len()..])
                .and_then(|text| text.find('`').map(|end| &text[..end]))
                .ok_or_else(|| {
                    format!(
                        "{} has no `{declaration}…`` any more: the installed @upstash/ratelimit is not the version \
                         package-lock.json pins; run `npm ci`",
                        path.display()
                    )
                })?;
            Ok(Script::new(text))
        };
        let [fixed, sliding, bucket] = UPSTASH_VARIABLES.map(script);
        Ok(UpstashScripts([fixed?, sliding?, bucket?]))
    }

    /// A limiter of `limit` per `window_ms` with this algorithm, its keys under `prefix`.
    pub fn limiter(&self, algorithm: UpstashAlgorithm, limit: u32, window_ms: u64, prefix: &str) -> UpstashLimiter {
        let script = self.0[algorithm as usize].clone();
        UpstashLimiter { algorithm, script, limit, window_ms, prefix: prefix.to_owned() }
    }
}

/// One `@upstash/ratelimit` limit, called as the library calls its script.
#[derive(Debug, Clone)]
pub struct UpstashLimiter {
    algorithm: UpstashAlgorithm,
    script: Script,
    limit: u32,
    window_ms: u64,
    prefix: String,
}

impl UpstashLimiter {
    /// The keys an identifier's decision at `now` touches (the library's `[identifier, bucket].join(":")`).
    pub fn keys(&self, id: &str, now: u64) -> Vec<String> {
        let identifier = format!("{}:{id}", self.prefix);
        let window = now / self.window_ms;
        match self.algorithm {
            UpstashAlgorithm::FixedWindow => vec![format!("{identifier}:{window}")],
            UpstashAlgorithm::SlidingWindow => {
                vec![format!("{identifier}:{window}"), format!("{identifier}:{}", window.saturating_sub(1))]
            }
            UpstashAlgorithm::TokenBucket => vec![identifier],
        }
    }

    /// The arguments the library passes at `now` for one request (refill = limit per window for the bucket).
    fn args(&self, now: u64) -> Vec<String> {
        let (limit, window) = (self.limit.to_string(), self.window_ms.to_string());
        match self.algorithm {
            UpstashAlgorithm::FixedWindow => vec![limit, window, "1".into()],
            UpstashAlgorithm::SlidingWindow => vec![limit, now.to_string(), window, "1".into()],
            UpstashAlgorithm::TokenBucket => vec![limit.clone(), window, limit, now.to_string(), "1".into()],
        }
    }

    /// Decides one request at the caller's time `now`; whether it was granted, as the library reads the reply.
    pub async fn limit(&self, client: &RestClient, id: &str, now: u64) -> Result<bool, String> {
        let reply = self
            .script
            .run(client, &self.keys(id, now), &self.args(now))
            .await
            .context("@upstash/ratelimit's script failed")?;
        let first = reply
            .into_array()
            .ok()
            .and_then(|items| items.into_iter().next())
            .and_then(|first| first.into_int().ok())
            .ok_or("@upstash/ratelimit's script answered something other than an array of numbers")?;
        Ok(match self.algorithm {
            // {tokens used after this request, limit}: the library grants while used <= limit.
            UpstashAlgorithm::FixedWindow => first <= i64::from(self.limit),
            // {remaining, …}, -1 when denied.
            UpstashAlgorithm::SlidingWindow | UpstashAlgorithm::TokenBucket => first >= 0,
        })
    }
}

/// A Redisson client acquiring on `RRateLimiter`s by name, as a Java client does: with its own clock and a fresh
/// id per request (Redisson's is random), so that no two grants share a log member.
#[derive(Debug, Default)]
pub struct RedissonClient {
    requests: AtomicU64,
}

impl RedissonClient {
    /// The five keys of the limiter `name` (config hash, value and permits, overall and per client; the layout
    /// Redisson and [`edgelimit::RedissonLimiter`] share), with the client id the script runs under here, `java`
    /// (the per-client keys stay unused: the limiters are overall).
    pub fn keys(name: &str) -> Vec<String> {
        let client_id = "java";
        vec![
            name.to_owned(),
            format!("{{{name}}}:value"),
            format!("{{{name}}}:value:{client_id}"),
            format!("{{{name}}}:permits"),
            format!("{{{name}}}:permits:{client_id}"),
        ]
    }

    /// `tryAcquire(1)` on the limiter `name` (its rate set first: [`edgelimit::RedissonLimiter::set_rate`] writes
    /// Redisson's config) at the caller's time `now`; whether it was granted (Redisson answers nil, or the wait).
    pub async fn try_acquire(&self, client: &RestClient, name: &str, now: u64) -> Result<bool, String> {
        let request = self.requests.fetch_add(1, Ordering::Relaxed);
        let args = ["1".to_owned(), now.to_string(), format!("r{request}")];
        match REDISSON_ACQUIRE
            .run(client, &RedissonClient::keys(name), &args)
            .await
            .context("Redisson's acquire script failed")?
        {
            Value::Nil => Ok(true),
            Value::Int(_) => Ok(false),
            other => Err(format!("Redisson's acquire script answered {other}, not nil or a wait")),
        }
    }
}
