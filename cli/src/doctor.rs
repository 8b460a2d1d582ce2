//! `edgelimit doctor`: checks that a REST endpoint and the Redis behind it can hold limits safely, and says how to
//! fix what cannot. The bridge runs the one check it can make itself, the eviction policy, when it starts.
//!
//! The eviction policy matters most: every limiter key has a TTL, so under a `volatile-*` or `allkeys-*` policy a
//! full Redis drops limiter state, and a dropped state is a fresh limit. Under `noeviction` it refuses writes (`OOM`)
//! instead, which the failure policy sees.

use edgelimit::{Command, Error, RestClient};
use serde_json::{json, Value as Json};

use crate::admin::Outcome;

/// The only `maxmemory-policy` under which no limiter state is ever evicted.
pub const SAFE_EVICTION_POLICY: &str = "noeviction";

/// What is wrong with `policy` for a limiter, and how to fix it; `None` when it is safe.
pub fn eviction_policy_problem(policy: &str) -> Option<String> {
    (policy != SAFE_EVICTION_POLICY).then(|| {
        format!(
            "maxmemory-policy is {policy:?}: when Redis fills up it evicts keys, and an evicted limiter key is a fresh \
             limit (requests past the limit are admitted); run `CONFIG SET maxmemory-policy {SAFE_EVICTION_POLICY}` \
             (and set it in redis.conf), so that a full Redis refuses writes instead"
        )
    })
}

/// One check's result: `ok` is `None` when it could not be told (the endpoint refused to say).
struct Check {
    name: &'static str,
    ok: Option<bool>,
    detail: String,
}

impl Check {
    fn passed(name: &'static str, detail: impl Into<String>) -> Check {
        Check { name, ok: Some(true), detail: detail.into() }
    }

    fn failed(name: &'static str, detail: impl Into<String>) -> Check {
        Check { name, ok: Some(false), detail: detail.into() }
    }

    fn json(&self) -> Json {
        json!({ "check": self.name, "ok": self.ok, "detail": self.detail })
    }
}

/// Runs every check against `client`'s endpoint and prints one JSON line per check; the outcome is the summary,
/// exit code 0 when nothing failed (a check that could not be told does not fail), 1 otherwise.
pub async fn run(client: &RestClient) -> Outcome {
    let mut checks = vec![reach(client).await];
    if checks[0].ok == Some(true) {
        checks.push(eviction_policy(client).await);
        checks.push(scripts(client).await);
        checks.push(server_time(client).await);
    }
    for check in &checks {
        say!("{}", check.json());
    }
    let failed: Vec<&str> = checks.iter().filter(|check| check.ok == Some(false)).map(|check| check.name).collect();
    Outcome { exit_code: u8::from(!failed.is_empty()), output: json!({ "ok": failed.is_empty(), "failed": failed }) }
}

/// The endpoint answers, and accepts the token.
async fn reach(client: &RestClient) -> Check {
    const NAME: &str = "endpoint";
    match client.command(&Command::new("PING")).await {
        Ok(_) => Check::passed(NAME, format!("{} answers and accepts the token", client.url())),
        Err(error @ Error::Unauthorized { .. }) => Check::failed(NAME, error.to_string()),
        Err(error) => Check::failed(NAME, format!("{error} ({})", error.code())),
    }
}

/// `maxmemory-policy` is `noeviction`. Managed endpoints may refuse CONFIG: then it is unknown.
async fn eviction_policy(client: &RestClient) -> Check {
    const NAME: &str = "maxmemory-policy";
    let asked = client
        .command(&Command::new("CONFIG").args(["GET", "maxmemory-policy"]))
        .await
        .and_then(|reply| reply.into_array());
    let policy = match asked.as_deref() {
        Ok([_, policy]) => policy.clone().into_string().ok(),
        _ => None,
    };
    match policy {
        Some(policy) => match eviction_policy_problem(&policy) {
            Some(problem) => Check::failed(NAME, problem),
            None => Check::passed(NAME, "noeviction: a full Redis refuses writes, it never drops limiter state"),
        },
        None => Check {
            name: NAME,
            ok: None,
            detail: format!(
                "unknown: the endpoint does not answer CONFIG GET ({}); make sure its eviction policy is \
                 {SAFE_EVICTION_POLICY}, or that limiter keys are never evicted",
                asked.err().map_or_else(|| "an unexpected reply".to_owned(), |e| e.to_string())
            ),
        },
    }
}

/// Every edgelimit script loads under the SHA1 edgelimit computes for it, so decisions go by EVALSHA at once.
async fn scripts(client: &RestClient) -> Check {
    const NAME: &str = "scripts";
    for script in edgelimit::lua::every_script() {
        let loaded = client
            .command(&Command::new("SCRIPT").args(["LOAD", script.source()]))
            .await
            .and_then(|reply| reply.into_string());
        match loaded {
            Ok(sha1) if sha1 == script.sha1() => {}
            Ok(sha1) => {
                return Check::failed(NAME, format!("SCRIPT LOAD named a script {sha1}, not {}", script.sha1()))
            }
            Err(error) => return Check::failed(NAME, format!("SCRIPT LOAD was refused: {error}")),
        }
    }
    Check::passed(NAME, "every edgelimit script is loaded; decisions run by EVALSHA")
}

/// The server's clock, which decides every window, against this machine's.
async fn server_time(client: &RestClient) -> Check {
    const NAME: &str = "server time";
    let time = client.command(&Command::new("TIME")).await.and_then(|reply| reply.into_tuple::<2>());
    let seconds = time.and_then(|[seconds, _]| seconds.into_number::<u64>("the server's unix seconds"));
    let local = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |since| since.as_secs());
    match seconds {
        Ok(seconds) => Check::passed(
            NAME,
            format!(
                "the server's clock decides every window; it is {} s from this machine's (that matters only to \
                 callers that pass an explicit time)",
                seconds.abs_diff(local)
            ),
        ),
        Err(error) => Check::failed(NAME, format!("TIME did not answer a time: {error}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_noeviction_keeps_limiter_state() {
        assert_eq!(eviction_policy_problem("noeviction"), None);
        for policy in ["allkeys-lru", "volatile-ttl", "volatile-lru", "allkeys-random"] {
            let problem = eviction_policy_problem(policy).unwrap();
            assert!(problem.contains(policy) && problem.contains("CONFIG SET maxmemory-policy noeviction"));
        }
    }
}
