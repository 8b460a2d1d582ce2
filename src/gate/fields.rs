//! What a client is told: the IETF RateLimit header fields (draft-ietf-httpapi-ratelimit-headers-10, Structured
//! Field lists), `Retry-After`, and the problem-details body (RFC 9457) of a refused request.

use crate::decision::Decision;

/// A quota policy as advertised: its name, quota and window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// The policy's name (the limit's name in Redis).
    pub name: String,
    /// Quota units (permits) per window.
    pub quota: u64,
    /// The window in ms.
    pub window_ms: u64,
}

/// Whole seconds, rounded up: a client that waits this long is never early.
pub fn seconds_ceil(ms: u64) -> u64 {
    ms.div_ceil(1000)
}

/// An sf-string: printable ASCII with `"` and `\` escaped; anything else (which limit names cannot hold) becomes `?`.
fn sf_string(text: &str) -> String {
    let printable: String = text.chars().map(|c| if matches!(c, ' '..='~') { c } else { '?' }).collect();
    format!("\"{}\"", printable.replace('\\', "\\\\").replace('"', "\\\""))
}

/// `RateLimit-Policy`: every policy of the rule, e.g. `"login";q=5;w=10`.
pub fn policy_field(policies: &[Policy]) -> String {
    let field = |policy: &Policy| {
        let (name, window) = (sf_string(&policy.name), seconds_ceil(policy.window_ms));
        format!("{name};q={};w={window}", policy.quota)
    };
    policies.iter().map(field).collect::<Vec<_>>().join(", ")
}

/// One `RateLimit` item: what is left (`r`) and the seconds until the policy is whole again (`t`). A denial's `t` is
/// its exact `retry_after`; a grant's is counted from `now_ms` to the decision's `reset`.
pub fn limit_item(policy: &Policy, decision: &Decision, now_ms: u64) -> String {
    let until_reset_ms = if decision.success {
        decision.reset.saturating_sub(now_ms).min(policy.window_ms)
    } else {
        decision.retry_after
    };
    let (name, until_reset) = (sf_string(&policy.name), seconds_ceil(until_reset_ms));
    format!("{name};r={};t={until_reset}", decision.remaining)
}

/// A problem-details body (`application/problem+json`), members in alphabetical order.
pub fn problem(status: u16, title: &str, detail: &str, retry_after_ms: Option<u64>) -> String {
    // serde_json's objects keep their keys sorted.
    let mut body = serde_json::json!({ "detail": detail, "status": status, "title": title, "type": "about:blank" });
    if let Some(ms) = retry_after_ms {
        body["retryAfterMs"] = ms.into();
    }
    body.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn login() -> Policy {
        Policy { name: "login".into(), quota: 5, window_ms: 10_000 }
    }

    #[test]
    fn fields_use_the_draft_syntax() {
        let other = Policy { name: "a \"b\"".into(), quota: 100, window_ms: 1_500 };
        assert_eq!(policy_field(&[login(), other]), r#""login";q=5;w=10, "a \"b\"";q=100;w=2"#);
        let denied = Decision { success: false, limit: 5, remaining: 0, reset: 0, retry_after: 7_001, receipt: None };
        assert_eq!(limit_item(&login(), &denied, 0), r#""login";r=0;t=8"#);
        let granted = Decision { success: true, limit: 5, remaining: 3, reset: 12_500, retry_after: 0, receipt: None };
        assert_eq!(limit_item(&login(), &granted, 10_000), r#""login";r=3;t=3"#);
        // A skewed clock cannot make t exceed the window.
        assert_eq!(limit_item(&login(), &granted, 0), r#""login";r=3;t=10"#);
    }

    #[test]
    fn problems_are_json() {
        let body: serde_json::Value =
            serde_json::from_str(&problem(429, "Too Many Requests", "a \"quoted\"\nline", Some(5))).unwrap();
        assert_eq!(body.get("status"), Some(&serde_json::Value::from(429)));
        assert_eq!(body.get("retryAfterMs"), Some(&serde_json::Value::from(5)));
        assert_eq!(body.get("detail").and_then(serde_json::Value::as_str), Some("a \"quoted\"\nline"));
        assert_eq!(
            problem(503, "Service Unavailable", "x", None),
            r#"{"detail":"x","status":503,"title":"Service Unavailable","type":"about:blank"}"#
        );
    }
}
