//! Which requests a rule applies to: hosts, a path prefix or pattern, methods.

use crate::error::{Error, Result};

/// A rule's `match`: every part given must hold; a part left out matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestMatch {
    /// Host names; `*.example.com` matches every subdomain (not `example.com` itself).
    pub hosts: Vec<String>,
    /// The path starts with this.
    pub path_prefix: Option<String>,
    /// The path matches this pattern: `*` is any run of characters within one segment, `**` anything, across
    /// segments too. `/users/*/posts` matches `/users/7/posts`; `/static/**` everything under `/static/`.
    pub pattern: Option<String>,
    /// Upper-case method names (`GET`, `POST`, …).
    pub methods: Vec<String>,
}

impl RequestMatch {
    /// Checks the parts' spelling; `host`, `pattern` and `methods` are normalised.
    pub fn new(
        hosts: Vec<String>,
        path_prefix: Option<String>,
        pattern: Option<String>,
        methods: Vec<String>,
    ) -> Result<RequestMatch> {
        for path in path_prefix.iter().chain(&pattern) {
            if !path.starts_with('/') {
                return Err(Error::InvalidConfig(format!(
                    "paths and patterns start with \"/\", got {path:?}"
                )));
            }
        }
        for method in &methods {
            if method.is_empty() || !method.bytes().all(|b| b.is_ascii_alphabetic()) {
                return Err(Error::InvalidConfig(format!(
                    "{method:?} is not an HTTP method: write e.g. \"GET\" or \"POST\""
                )));
            }
        }
        Ok(RequestMatch {
            hosts: hosts.into_iter().map(|host| host.to_ascii_lowercase()).collect(),
            path_prefix,
            pattern,
            methods: methods.into_iter().map(|method| method.to_ascii_uppercase()).collect(),
        })
    }

    /// Whether a request with this method, host and path is one the rule applies to.
    pub fn matches(&self, method: &str, host: &str, path: &str) -> bool {
        let host = host.to_ascii_lowercase();
        (self.methods.is_empty() || self.methods.iter().any(|m| m.eq_ignore_ascii_case(method)))
            && (self.hosts.is_empty() || self.hosts.iter().any(|pattern| host_matches(pattern, &host)))
            && self
                .path_prefix
                .as_ref()
                .is_none_or(|prefix| path.starts_with(prefix.as_str()))
            && self
                .pattern
                .as_ref()
                .is_none_or(|pattern| glob(pattern.as_bytes(), path.as_bytes()))
    }
}

fn host_matches(pattern: &str, host: &str) -> bool {
    match pattern.strip_prefix("*.") {
        Some(domain) => {
            host.len() > domain.len() + 1 && host.ends_with(domain) && host[..host.len() - domain.len()].ends_with('.')
        }
        None => pattern == host,
    }
}

/// `*` matches within a segment, `**` across segments. Backtracking over at most the pattern's stars: patterns are
/// short and written by operators, paths by clients, so the cost is bounded by the pattern, not the client.
fn glob(pattern: &[u8], path: &[u8]) -> bool {
    match pattern {
        [] => path.is_empty(),
        [b'*', b'*', rest @ ..] => (0..=path.len()).any(|skip| glob(rest, &path[skip..])),
        [b'*', rest @ ..] => {
            let segment = path.iter().position(|&b| b == b'/').unwrap_or(path.len());
            (0..=segment).any(|skip| glob(rest, &path[skip..]))
        }
        [first, rest @ ..] => path.first() == Some(first) && glob(rest, &path[1..]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_pattern(pattern: &str) -> RequestMatch {
        RequestMatch::new(vec![], None, Some(pattern.into()), vec![]).unwrap()
    }

    #[test]
    fn one_star_stays_in_its_segment_two_cross_them() {
        let posts = with_pattern("/users/*/posts");
        assert!(posts.matches("GET", "h", "/users/7/posts"));
        assert!(!posts.matches("GET", "h", "/users/7/8/posts"));
        assert!(!posts.matches("GET", "h", "/users/7/posts/1"));
        let tree = with_pattern("/static/**");
        assert!(tree.matches("GET", "h", "/static/a/b/c.css"));
        assert!(!tree.matches("GET", "h", "/api/static/x"));
        assert!(with_pattern("/*.php").matches("GET", "h", "/index.php"));
        assert!(!with_pattern("/*.php").matches("GET", "h", "/a/index.php"));
    }

    #[test]
    fn hosts_methods_and_prefixes() {
        let rule = RequestMatch::new(
            vec!["*.Example.com".into(), "api.test".into()],
            Some("/v1/".into()),
            None,
            vec!["post".into()],
        )
        .unwrap();
        assert!(rule.matches("POST", "a.example.com", "/v1/items"));
        assert!(rule.matches("post", "API.test", "/v1/"));
        assert!(!rule.matches("POST", "example.com", "/v1/items"));
        assert!(!rule.matches("POST", "badexample.com", "/v1/items"));
        assert!(!rule.matches("GET", "api.test", "/v1/items"));
        assert!(!rule.matches("POST", "api.test", "/v2/items"));
        assert!(RequestMatch::default().matches("DELETE", "any", "/"));
    }

    #[test]
    fn misspelt_parts_are_refused() {
        assert!(RequestMatch::new(vec![], Some("api".into()), None, vec![]).is_err());
        assert!(RequestMatch::new(vec![], None, None, vec!["GET /".into()]).is_err());
    }
}
