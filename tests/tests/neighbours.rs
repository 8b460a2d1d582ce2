//! What one token's load does to another's decisions: real Redis behind the bridge as shipped (`--profile bridge`,
//! a process of its own), attacked from a thread of its own, while a victim decides with the client's defaults.

use std::time::{Duration, Instant};

use edgelimit::limit::Quota;
use edgelimit::ratelimit::{Limit, Options, Ratelimit, Reason};
use edgelimit::{Command, RestClient};
use edgelimit_cli::redis_server::RedisServer;
use edgelimit_tests::release_bridge::ReleaseBridge;

const ADMIN_TOKEN: &str = "neighbours-admin-token";
/// What the attacker holds.
const LIMITER_TOKEN: &str = "neighbours-limiter-token";
/// Another limiter token: what a deployment of another tenant holds.
const VICTIM_TOKEN: &str = "neighbours-victim-token";

/// Redis and the release bridge in front of it, with the fixed window's script loaded.
struct Neighbourhood {
    _redis: RedisServer,
    _bridge: ReleaseBridge,
    url: String,
    sha1: &'static str,
}

impl Neighbourhood {
    async fn start() -> Neighbourhood {
        let redis = RedisServer::start().await.expect("start redis-server");
        let tokens = format!("limiter:{LIMITER_TOKEN}\nlimiter:{VICTIM_TOKEN}\n");
        let bridge = ReleaseBridge::start(&redis.url(), ADMIN_TOKEN, &tokens, &[]);
        let url = format!("http://{}", bridge.url);
        let script = edgelimit::lua::script_named("fixed_window").unwrap();
        let load = Command::new("SCRIPT").args(["LOAD", script.source()]);
        RestClient::new(&url, ADMIN_TOKEN).unwrap().command(&load).await.unwrap();
        Neighbourhood { _redis: redis, _bridge: bridge, url, sha1: script.sha1() }
    }

    /// A victim deciding under `quota` with `token` and the client's defaults: 1 s timeout, fail open.
    fn victim(&self, token: &str, quota: Quota) -> Ratelimit {
        let client = RestClient::new(&self.url, token).unwrap();
        Ratelimit::new(client, &[Limit::new(quota)], Options::default()).unwrap()
    }

    /// The attacker (the limiter token) sends `times` pipelines of `commands` decisions at once while a victim with
    /// `victim_token` decides, each decision Redis's grant; the attacker's requests served and refused (429).
    async fn attacked(&self, victim_token: &str, commands: usize, times: usize) -> (usize, usize) {
        let attack = attack(&self.url, LIMITER_TOKEN, large_pipeline(self.sha1, commands), times);
        let victim = self.victim(victim_token, Quota::fixed_window(1, Duration::from_secs(3600)).unwrap());
        let (decisions, slowest) = decide_during(&victim, &attack).await;
        let (served, refused) = served(attack.join().unwrap(), commands);
        println!(
            "victim: {decisions} decisions, slowest {slowest:?}; attacker: {served} served, {refused} refused (429)"
        );
        (served, refused)
    }
}

/// Decides for fresh identifiers with `victim` until `attack` ends; each decision must be Redis's grant. Returns
/// how many and the slowest.
async fn decide_during<T>(victim: &Ratelimit, attack: &std::thread::JoinHandle<T>) -> (usize, Duration) {
    let (mut decisions, mut slowest) = (0, Duration::ZERO);
    while !attack.is_finished() {
        let started = Instant::now();
        let outcome = victim.limit(&format!("ip-{decisions}"), 1).await.unwrap();
        slowest = slowest.max(started.elapsed());
        assert_eq!((outcome.reason, outcome.decision.success), (Reason::Decided, true));
        decisions += 1;
    }
    (decisions, slowest)
}

/// What the attacker got back for one request: its reply count, or the HTTP status refusing it.
type Answer = Result<usize, u16>;

/// Posts `pipeline` to `/pipeline` `times` times at once, from a thread and runtime of its own and with the body
/// serialised once, so that the attacker's own work does not take the CPU the victim and the bridge run on.
fn attack(
    url: &str,
    token: &'static str,
    pipeline: Vec<Command>,
    times: usize,
) -> std::thread::JoinHandle<Vec<Answer>> {
    let url = format!("{url}/pipeline");
    let words: Vec<&[String]> = pipeline.iter().map(Command::words).collect();
    let body = serde_json::to_vec(&words).unwrap();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async move {
            let http = reqwest::Client::new();
            let sent: Vec<_> = (0..times)
                .map(|_| {
                    let request = http.post(&url).bearer_auth(token).body(body.clone());
                    tokio::spawn(async move {
                        let response = request.send().await.unwrap();
                        let status = response.status().as_u16();
                        let body = response.bytes().await.unwrap();
                        match serde_json::from_slice::<serde_json::Value>(&body).unwrap() {
                            serde_json::Value::Array(replies) if status == 200 => Ok(replies.len()),
                            _ => Err(status),
                        }
                    })
                })
                .collect();
            let mut answers = Vec::new();
            for task in sent {
                answers.push(task.await.unwrap());
            }
            answers
        })
    })
}

/// Checks what the attacker got: whole answers, or 429 (its share did not come in time), never another status.
fn served(answers: Vec<Answer>, commands: usize) -> (usize, usize) {
    let (mut served, mut refused) = (0, 0);
    for answer in answers {
        match answer {
            Ok(replies) => {
                assert_eq!(replies, commands);
                served += 1;
            }
            Err(429) => refused += 1,
            Err(status) => panic!("the attacker got HTTP {status}, not its share or a 429"),
        }
    }
    (served, refused)
}

/// The attacks take the machine's CPU: one at a time, so each measures its own.
async fn one_at_a_time() -> tokio::sync::MutexGuard<'static, ()> {
    static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    SERIAL.lock().await
}

/// About 1 MiB: `count` decisions of the fixed window on keys of their own, as one `/pipeline`.
fn large_pipeline(sha1: &str, count: usize) -> Vec<Command> {
    (0..count)
        .map(|i| {
            let key = format!("edgelimit:{{attacker}}:{i}");
            Command::new("EVALSHA").args([sha1, "1", &key, "1:1000000:60000"])
        })
        .collect()
}

/// A limiter token sends 8 pipelines of 9,000 decisions (1 MiB each) at once while a victim holding the same token
/// decides. Bulk requests take turns and run on their own Redis connection, so no decision of the victim's is left to
/// the failure policy, which would admit it. The attacker's excess waits its turn or gets 429, never 503.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulk_pipelines_of_one_token_never_push_another_clients_decisions_into_the_failure_policy() {
    let _serial = one_at_a_time().await;
    let (served, _) = Neighbourhood::start().await.attacked(LIMITER_TOKEN, 9_000, 8).await;
    assert!(served >= 1, "no bulk request was served");
}

/// Bulk by count, not size: 32 pipelines of 100 decisions at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelines_of_many_commands_are_bulk_too() {
    let _serial = one_at_a_time().await;
    Neighbourhood::start().await.attacked(LIMITER_TOKEN, 100, 32).await;
}

/// One token sends 600 pipelines of 64 decisions at once (small: not bulk); a victim with another token decides
/// meanwhile. One token's main lane requests in flight hold at most 128 KiB of bodies, the rest wait their share, so
/// the victim's decisions queue behind some 1,200 commands at most, not 38,400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_small_requests_of_one_token_queue_behind_each_other_not_in_front_of_another_token() {
    let _serial = one_at_a_time().await;
    Neighbourhood::start().await.attacked(VICTIM_TOKEN, 64, 600).await;
}

/// A limiter token cannot grow a log past `MAX_LOG_LIMIT` entries (a decision's work in Redis grows with the log, for
/// every client): the bridge refuses, and the client reports it, never absorbs it, whatever its failure policy.
#[tokio::test]
async fn a_limiter_token_may_not_give_a_log_more_than_a_thousand_permits() {
    let _serial = one_at_a_time().await;
    let stack = Neighbourhood::start().await;
    let limit = |quota: Quota| stack.victim(VICTIM_TOKEN, quota);
    let hour = Duration::from_secs(3600);
    for quota in [Quota::sliding_log(1_001, hour).unwrap(), Quota::concurrency(1_001, hour).unwrap()] {
        let error = limit(quota).limit("ip", 1).await.unwrap_err();
        assert_eq!(error.code(), "EDGELIMIT_AUTH", "{error}");
        assert!(error.to_string().contains("more than 1000 permits"), "{error}");
    }
    let granted = limit(Quota::sliding_log(1_000, hour).unwrap()).limit("ip", 1).await.unwrap();
    assert_eq!((granted.reason, granted.decision.success), (Reason::Decided, true));
}
