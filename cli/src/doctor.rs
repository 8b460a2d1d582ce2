//! `edgelimit doctor`: is this REST endpoint fit for edgelimit? A checklist, one JSON line per check: the endpoint
//! answers, the token is accepted, Redis never evicts a limiter's keys (`maxmemory-policy noeviction`), the script
//! cache works (SCRIPT LOAD, EVALSHA), and the server's clock is sane. It speaks only the REST protocol, so it checks
//! Upstash as well as the bridge; what a provider does not let a token read (CONFIG GET) is "unknown", not a failure.
//!
//! Also the start-up warning of `edgelimit bridge` and `edgelimit dev` about eviction ([`eviction_warning`]).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use edgelimit::{Command, Error, ErrorClass, RestClient, Value};
use serde_json::json;

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Fit for edgelimit.
    Ok,
    /// Not fit: the detail says what to do.
    Fail,
    /// Could not be checked (the endpoint does not let this token look, or an earlier check failed).
    Unknown,
}

impl Status {
    fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Fail => "fail",
            Status::Unknown => "unknown",
        }
    }
}

/// One line of the checklist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// What was checked, e.g. `maxmemory-policy`.
    pub name: &'static str,
    /// How it came out.
    pub status: Status,
    /// What was seen, and for a failure what to do.
    pub detail: String,
}

impl Check {
    fn new(name: &'static str, status: Status, detail: impl Into<String>) -> Check {
        Check {
            name,
            status,
            detail: detail.into(),
        }
    }

    /// The check as one JSON line: `{"check": …, "status": "ok"|"fail"|"unknown", "detail": …}`.
    pub fn json_line(&self) -> String {
        json!({ "check": self.name, "status": self.status.as_str(), "detail": self.detail }).to_string()
    }
}

/// The clock difference beyond which the server's time is not sane. Decisions use only the server's clock, so a
/// skew does not change a limit, but resets and retry times shown to people (and explicit-time callers) would be off.
const MAX_CLOCK_SKEW: Duration = Duration::from_secs(60);

/// The fix the eviction check and warning name.
const NOEVICTION_FIX: &str = "CONFIG SET maxmemory-policy noeviction";

/// Runs every check against the endpoint, in order; once the endpoint cannot be reached or refuses the token, the
/// checks that need it are "unknown".
pub async fn checks(client: &RestClient) -> Vec<Check> {
    let ping = client.command(&Command::new("PING")).await;
    let reached = reachability(client, &ping);
    let accepted = token(&ping);
    let mut checks = vec![reached, accepted];
    if checks.iter().any(|check| check.status != Status::Ok) {
        for name in ["maxmemory-policy", "script cache", "server time"] {
            checks.push(Check::new(
                name,
                Status::Unknown,
                "not checked: the endpoint did not accept PING",
            ));
        }
        return checks;
    }
    checks.push(maxmemory_policy(client).await);
    checks.push(script_cache(client).await);
    checks.push(server_time(client).await);
    checks
}

fn reachability(client: &RestClient, ping: &edgelimit::Result<Value>) -> Check {
    const NAME: &str = "endpoint reachable";
    match ping {
        Err(error) if error.class() == ErrorClass::StoreUnavailable => Check::new(
            NAME,
            Status::Fail,
            format!("{error}; check the URL ({}) and that the endpoint runs", client.url()),
        ),
        Err(error @ Error::MalformedReply { .. }) => Check::new(NAME, Status::Fail, error.to_string()),
        _ => Check::new(NAME, Status::Ok, format!("{} answers", client.url())),
    }
}

fn token(ping: &edgelimit::Result<Value>) -> Check {
    const NAME: &str = "token accepted";
    match ping {
        Ok(_) => Check::new(NAME, Status::Ok, "PING answered"),
        Err(error) if error.class() == ErrorClass::StoreUnavailable => {
            Check::new(NAME, Status::Unknown, "not checked: the endpoint is unreachable")
        }
        Err(error) => Check::new(NAME, Status::Fail, format!("{error} ({})", error.code())),
    }
}

async fn maxmemory_policy(client: &RestClient) -> Check {
    const NAME: &str = "maxmemory-policy";
    let reply = client
        .command(&Command::new("CONFIG").args(["GET", "maxmemory-policy"]))
        .await;
    match reply {
        Ok(Value::Array(pair)) => match pair.into_iter().nth(1).and_then(|value| value.into_string().ok()) {
            Some(policy) => eviction_check(&policy),
            None => Check::new(NAME, Status::Unknown, "CONFIG GET maxmemory-policy answered no value"),
        },
        Ok(other) => Check::new(NAME, Status::Unknown, format!("CONFIG GET answered {other:?}")),
        // Upstash and other providers refuse CONFIG to tokens: not a failure of the endpoint, just not visible.
        Err(error) => Check::new(
            NAME,
            Status::Unknown,
            format!(
                "CONFIG GET is refused here ({}); make sure the provider never evicts keys (maxmemory-policy \
                 noeviction)",
                error.code()
            ),
        ),
    }
}

/// Whether a `maxmemory-policy` is safe for edgelimit: every limiter key has a TTL, so any `volatile-*` or
/// `allkeys-*` policy may evict live state under memory pressure, and a limit whose state vanished admits afresh.
pub fn eviction_check(policy: &str) -> Check {
    if policy == "noeviction" {
        Check::new(
            "maxmemory-policy",
            Status::Ok,
            "noeviction: limiter state is never evicted",
        )
    } else {
        Check::new(
            "maxmemory-policy",
            Status::Fail,
            format!(
                "{policy}: under memory pressure Redis evicts limiter keys (each has a TTL) and the limits silently \
                 admit more than they allow; run `{NOEVICTION_FIX}` (and set it in redis.conf)"
            ),
        )
    }
}

async fn script_cache(client: &RestClient) -> Check {
    const NAME: &str = "script cache";
    let loaded = client.command(&Command::new("SCRIPT").args(["LOAD", "return 1"])).await;
    let sha = match loaded {
        Ok(value) => match value.into_string() {
            Ok(sha) => sha,
            Err(error) => return Check::new(NAME, Status::Fail, format!("SCRIPT LOAD answered no SHA1: {error}")),
        },
        Err(error) => {
            return Check::new(
                NAME,
                Status::Fail,
                format!("SCRIPT LOAD failed: {error}; edgelimit needs it (or EVAL) for every decision"),
            )
        }
    };
    match client.command(&Command::new("EVALSHA").args([sha.as_str(), "0"])).await {
        Ok(Value::Int(1)) => Check::new(NAME, Status::Ok, "SCRIPT LOAD and EVALSHA work"),
        Ok(other) => Check::new(NAME, Status::Fail, format!("EVALSHA of `return 1` answered {other:?}")),
        Err(error) => Check::new(NAME, Status::Fail, format!("EVALSHA failed: {error}")),
    }
}

async fn server_time(client: &RestClient) -> Check {
    const NAME: &str = "server time";
    let here = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    let reply = client.command(&Command::new("TIME")).await;
    let seconds = match &reply {
        Ok(Value::Array(parts)) => parts
            .first()
            .and_then(|seconds| seconds.clone().into_string().ok())
            .and_then(|seconds| seconds.parse::<u64>().ok()),
        _ => None,
    };
    let Some(seconds) = seconds else {
        return match reply {
            Err(error) => Check::new(NAME, Status::Unknown, format!("TIME failed: {error}")),
            Ok(other) => Check::new(NAME, Status::Fail, format!("TIME answered {other:?}")),
        };
    };
    let skew = here.as_secs().abs_diff(seconds);
    if skew <= MAX_CLOCK_SKEW.as_secs() {
        Check::new(
            NAME,
            Status::Ok,
            format!("the server's clock is within {skew} s of this machine's"),
        )
    } else {
        Check::new(
            NAME,
            Status::Fail,
            format!(
                "the server's clock is {skew} s away from this machine's: decisions use the server's clock, so \
                 limits hold, but resets and explicit-time callers are off; fix the server's (or this machine's) \
                 time sync"
            ),
        )
    }
}

/// The checklist's outcome: every line, then the exit code (0 when nothing failed; "unknown" is not a failure).
pub fn report(checks: &[Check]) -> (Vec<String>, u8) {
    let failed = checks.iter().any(|check| check.status == Status::Fail);
    (checks.iter().map(Check::json_line).collect(), u8::from(failed))
}

/// The warning `edgelimit bridge` and `edgelimit dev` print at start-up when the Redis behind them may evict
/// limiter keys, or `None` when its policy is `noeviction` or cannot be read (the bridge still starts: Redis may
/// be down for now, and the bridge reconnects by itself).
pub async fn eviction_warning(redis_url: &str) -> Option<String> {
    let policy = read_eviction_policy(redis_url).await?;
    let check = eviction_check(&policy);
    (check.status == Status::Fail).then(|| format!("WARNING: redis maxmemory-policy is {}", check.detail))
}

/// The policy, or `None` when Redis cannot be asked within two seconds (down, or CONFIG refused to this user).
async fn read_eviction_policy(redis_url: &str) -> Option<String> {
    let read = async {
        let mut connection = redis::Client::open(redis_url)?
            .get_multiplexed_async_connection()
            .await?;
        redis::cmd("CONFIG")
            .arg("GET")
            .arg("maxmemory-policy")
            .query_async::<(String, String)>(&mut connection)
            .await
    };
    match tokio::time::timeout(Duration::from_secs(2), read).await {
        Ok(Ok((_, policy))) => Some(policy),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_noeviction_is_safe() {
        assert_eq!(eviction_check("noeviction").status, Status::Ok);
        for policy in [
            "allkeys-lru",
            "volatile-lru",
            "volatile-ttl",
            "allkeys-random",
            "volatile-lfu",
        ] {
            let check = eviction_check(policy);
            assert_eq!(check.status, Status::Fail, "{policy}");
            assert!(check.detail.contains(NOEVICTION_FIX), "{}", check.detail);
        }
    }

    #[test]
    fn unknown_is_not_a_failure() {
        let checks = [
            Check::new("a", Status::Ok, ""),
            Check::new("b", Status::Unknown, "refused"),
        ];
        let (lines, exit) = report(&checks);
        assert_eq!(exit, 0);
        assert_eq!(lines[1], r#"{"check":"b","detail":"refused","status":"unknown"}"#);
        assert_eq!(report(&[Check::new("c", Status::Fail, "x")]).1, 1);
    }
}
