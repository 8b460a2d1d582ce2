//! Redis cost of each algorithm: µs of Redis CPU per decision (`INFO commandstats`), Redis commands per decision,
//! and Redis memory per identifier (`MEMORY USAGE`), next to `@upstash/ratelimit`'s own scripts (read from the
//! installed npm package, run with the keys and arguments that library sends) on the same Redis, in the same run.
//!
//! Workload per algorithm: a limit of 1000 per second; for 2000 ms of explicit time, two requests every ms on one
//! identifier, so about half are granted (the token bucket: its burst, then one per ms). "busy" is the memory of
//! that identifier afterwards; "idle" of an identifier that made one request.
//!
//! Run: `npm ci` (for the peer's scripts), then `cargo run --release -p edgelimit-tests --example algorithms`

use std::time::Duration;

use edgelimit::limit::{Limiter, Quota};
use edgelimit::{RestClient, Script};
use edgelimit_tests::redis_stats::{memory_usage, reset, script_cost};
use edgelimit_tests::Stack;

const T0: u64 = 1_700_000_000_000;
const MEASURED_MS: u64 = 2_000;
const LIMIT: u32 = 1000;
const WINDOW_MS: u64 = 1000;

/// One side of a comparison: decides a request at `now`, and names the keys an identifier occupies.
enum Contender {
    Ours(Limiter),
    Upstash(UpstashScript, Script),
}

#[derive(Clone, Copy)]
enum UpstashScript {
    FixedWindow,
    SlidingWindow,
    TokenBucket,
}

impl UpstashScript {
    fn variable(self) -> &'static str {
        match self {
            UpstashScript::FixedWindow => "fixedWindowLimitScript",
            UpstashScript::SlidingWindow => "slidingWindowLimitScript",
            UpstashScript::TokenBucket => "tokenBucketLimitScript",
        }
    }

    /// The script's text, as the installed `@upstash/ratelimit` defines it.
    fn load(self) -> Script {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../node_modules/@upstash/ratelimit/dist/index.mjs"
        );
        let bundle = std::fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("{path}: {e}; run `npm ci` first to install @upstash/ratelimit"));
        let start = bundle
            .find(&format!("var {} = `", self.variable()))
            .expect("script variable");
        let text = &bundle[start..];
        let text = &text[text.find('`').unwrap() + 1..];
        Script::new(&text[..text.find('`').unwrap()])
    }
}

impl Contender {
    fn keys(&self, now: u64, id: &str) -> Vec<String> {
        match self {
            Contender::Ours(limiter) => vec![limiter.state_key(id)],
            Contender::Upstash(kind, _) => {
                let window = now / WINDOW_MS;
                match kind {
                    UpstashScript::FixedWindow => vec![format!("upstash:{id}:{window}")],
                    UpstashScript::SlidingWindow => {
                        vec![format!("upstash:{id}:{window}"), format!("upstash:{id}:{}", window - 1)]
                    }
                    UpstashScript::TokenBucket => vec![format!("upstash:{id}")],
                }
            }
        }
    }

    async fn decide(&self, client: &RestClient, now: u64, id: &str) {
        match self {
            Contender::Ours(limiter) => {
                limiter.clone().at(now).limit(id, 1).await.unwrap();
            }
            Contender::Upstash(kind, script) => {
                let (limit, window) = (LIMIT.to_string(), WINDOW_MS.to_string());
                let args = match kind {
                    UpstashScript::FixedWindow => vec![limit, window, "1".into()],
                    UpstashScript::SlidingWindow => vec![limit, now.to_string(), window, "1".into()],
                    UpstashScript::TokenBucket => vec![limit, window, LIMIT.to_string(), now.to_string(), "1".into()],
                };
                script.run(client, &self.keys(now, id), &args).await.unwrap();
            }
        }
    }
}

struct Cost {
    micros: f64,
    commands: f64,
    idle: u64,
    busy: u64,
}

async fn measure(client: &RestClient, contender: &Contender) -> Cost {
    // Warm the script cache, so no EVAL fallback is counted.
    contender.decide(client, T0 - 10 * WINDOW_MS, "warm-up").await;
    reset(client).await;
    for ms in 0..MEASURED_MS {
        contender.decide(client, T0 + ms, "busy").await;
        contender.decide(client, T0 + ms, "busy").await;
    }
    let (micros, commands) = script_cost(client).await;
    let end = T0 + MEASURED_MS - 1;
    contender.decide(client, end, "idle").await;
    Cost {
        micros,
        commands,
        busy: memory_usage(client, &contender.keys(end, "busy")).await,
        idle: memory_usage(client, &contender.keys(end, "idle")).await,
    }
}

#[tokio::main]
async fn main() {
    let stack = Stack::start().await;
    let client = stack.client();
    let second = Duration::from_millis(WINDOW_MS);
    let ours =
        |quota: Quota| Contender::Ours(Limiter::new(client.clone(), &quota.algorithm().to_string(), quota).unwrap());
    let upstash = |kind: UpstashScript| Contender::Upstash(kind, kind.load());
    let rows: Vec<(&str, Contender, Option<Contender>)> = vec![
        (
            "token bucket",
            ours(Quota::token_bucket(LIMIT, LIMIT, second).unwrap()),
            Some(upstash(UpstashScript::TokenBucket)),
        ),
        (
            "fixed window",
            ours(Quota::fixed_window(LIMIT, second).unwrap()),
            Some(upstash(UpstashScript::FixedWindow)),
        ),
        (
            "sliding window",
            ours(Quota::sliding_window(LIMIT, second).unwrap()),
            Some(upstash(UpstashScript::SlidingWindow)),
        ),
        ("gcra", ours(Quota::gcra(LIMIT, LIMIT, second).unwrap()), None),
        (
            "concurrency (leases of 1 s)",
            ours(Quota::concurrency(LIMIT, second).unwrap()),
            None,
        ),
        // @upstash/ratelimit has no sliding log.
        ("sliding log", ours(Quota::sliding_log(LIMIT, second).unwrap()), None),
    ];
    println!("| algorithm | edgelimit µs/decision | @upstash/ratelimit µs/decision | ratio | edgelimit cmds/decision | @upstash cmds/decision | edgelimit bytes idle / busy | @upstash bytes idle / busy |");
    println!("|---|---|---|---|---|---|---|---|");
    for (name, ours, theirs) in rows {
        let a = measure(&client, &ours).await;
        let (us, cmds, mem, ratio) = match theirs {
            Some(theirs) => {
                let b = measure(&client, &theirs).await;
                (
                    format!("{:.2}", b.micros),
                    format!("{:.2}", b.commands),
                    format!("{} / {}", b.idle, b.busy),
                    format!("{:.2}", a.micros / b.micros),
                )
            }
            None => ("–".into(), "–".into(), "–".into(), "–".into()),
        };
        println!(
            "| {name} | {:.2} | {us} | {ratio} | {:.2} | {cmds} | {} / {} | {mem} |",
            a.micros, a.commands, a.idle, a.busy
        );
    }
    println!("\n{MEASURED_MS} ms of explicit time, 2 requests per ms, limit {LIMIT} per {WINDOW_MS} ms");
}
