//! The gate: what the Cloudflare Worker decides for each HTTP request in front of an origin (the JS shim,
//! `worker/index.js`, only moves requests and responses). The first rule whose [`RequestMatch`] holds applies
//! ([`Gate::route`]); it reads the request's [`ClientKey`], checks its allow and deny lists, then takes one permit
//! under all its limits with a [`Ratelimit`]. The outcome is an [`Admission`]: proxy, or refuse with 429/403/503.

pub mod client_key;
pub mod config;
pub mod fields;
pub mod request_match;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

pub use self::client_key::{ClientKey, KeySource, ListEntry};
use self::fields::{limit_item, policy_field, problem, seconds_ceil, Policy};
pub use self::request_match::RequestMatch;
use crate::error::{Error, Result};
use crate::limit::{Algorithm, KeyLayout};
use crate::ratelimit::{Limit, OnError, Options, Outcome, Ratelimit, Reason};
use crate::rest::RestClient;

/// One rule of the Worker's `RULES`.
#[derive(Debug, Clone)]
pub struct Rule {
    /// Names the rule in logs, in the RateLimit fields and in its Redis keys: letters, digits, `-`, `_`, `.`.
    pub name: String,
    /// Which requests it applies to.
    pub request_match: RequestMatch,
    /// What requests are counted by.
    pub key: KeySource,
    /// Its limits, all decided in one round trip; a request passes only if every one has room.
    pub limits: Vec<Limit>,
    /// Keys that are never limited (no round trip).
    pub allow: Vec<ListEntry>,
    /// Keys that are always refused with 403 (no round trip).
    pub deny: Vec<ListEntry>,
    /// Count and log, but refuse nothing.
    pub dry_run: bool,
    /// When the store is down, slow or refuses the token: [`OnError::Allow`] or [`OnError::Deny`] (503).
    pub on_error: OnError,
    /// How long to wait for the store; the client's default (1 s) when `None`.
    pub timeout: Option<Duration>,
    /// Reserve permits for keys this isolate sees often and answer from them with no round trip
    /// ([`crate::limit::Reserved`]); `None`: every request asks Redis.
    pub reserve: Option<Duration>,
}

impl Rule {
    /// A rule with the given name, key and limits that matches every request, enforces, and fails open.
    pub fn new(name: &str, key: KeySource, limits: Vec<Limit>) -> Rule {
        Rule {
            name: name.to_owned(),
            request_match: RequestMatch::default(),
            key,
            limits,
            allow: Vec::new(),
            deny: Vec::new(),
            dry_run: false,
            on_error: OnError::Allow,
            timeout: None,
            reserve: None,
        }
    }
}

/// A rule made ready: its limiter and the policies it advertises.
#[derive(Debug)]
struct ArmedRule {
    rule: Rule,
    ratelimit: Ratelimit,
    policies: Vec<Policy>,
}

impl ArmedRule {
    fn new(client: &RestClient, mut rule: Rule, prefix: &str, layout: KeyLayout) -> Result<ArmedRule> {
        let invalid = |message: String| Error::InvalidConfig(format!("rule {:?}: {message}", rule.name));
        if rule.name.is_empty() || !rule.name.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)) {
            return Err(invalid("a rule name is letters, digits, '-', '_' and '.'".into()));
        }
        if rule.on_error == OnError::Throw {
            return Err(invalid("onError is \"allow\" (fail open) or \"deny\" (fail closed)".into()));
        }
        if rule.limits.iter().any(|limit| limit.quota.algorithm() == Algorithm::Concurrency) {
            return Err(invalid(
                "concurrency limits are not available in rules (a Worker cannot hold a lease across requests); \
                 use slidingLog, slidingWindow, fixedWindow, tokenBucket or gcra"
                    .into(),
            ));
        }
        // Limits are stored (and advertised) under the rule's name unless named: rules share state only on purpose.
        let mut policies = Vec::with_capacity(rule.limits.len());
        for limit in &mut rule.limits {
            let name = limit.name.take().unwrap_or_else(|| format!("{}/{}", rule.name, limit.default_name()));
            policies.push(Policy {
                name: name.clone(),
                quota: limit.quota.limit().into(),
                window_ms: limit.quota.interval_ms(),
            });
            limit.name = Some(name);
        }
        let mut client = client.clone();
        if let Some(timeout) = rule.timeout {
            client = client.with_timeout(timeout).map_err(|error| match error {
                Error::InvalidConfig(message) => invalid(format!("timeout: {message}")),
                other => other,
            })?;
        }
        let options = Options {
            prefix: prefix.to_owned(),
            layout,
            on_error: OnError::Throw,
            reserve: rule.reserve,
            ..Options::default()
        };
        let ratelimit = Ratelimit::new(client, &rule.limits, options).map_err(|e| match e {
            Error::InvalidConfig(message) | Error::InvalidArgument(message) => invalid(message),
            other => other,
        })?;
        Ok(ArmedRule { rule, ratelimit, policies })
    }
}

/// The Worker's rules, ready to decide.
#[derive(Debug)]
pub struct Gate {
    rules: Vec<Arc<ArmedRule>>,
    /// Every method a rule names (upper case, once each): the only ones a method override can add a rule by.
    named_methods: Vec<String>,
}

impl Gate {
    /// Checks every rule (a broken rule is an [`Error::InvalidConfig`] naming it) and readies its limiter. Keys
    /// start with `prefix` and follow `layout`.
    pub fn new(client: RestClient, rules: Vec<Rule>, prefix: &str, layout: KeyLayout) -> Result<Gate> {
        // In workerd a request must not wait for a call another request's context sent.
        let client = client.without_coalescing();
        let mut armed: Vec<Arc<ArmedRule>> = Vec::with_capacity(rules.len());
        for rule in rules {
            if armed.iter().any(|other| other.rule.name == rule.name) {
                return Err(Error::InvalidConfig(format!(
                    "two rules are named {:?}: give each rule its own name",
                    rule.name
                )));
            }
            armed.push(Arc::new(ArmedRule::new(&client, rule, prefix, layout)?));
        }
        // Rules that name a limit alike share its state: it must be one algorithm over one interval, or neither limits.
        let state = |limit: &Limit| (limit.quota.algorithm(), limit.quota.interval_ms());
        let mut first_under: HashMap<&str, (&str, &Limit)> = HashMap::new();
        for (rule, limit) in
            armed.iter().flat_map(|armed| armed.rule.limits.iter().map(|limit| (armed.rule.name.as_str(), limit)))
        {
            let name = limit.name.as_deref().unwrap_or_default();
            let (other_rule, other) = *first_under.entry(name).or_insert((rule, limit));
            if state(other) != state(limit) {
                return Err(Error::InvalidConfig(format!(
                    "rules {other_rule:?} and {rule:?} keep a limit under one name, {:?}, with different algorithms or \
                     intervals ({} over {} ms, and {} over {} ms): one name is one state; give the limits distinct \
                     names, or the same algorithm and interval",
                    name,
                    other.quota.algorithm(),
                    other.quota.interval_ms(),
                    limit.quota.algorithm(),
                    limit.quota.interval_ms(),
                )));
            }
        }
        let mut named_methods: Vec<String> =
            (armed.iter()).flat_map(|armed| armed.rule.request_match.methods.iter().cloned()).collect();
        named_methods.sort_unstable();
        named_methods.dedup();
        Ok(Gate { rules: armed, named_methods })
    }

    /// The rules' names, in order.
    pub fn rule_names(&self) -> impl Iterator<Item = &str> {
        self.rules.iter().map(|armed| armed.rule.name.as_str())
    }

    /// The rule that applies to this request and the key it counts under; `None` when no rule matches. `target` is
    /// the path and query, `header` reads a header by lower-case name. Method overrides and other spellings of the
    /// path only add rules (docs/design/gate-routing.md).
    pub fn route(
        &self,
        method: &str,
        host: &str,
        target: &str,
        header: impl Fn(&str) -> Option<String>,
    ) -> Option<Route> {
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        let (raw_path, path) = (path, request_match::normalize_path(path));
        let kept = Some(request_match::normalize_path_keeping_slashes(raw_path)).filter(|kept| *kept != path);
        let backslashes =
            Some(request_match::normalize_path_reading_backslashes(raw_path)).filter(|read| *read != path);
        // A path key counts the spelling its rule matched, so a new format suffix is not a fresh count.
        let route_of = |armed: &Arc<ArmedRule>, path: &str| {
            let claimed = client_key::claimed_values(&armed.rule.key, &header);
            Route {
                key: client_key::key_of(&armed.rule.key, path, &claimed, &header),
                address: client_key::ip_key(&header, 64),
                claimed,
                armed: Arc::clone(armed),
                next: None,
                also: Vec::new(),
            }
        };
        // The first rule matching one of `methods` on `path`, with the first enforcing one after it if it is a dry run.
        let route_through = |methods: &[String], path: &str| {
            let mut matching = (self.rules.iter())
                .filter(|armed| (methods.iter()).any(|method| armed.rule.request_match.matches(method, host, path)));
            let first = matching.next()?;
            let mut route = route_of(first, path);
            if first.rule.dry_run {
                route.next = matching.find(|armed| !armed.rule.dry_run).map(|armed| Box::new(route_of(armed, path)));
            }
            Some(route)
        };
        let mut own = vec![method.to_owned()];
        if method.eq_ignore_ascii_case("HEAD") {
            own.push("GET".to_owned());
        }
        // Each override method some rule names adds the first rule it matches, and one no rule names adds a rule that
        // names no method (methods are letters: `-` is none of them).
        let overrides = override_methods(method, query, &header);
        let mut method_sets = vec![own];
        method_sets.extend(
            (self.named_methods.iter())
                .filter(|named| overrides.iter().any(|name| name.eq_ignore_ascii_case(named)))
                .map(|named| vec![named.clone()]),
        );
        if (overrides.iter()).any(|name| !self.named_methods.iter().any(|named| named.eq_ignore_ascii_case(name))) {
            method_sets.push(vec!["-".to_owned()]);
        }
        let unformatted = request_match::without_format_suffix(&path);
        let spellings: Vec<&str> =
            [Some(&*path), kept.as_deref(), backslashes.as_deref(), unformatted].into_iter().flatten().collect();
        let mut route: Option<Route> = None;
        for methods in &method_sets {
            for spelling in &spellings {
                match (&mut route, route_through(methods, spelling)) {
                    (_, None) => {}
                    (Some(route), Some(other)) => route.add(other),
                    (None, other) => route = other,
                }
            }
        }
        route
    }
}

/// The methods a request names besides its own, which many frameworks route it by: override headers, a POST's
/// `_method` in its query; GET beside HEAD. Any words: `Gate::route` filters them.
fn override_methods(method: &str, query: &str, header: &impl Fn(&str) -> Option<String>) -> Vec<String> {
    let headers = ["x-http-method-override", "x-http-method", "x-method-override"]
        .into_iter()
        .filter_map(header)
        .flat_map(|value| value.split(',').map(|name| name.trim().to_owned()).collect::<Vec<_>>());
    // Names and values as PHP reads them, the most forgiving reader (`?+_method=`, `?.method=`, `%5Fmethod`).
    let decoded = |text: &str| {
        let text = text.replace('+', " ");
        String::from_utf8_lossy(&client_key::percent_decoded(text.as_bytes())).into_owned()
    };
    let query = (query.split('&'))
        .filter(|_| method.eq_ignore_ascii_case("POST"))
        .filter_map(|pair| pair.split_once('='))
        .filter(|(name, _)| decoded(name).trim_start_matches(' ').replace(['.', ' '], "_") == "_method")
        .map(|(_, value)| decoded(value).trim().to_owned());
    let mut methods: Vec<String> = headers.chain(query).collect();
    if methods.iter().any(|name| name.eq_ignore_ascii_case("HEAD")) {
        methods.push("GET".to_owned());
    }
    methods
}
/// A request on its way through a rule.
#[derive(Debug, Clone)]
pub struct Route {
    armed: Arc<ArmedRule>,
    key: ClientKey,
    /// The client's address, which a deny list refuses whatever the rule counts by.
    address: ClientKey,
    /// Every value the request carries for a header or cookie key: a deny list refuses each.
    claimed: Vec<String>,
    /// For a dry-run rule, the first matching rule after it that enforces.
    next: Option<Box<Route>>,
    /// Enforcing rules the method overrides or other spellings matched, decided after this one.
    also: Vec<Route>,
}

/// Why an [`Admission`] is what it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AdmissionReason {
    /// Redis decided, or the block cache did (see [`Reason`]).
    Limit(Reason),
    /// The key is on the rule's allow list.
    AllowList,
    /// The key is on the rule's deny list.
    DenyList,
}

impl AdmissionReason {
    /// `decided`, `cache`, `timeout`, `error`, `allow-list` or `deny-list`.
    pub fn as_str(self) -> &'static str {
        match self {
            AdmissionReason::Limit(reason) => reason.as_str(),
            AdmissionReason::AllowList => "allow-list",
            AdmissionReason::DenyList => "deny-list",
        }
    }
}

/// What to do with a request.
#[derive(Debug)]
pub struct Admission {
    /// Whether the rule lets it through (for a dry-run rule: whether it would).
    pub allowed: bool,
    /// Why.
    pub reason: AdmissionReason,
    /// 200 when allowed; else 429 (limit), 403 (deny list), 503 (store unavailable, fails closed) or 500 (any other
    /// error).
    pub status: u16,
    /// Header fields for the response: the RateLimit fields, and `Retry-After` on a 429.
    pub headers: Vec<(String, String)>,
    /// The problem body (`application/problem+json`) of a refusal.
    pub body: Option<String>,
    /// The error the limit failed with, to log.
    pub error: Option<Error>,
    /// The rule the refusal or the error is of, when it is not the route's own but an added one.
    pub rule: Option<String>,
}

impl Route {
    /// The rule's name.
    pub fn rule(&self) -> &str {
        &self.armed.rule.name
    }

    /// Whether the rule only counts and logs.
    pub fn dry_run(&self) -> bool {
        self.armed.rule.dry_run
    }

    /// The key the request counts under.
    pub fn key(&self) -> &ClientKey {
        &self.key
    }

    /// For a dry-run rule, the first enforcing rule after it that matches: a rule on trial must not lift it.
    pub fn next(&self) -> Option<&Route> {
        self.next.as_deref()
    }

    /// Adds a route a method override or another spelling matched, decided after this one unless already decided.
    fn add(&mut self, overridden: Route) {
        let Some(enforcing) = overridden.enforcing() else {
            return;
        };
        if !self.dry_run() {
            let decided = |route: &Route| Arc::ptr_eq(&route.armed, &enforcing.armed);
            if !decided(self) && !self.also.iter().any(decided) {
                self.also.push(enforcing.clone());
            }
        } else if let Some(next) = self.next.as_deref_mut() {
            next.add(enforcing.clone());
        } else {
            self.next = Some(Box::new(enforcing.clone()));
        }
    }

    /// The route that decides the request: this one, or for a dry run the one after it.
    fn enforcing(&self) -> Option<&Route> {
        if self.dry_run() {
            self.next()
        } else {
            Some(self)
        }
    }

    /// Decides: the lists first (no round trip), then one permit under every limit of the rule, then each added rule
    /// while all before it allowed. Never fails: an error is decided by the rule's `onError` and carried along.
    pub async fn decide(&self, now_ms: u64) -> Admission {
        let mut admission = self.decide_rule(now_ms).await;
        for also in &self.also {
            if !admission.allowed {
                break;
            }
            let mut added = also.decide_rule(now_ms).await;
            if !added.allowed {
                added.rule = Some(also.rule().to_owned());
                return added;
            }
            if admission.error.is_none() && added.error.is_some() {
                // Passed by its onError: logged as that rule's.
                (admission.error, admission.rule) = (added.error, Some(also.rule().to_owned()));
            }
        }
        admission
    }

    async fn decide_rule(&self, now_ms: u64) -> Admission {
        let rule = &self.armed.rule;
        let denied = |entry: &ListEntry| {
            entry.contains(&self.key) || entry.contains(&self.address) || self.claimed.iter().any(|v| entry.names(v))
        };
        if rule.deny.iter().any(denied) {
            let detail = format!("refused by the deny list of rule {:?}", rule.name);
            return refusal(AdmissionReason::DenyList, 403, "Forbidden", &detail, Vec::new(), None);
        }
        if rule.allow.iter().any(|entry| entry.contains(&self.key)) {
            return passage(AdmissionReason::AllowList, Vec::new());
        }
        match self.armed.ratelimit.limit(&self.key.id, 1).await {
            Ok(outcome) => self.limited(outcome, now_ms),
            Err(error) => self.failed(error),
        }
    }

    fn limited(&self, outcome: Outcome, now_ms: u64) -> Admission {
        let policies = &self.armed.policies;
        let mut headers = vec![("RateLimit-Policy".to_owned(), policy_field(policies))];
        let items: Vec<String> = if outcome.limits.len() == policies.len() {
            policies
                .iter()
                .zip(&outcome.limits)
                .map(|(policy, decision)| limit_item(policy, decision, now_ms))
                .collect()
        } else {
            // The block cache answered with the one denial that speaks for all: named by its limit.
            let speaking = policies.iter().find(|policy| policy.quota == outcome.decision.limit);
            speaking.map(|policy| limit_item(policy, &outcome.decision, now_ms)).into_iter().collect()
        };
        // From reserved permits `r` is this isolate's own share: an estimate.
        let mark = if outcome.reason == Reason::Reserved { ";estimate" } else { "" };
        let items: Vec<String> = items.into_iter().map(|item| item + mark).collect();
        headers.push(("RateLimit".to_owned(), items.join(", ")));
        let reason = AdmissionReason::Limit(outcome.reason);
        if outcome.decision.success {
            return passage(reason, headers);
        }
        let retry_after = outcome.decision.retry_after;
        headers.push(("Retry-After".to_owned(), seconds_ceil(retry_after).to_string()));
        let detail = format!(
            "rule {:?} allows {}; this {} has no room left; retry in {} s",
            self.armed.rule.name,
            describe_limits(policies),
            self.armed.rule.key,
            seconds_ceil(retry_after)
        );
        refusal(reason, 429, "Too Many Requests", &detail, headers, Some(retry_after))
    }

    /// The admission when the limit could not be decided: only an unavailable store is the rule's `onError` to decide;
    /// any other error is a 500, since passing it could admit requests past the limit.
    fn failed(&self, error: Error) -> Admission {
        let reason = AdmissionReason::Limit(Reason::of_failure(&error));
        let mut admission = if !error.is_store_unavailable() {
            let detail = format!(
                "rule {:?} could not decide ({}); the request was not let through",
                self.armed.rule.name,
                error.code()
            );
            refusal(reason, 500, "Internal Server Error", &detail, Vec::new(), None)
        } else if self.armed.rule.on_error == OnError::Allow {
            passage(reason, Vec::new())
        } else {
            let detail = format!(
                "rule {:?} could not reach its rate-limit store and fails closed; try again shortly",
                self.armed.rule.name
            );
            refusal(reason, 503, "Service Unavailable", &detail, Vec::new(), None)
        };
        admission.error = Some(error);
        admission
    }
}

fn passage(reason: AdmissionReason, headers: Vec<(String, String)>) -> Admission {
    Admission { allowed: true, reason, status: 200, headers, body: None, error: None, rule: None }
}

fn refusal(
    reason: AdmissionReason,
    status: u16,
    title: &str,
    detail: &str,
    headers: Vec<(String, String)>,
    retry_after_ms: Option<u64>,
) -> Admission {
    Admission {
        allowed: false,
        reason,
        status,
        headers,
        body: Some(problem(status, title, detail, retry_after_ms)),
        error: None,
        rule: None,
    }
}

/// `5 per 10 s and 100 per 60 s`.
fn describe_limits(policies: &[Policy]) -> String {
    let window = |ms: u64| {
        if ms % 1000 == 0 {
            format!("{} s", ms / 1000)
        } else {
            format!("{ms} ms")
        }
    };
    let each = policies.iter().map(|policy| format!("{} per {}", policy.quota, window(policy.window_ms)));
    each.collect::<Vec<_>>().join(" and ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limit::Quota;

    fn limit(quota: Quota) -> Limit {
        Limit::new(quota)
    }

    fn gate(rules: Vec<Rule>) -> Result<Gate> {
        Gate::new(RestClient::new("http://127.0.0.1:1", "t").unwrap(), rules, "edgelimit", KeyLayout::default())
    }

    #[test]
    fn the_first_matching_rule_applies() {
        let ten = Duration::from_secs(10);
        let mut login = Rule::new("login", KeySource::IP, vec![limit(Quota::sliding_log(5, ten).unwrap())]);
        login.request_match = RequestMatch::new(vec![], Some("/login".into()), None, vec!["POST".into()]).unwrap();
        let everything = Rule::new("site", KeySource::Path, vec![limit(Quota::fixed_window(100, ten).unwrap())]);
        let gate = gate(vec![login, everything]).unwrap();
        let ip = |name: &str| (name == "cf-connecting-ip").then(|| "192.0.2.9".to_owned());
        assert_eq!(gate.route("POST", "h", "/login", ip).unwrap().rule(), "login");
        let other = gate.route("GET", "h", "/login", ip).unwrap();
        assert_eq!((other.rule(), other.key().id.as_str()), ("site", "path:/login"));
        assert!(self::gate(vec![]).unwrap().route("GET", "h", "/", ip).is_none());
        // Spellings that reach the same handler are routed, and counted, as one.
        for (method, path) in [("POST", "/login/"), ("POST", "/login;x=1"), ("POST", "//%6Cogin")] {
            assert_eq!(gate.route(method, "h", path, ip).unwrap().rule(), "login", "{method} {path}");
        }
        // Paths match in either case (Express routes `/LOGIN` as `/login`), and a path key counts them as one.
        assert_eq!(gate.route("POST", "h", "/LOGIN", ip).unwrap().rule(), "login");
        assert_eq!(gate.route("GET", "h", "/Report/7", ip).unwrap().key().id, "path:/report/7");
        // A decoded `%2F` makes dot segments an origin that keeps it never sees: the rule the kept spelling matches
        // is added to the decoded spelling's (first-match on either would let `/*` hide `/auth%2Flogin`).
        for path in ["/login;x%2F..%2Fadmin", "/login%2F..%2Fadmin"] {
            let route = gate.route("POST", "h", path, ip).unwrap();
            let decided: Vec<&str> = [route.rule()].into_iter().chain(route.also.iter().map(Route::rule)).collect();
            assert_eq!(decided, ["site", "login"], "{path}");
        }
        // A format suffix adds the rule of the path without it (Rails routes `/login.json` to `/login`'s action).
        let mut exact = Rule::new("exact", KeySource::IP, vec![limit(Quota::sliding_log(5, ten).unwrap())]);
        exact.request_match = RequestMatch::new(vec![], None, Some("/users/sign_in".into()), vec![]).unwrap();
        let site = Rule::new("site", KeySource::IP, vec![limit(Quota::fixed_window(100, ten).unwrap())]);
        let formats = self::gate(vec![exact, site]).unwrap();
        for (path, decided) in [
            ("/users/sign_in.json", vec!["site", "exact"]),
            ("/users/sign_in%2Ejson", vec!["site", "exact"]),
            ("/users/sign_in", vec!["exact"]),
            ("/users/sign_up.json", vec!["site"]),
        ] {
            let route = formats.route("POST", "h", path, ip).unwrap();
            let rules: Vec<&str> = [route.rule()].into_iter().chain(route.also.iter().map(Route::rule)).collect();
            assert_eq!(rules, decided, "{path}");
        }
        for path in ["/report/7/", "/report/7", "/report%2F7", "/report/7;a"] {
            assert_eq!(gate.route("GET", "h", path, ip).unwrap().key().id, "path:/report/7", "{path}");
        }
        assert_eq!(gate.route("GET", "h", "/", ip).unwrap().key().id, "path:/");
    }

    #[test]
    fn every_separator_spelling_is_held_and_a_suffix_counts_under_the_path_it_names() {
        let ten = Duration::from_secs(10);
        let ip = |name: &str| (name == "cf-connecting-ip").then(|| "192.0.2.9".to_owned());
        let mut api = Rule::new("api", KeySource::IP, vec![limit(Quota::fixed_window(1, ten).unwrap())]);
        api.request_match = RequestMatch::new(vec![], None, Some("/api/*".into()), vec![]).unwrap();
        let mut sign_in = Rule::new("sign-in", KeySource::Path, vec![limit(Quota::fixed_window(1, ten).unwrap())]);
        sign_in.request_match = RequestMatch::new(vec![], None, Some("/users/sign_in".into()), vec![]).unwrap();
        let gate = gate(vec![api, sign_in]).unwrap();
        // `%2F` decoded with `%5C` kept (WSGI, nginx): `/api/x%5Cy`, under `/api/*`.
        for path in ["/api%2Fx%5Cy", "/api/x%5Cy", "/api%5Cx"] {
            assert_eq!(gate.route("GET", "h", path, ip).unwrap().rule(), "api", "{path}");
        }
        for path in ["/users/sign_in.xml", "/users/sign_in.a-b", "/users/sign_in.json/"] {
            let route = gate.route("POST", "h", path, ip).unwrap();
            assert_eq!((route.rule(), route.key().id.as_str()), ("sign-in", "path:/users/sign_in"), "{path}");
        }
    }

    #[test]
    fn a_rule_on_a_method_holds_the_requests_that_reach_its_handler() {
        let mut search =
            Rule::new("search", KeySource::IP, vec![limit(Quota::fixed_window(5, Duration::from_secs(9)).unwrap())]);
        search.request_match = RequestMatch::new(vec![], None, None, vec!["GET".into(), "POST".into()]).unwrap();
        let gate = gate(vec![search]).unwrap();
        let with = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| (pairs.iter()).find(|(key, _)| *key == name).map(|(_, value)| (*value).to_owned())
        };
        assert!(gate.route("HEAD", "h", "/search", with(&[])).is_some());
        assert!(gate.route("DELETE", "h", "/x", with(&[])).is_none());
        let overridden = with(&[("x-http-method-override", "POST")]);
        assert!(gate.route("PUT", "h", "/x", overridden).is_some());
        assert!(gate.route("PUT", "h", "/x", with(&[("x-method-override", "delete, get")])).is_some());
        assert!(gate.route("PUT", "h", "/x", with(&[("x-http-method", "G E T")])).is_none());
        assert!(gate.route("POST", "h", "/x?a=1&_method=GET", with(&[])).is_some());
        assert!(gate.route("PUT", "h", "/x?_method=GET", with(&[])).is_none(), "only a POST's");
    }

    #[test]
    fn a_method_override_adds_a_rule_and_never_takes_a_request_out_of_its_own() {
        let minute = Duration::from_secs(60);
        let rule = |name: &str, method: &str, limit: u32| {
            let mut rule =
                Rule::new(name, KeySource::IP, vec![self::limit(Quota::fixed_window(limit, minute).unwrap())]);
            rule.request_match =
                RequestMatch::new(vec![], None, Some("/items/**".into()), vec![method.into()]).unwrap();
            rule
        };
        let gate = gate(vec![rule("reads", "GET", 1000), rule("writes", "POST", 2)]).unwrap();
        let override_get = |name: &str| (name == "x-http-method-override").then(|| "GET".to_owned());
        let also = |route: &Route| route.also.iter().map(|also| also.rule().to_owned()).collect::<Vec<_>>();
        let route = gate.route("POST", "h", "/items/1", override_get).unwrap();
        assert_eq!((route.rule(), also(&route)), ("writes", vec!["reads".to_owned()]));
        for target in ["/items/1?_method=GET", "/items/1?a=1&%5Fmethod=G%45T", "/items/1?.method=GET"] {
            let route = gate.route("POST", "h", target, |_| None).unwrap();
            assert_eq!((route.rule(), also(&route)), ("writes", vec!["reads".to_owned()]), "{target}");
        }
        // A rule the request's own method matches is decided once, however the override names it.
        let override_post = |name: &str| (name == "x-http-method").then(|| "POST".to_owned());
        assert!(also(&gate.route("POST", "h", "/items/1", override_post).unwrap()).is_empty());
        // With no rule on its own method, the override's rule is the request's.
        let route = gate.route("PUT", "h", "/items/1", override_get).unwrap();
        assert_eq!((route.rule(), also(&route).is_empty()), ("reads", true));
        // Every method an override names adds its rule, and junk names crowd none out (a DELETE beside a GET, or
        // after four made-up names).
        let gate =
            self::gate(vec![rule("reads", "GET", 1000), rule("writes", "POST", 2), rule("deletes", "DELETE", 2)])
                .unwrap();
        let junk = |name: &str| (name == "x-http-method-override").then(|| "A,B,C,D,E,GET".to_owned());
        let route = gate.route("POST", "h", "/items/1?_method=DELETE", junk).unwrap();
        assert_eq!(route.rule(), "writes");
        assert_eq!(also(&route), ["deletes", "reads"]);
        // PHP reads `+_method` and `%20_method` as `_method` too.
        for target in ["/items/1?+_method=DELETE", "/items/1?%20_method=DELETE", "/items/1?_method=+DELETE"] {
            let route = gate.route("POST", "h", target, |_| None).unwrap();
            assert_eq!(also(&route), ["deletes"], "{target}");
        }
        // A rule naming no method holds a request an override sends to a method no rule names.
        let mut any = rule("any", "GET", 60);
        any.request_match = RequestMatch::new(vec![], None, Some("/items/**".into()), vec![]).unwrap();
        let gate = self::gate(vec![rule("writes", "POST", 1000), any]).unwrap();
        let override_delete = |name: &str| (name == "x-http-method-override").then(|| "DELETE".to_owned());
        let route = gate.route("POST", "h", "/items/1", override_delete).unwrap();
        assert_eq!((route.rule(), also(&route)), ("writes", vec!["any".to_owned()]));
    }

    #[test]
    fn broken_rules_are_named_in_the_error() {
        let second = Duration::from_secs(1);
        let fixed = || vec![limit(Quota::fixed_window(1, second).unwrap())];
        let message = |rules| gate(rules).unwrap_err().to_string();
        assert!(message(vec![Rule::new("a b", KeySource::IP, fixed())]).contains("rule \"a b\": a rule name is"));
        assert!(message(vec![Rule::new("a", KeySource::IP, fixed()), Rule::new("a", KeySource::IP, fixed())])
            .contains("two rules are named \"a\""));
        assert!(message(vec![Rule::new("a", KeySource::IP, vec![])]).contains("rule \"a\": no limits"));
        let leases = vec![limit(Quota::concurrency(1, second).unwrap())];
        assert!(message(vec![Rule::new("a", KeySource::IP, leases)]).contains("concurrency limits are not available"));
        let mut throws = Rule::new("a", KeySource::IP, fixed());
        throws.on_error = OnError::Throw;
        assert!(message(vec![throws]).contains("onError is \"allow\" (fail open) or \"deny\""));
        // Past 2^31 - 1 ms a JS timer fires at once: every request would time out, and onError "allow" admit it.
        let mut slow = Rule::new("a", KeySource::IP, fixed());
        slow.timeout = Some(Duration::from_secs(30 * 24 * 3600));
        assert!(message(vec![slow]).contains("rule \"a\": timeout: the request timeout must be at most 2147483647 ms"));
        // "0.5ms" parses, but timers count whole ms: every request would time out at once.
        let mut quick = Rule::new("a", KeySource::IP, fixed());
        quick.timeout = Some(Duration::from_micros(500));
        assert!(message(vec![quick]).contains("rule \"a\": timeout: the request timeout must be at least 1 ms"));
        // Two rules keeping a limit under one name share its state, which is one algorithm's over one interval.
        let named = |quota| {
            let mut shared = limit(quota);
            shared.name = Some("shared".into());
            vec![shared]
        };
        let window = Quota::fixed_window(2, second).unwrap();
        for other in [Quota::gcra(2, 2, second).unwrap(), Quota::fixed_window(2, 2 * second).unwrap()] {
            let clash = message(vec![
                Rule::new("a", KeySource::IP, named(window)),
                Rule::new("b", KeySource::IP, named(other)),
            ]);
            assert!(clash.contains("rules \"a\" and \"b\" keep a limit under one name, \"shared\""), "{clash}");
        }
        let more = Quota::fixed_window(10, second).unwrap();
        assert!(gate(vec![Rule::new("a", KeySource::IP, named(window)), Rule::new("b", KeySource::IP, named(more))])
            .is_ok());
    }

    #[test]
    fn limits_are_stored_under_the_rule_unless_named() {
        let second = Duration::from_secs(1);
        let mut shared = limit(Quota::fixed_window(100, second).unwrap());
        shared.name = Some("global".into());
        let rule = Rule::new("api", KeySource::IP, vec![limit(Quota::sliding_log(5, second).unwrap()), shared]);
        let gate = gate(vec![rule]).unwrap();
        let names: Vec<_> = gate.rules[0].policies.iter().map(|policy| policy.name.as_str()).collect();
        assert_eq!(names, ["api/sliding_log-1000ms", "global"]);
        assert_eq!(describe_limits(&gate.rules[0].policies), "5 per 1 s and 100 per 1 s");
    }
}
