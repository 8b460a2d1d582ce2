//! Which requests a rule applies to: hosts, a path prefix or pattern, methods.

use std::borrow::Cow;

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
                return Err(Error::InvalidConfig(format!("paths and patterns start with \"/\", got {path:?}")));
            }
            if path.contains(['?', '#']) {
                return Err(Error::InvalidConfig(format!(
                    "paths and patterns match the path alone, without \"?\" (the query) or \"#\", got {path:?}"
                )));
            }
            // Nor a spelling a request's path never has: the rule would never apply.
            let encoded = as_requests_spell(path);
            if encoded != *path {
                return Err(Error::InvalidConfig(format!(
                    "paths and patterns are written as requests' paths are matched, percent-encoded and normalised: \
                     write {encoded:?}, not {path:?}"
                )));
            }
        }
        for host in &hosts {
            // A name as the URL's host has it: no scheme, port, path or space.
            let name = host.strip_prefix("*.").unwrap_or(host);
            if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b)) {
                return Err(Error::InvalidConfig(format!(
                    "{host:?} is not a host name: write e.g. \"example.com\" or \"*.example.com\" (no scheme, port \
                     or path)"
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

    /// Whether a request with this method, host and path (as [`normalize_path`] gives it) is one the rule applies
    /// to. Paths match in any case, and a pattern also without a trailing `/`, as most origins route them.
    pub fn matches(&self, method: &str, host: &str, path: &str) -> bool {
        // A fully qualified name's trailing dot (`api.example.com.`) names the same host.
        let host = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
        (self.methods.is_empty() || self.methods.iter().any(|m| m.eq_ignore_ascii_case(method)))
            && (self.hosts.is_empty() || self.hosts.iter().any(|pattern| host_matches(pattern, &host)))
            && self.path_prefix.as_ref().is_none_or(|prefix| {
                (path.as_bytes().get(..prefix.len())).is_some_and(|start| start.eq_ignore_ascii_case(prefix.as_bytes()))
            })
            && self.pattern.as_ref().is_none_or(|pattern| {
                let trimmed = path.strip_suffix('/').filter(|trimmed| !trimmed.is_empty());
                glob(pattern.as_bytes(), path.as_bytes())
                    || trimmed.is_some_and(|trimmed| glob(pattern.as_bytes(), trimmed.as_bytes()))
            })
    }
}

/// The characters besides letters, digits and `/` whose escapes [`normalize_path`] decodes: unreserved ones and
/// those with no meaning to a router. `%3F`, `%23`, `%25` and `%3B` stay escaped: decoded, they change the path.
const DECODED: &[u8] = b"-._~!$&'()*+,=:@";

/// The path a rule matches and a path key counts: unreserved escapes decoded, other escapes upper-cased,
/// `;parameters` dropped, slashes merged, dot segments resolved, case kept; `%5C` stays escaped. Origins read these
/// spellings as one path (docs/design/gate-routing.md).
pub fn normalize_path(path: &str) -> Cow<'_, str> {
    normalize(path, b"/")
}

/// [`normalize_path`] with `%5C` read as `/` too, as IIS reads it.
pub fn normalize_path_reading_backslashes(path: &str) -> Cow<'_, str> {
    normalize(path, b"/\\")
}

/// [`normalize_path`] but for `%2F` and `%5C`, which stay escaped, as an origin that does not take them for `/`.
pub fn normalize_path_keeping_slashes(path: &str) -> Cow<'_, str> {
    normalize(path, b"")
}

/// The normalised path with the escapes of `separators` (`/`, `\`) read as `/`.
fn normalize<'p>(path: &'p str, separators: &[u8]) -> Cow<'p, str> {
    if !path.contains(['%', ';']) && !path.contains("//") && !has_dot_segment(path) {
        return Cow::Borrowed(path);
    }
    let bytes = path.as_bytes();
    let mut normal = Vec::with_capacity(bytes.len());
    let mut in_parameters = false;
    let mut at = 0;
    while at < bytes.len() {
        let escaped = (bytes[at] == b'%')
            .then(|| bytes.get(at + 1..at + 3))
            .flatten()
            .filter(|hex| hex.iter().all(u8::is_ascii_hexdigit));
        let decoded = escaped
            .and_then(|hex| u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok())
            .filter(|&byte| byte.is_ascii_alphanumeric() || DECODED.contains(&byte) || separators.contains(&byte))
            .map(|byte| if byte == b'\\' { b'/' } else { byte });
        if let (Some(hex), None) = (escaped, decoded) {
            // An escape kept: in upper case, as the URL parser writes its own (`%c3%a9` is `%C3%A9`).
            if !in_parameters {
                normal.push(b'%');
                normal.extend(hex.iter().map(u8::to_ascii_uppercase));
            }
            at += 3;
            continue;
        }
        let byte = decoded.unwrap_or(bytes[at]);
        at += if decoded.is_some() { 3 } else { 1 };
        if byte == b'/' {
            in_parameters = false;
        } else if byte == b';' && decoded.is_none() {
            in_parameters = true;
        }
        let repeated_slash = byte == b'/' && normal.last() == Some(&b'/');
        if !in_parameters && !repeated_slash {
            normal.push(byte);
        }
    }
    // Only ASCII bytes were put in place of ASCII text, so the bytes are still UTF-8.
    let normal = String::from_utf8(normal).unwrap_or_else(|_| path.to_owned());
    Cow::Owned(resolve_dot_segments(&normal))
}

/// `path` with its `.` and `..` segments resolved as the URL parser resolves them.
fn resolve_dot_segments(path: &str) -> String {
    if !has_dot_segment(path) {
        return path.to_owned();
    }
    let mut segments: Vec<&str> = Vec::new();
    let mut parts = path.split('/').peekable();
    while let Some(segment) = parts.next() {
        match segment {
            "." => {}
            ".." => {
                if segments.len() > 1 {
                    segments.pop();
                }
            }
            _ => segments.push(segment),
        }
        if parts.peek().is_none() && matches!(segment, "." | "..") {
            segments.push("");
        }
    }
    segments.join("/")
}

/// `path` without its last segment's format suffix, as Rails routes it: `/users/sign_in` for `/users/sign_in.json`,
/// `/users/sign_in.json/` or `/users/sign_in.`; `/.env` has none.
pub fn without_format_suffix(path: &str) -> Option<&str> {
    let path = path.strip_suffix('/').unwrap_or(path);
    let segment_start = path.rfind('/').map_or(0, |slash| slash + 1);
    let dot = segment_start + path[segment_start..].find('.')?;
    (dot > segment_start).then_some(&path[..dot])
}

fn has_dot_segment(path: &str) -> bool {
    path.split('/').any(|segment| segment == "." || segment == "..")
}

/// `path` as a request's path is matched: percent-encoded as the WHATWG URL parser encodes a path (`\` read as `/`),
/// then [`normalize_path`].
fn as_requests_spell(path: &str) -> String {
    let path = path.replace('\\', "/");
    let mut encoded = String::with_capacity(path.len());
    for byte in path.bytes() {
        if byte.is_ascii_graphic() && !b"\"<>`{}".contains(&byte) {
            encoded.push(byte as char);
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    normalize_path(&encoded).into_owned()
}

fn host_matches(pattern: &str, host: &str) -> bool {
    match pattern.strip_prefix("*.") {
        Some(domain) => {
            host.len() > domain.len() + 1 && host.ends_with(domain) && host[..host.len() - domain.len()].ends_with('.')
        }
        None => pattern == host,
    }
}

/// `*` matches within a segment, `**` across segments; letters match in either case. O(pattern × path), with no
/// backtracking, which would be exponential on a path the client chooses.
fn glob(pattern: &[u8], path: &[u8]) -> bool {
    // matched[n]: the pattern read so far matches path[..n].
    let mut matched = vec![false; path.len() + 1];
    matched[0] = true;
    let mut rest = pattern;
    while let Some((&first, tail)) = rest.split_first() {
        match (first, tail) {
            (b'*', [b'*', tail @ ..]) => {
                // Anything, from the shortest match on.
                if let Some(shortest) = matched.iter().position(|&m| m) {
                    matched[shortest..].fill(true);
                }
                rest = tail;
            }
            (b'*', tail) => {
                // Any run without a '/', after any match.
                let mut run = false;
                for n in 0..matched.len() {
                    run = matched[n] || (run && path[n - 1] != b'/');
                    matched[n] = run;
                }
                rest = tail;
            }
            (byte, tail) => {
                for n in (1..matched.len()).rev() {
                    matched[n] = matched[n - 1] && path[n - 1].eq_ignore_ascii_case(&byte);
                }
                matched[0] = false;
                rest = tail;
            }
        }
        if !matched.contains(&true) {
            return false;
        }
    }
    matched[path.len()]
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
        assert!(rule.matches("POST", "api.test.", "/v1/items"), "a fully qualified name");
        assert!(rule.matches("POST", "a.example.com.", "/v1/items"));
        assert!(!rule.matches("POST", "badexample.com", "/v1/items"));
        assert!(!rule.matches("GET", "api.test", "/v1/items"));
        assert!(!rule.matches("POST", "api.test", "/v2/items"));
        assert!(RequestMatch::default().matches("DELETE", "any", "/"));
    }

    /// The backtracking matcher `glob` replaced: what `*` and `**` mean, written as directly as it gets.
    fn glob_by_backtracking(pattern: &[u8], path: &[u8]) -> bool {
        match pattern {
            [] => path.is_empty(),
            [b'*', b'*', rest @ ..] => (0..=path.len()).any(|skip| glob_by_backtracking(rest, &path[skip..])),
            [b'*', rest @ ..] => {
                let segment = path.iter().position(|&b| b == b'/').unwrap_or(path.len());
                (0..=segment).any(|skip| glob_by_backtracking(rest, &path[skip..]))
            }
            [first, rest @ ..] => path.first() == Some(first) && glob_by_backtracking(rest, &path[1..]),
        }
    }

    /// Every text of up to `most` bytes from `alphabet`.
    fn texts(alphabet: &[u8], most: usize) -> Vec<Vec<u8>> {
        let mut all = vec![Vec::new()];
        let mut last = vec![Vec::new()];
        for _ in 0..most {
            last = (last.iter())
                .flat_map(|text| alphabet.iter().map(move |&b| [text.as_slice(), &[b]].concat()))
                .collect();
            all.extend(last.iter().cloned());
        }
        all
    }

    #[test]
    fn the_pass_per_pattern_character_matches_what_backtracking_does_on_every_small_case() {
        let paths = texts(b"ab/", 6);
        for pattern in texts(b"a/*", 5) {
            for path in &paths {
                assert_eq!(
                    glob(&pattern, path),
                    glob_by_backtracking(&pattern, path),
                    "{:?} against {:?}",
                    String::from_utf8_lossy(&pattern),
                    String::from_utf8_lossy(path)
                );
            }
        }
    }

    #[test]
    fn many_stars_against_a_long_path_a_client_chose_take_one_pass_each() {
        // Backtracking would take seconds on 2 KB of this; a pass per pattern character takes a moment on 64 KB.
        let path = format!("/{}", "a".repeat(65_536));
        assert!(!with_pattern("/**a**a**a**a**b").matches("GET", "h", &path));
        assert!(with_pattern("/**a**a**a**a**").matches("GET", "h", &path));
        assert!(!with_pattern("/*a*a*a*a*a*b").matches("GET", "h", &path));
    }

    #[test]
    fn spellings_an_origin_reads_as_the_same_path_match_alike() {
        assert_eq!(normalize_path("/login"), "/login");
        assert_eq!(normalize_path("/%6Cogin"), "/login");
        assert_eq!(normalize_path("/%6cOGIN%7E%2d"), "/lOGIN~-");
        assert_eq!(normalize_path("//api///login"), "/api/login");
        // `%2F` is a `/` to some origins, and `;parameters` nothing to others; what that makes of dot segments too.
        assert_eq!(normalize_path("/a%2Fb%2F%2F"), "/a/b/");
        assert_eq!(normalize_path("/api%2flogin;x=1"), "/api/login");
        assert_eq!(normalize_path("/a;p=1/b;q"), "/a/b");
        assert_eq!(normalize_path("/public/..%2Fadmin"), "/admin");
        assert_eq!(normalize_path("/a/%2e%2e%2F..%2F..%2Fb"), "/b");
        assert_eq!(normalize_path("/a%3Bb"), "/a%3Bb");
        // Other reserved characters, bad escapes and text beyond ASCII stay as they are.
        assert_eq!(normalize_path("/%zz/%4/%"), "/%zz/%4/%");
        assert_eq!(normalize_path("/caf%C3%A9//é"), "/caf%C3%A9/é");
        // Escapes of what a path holds as it is, with no meaning to a router, are decoded (Go's ServeMux routes
        // `/x%3Agenerate` as `/x:generate`); the escapes kept are put in upper case, as the URL parser writes them.
        assert_eq!(
            normalize_path("/x%3Agenerate/%40bob/%21%24%26%27%28%29%2A%2B%2C%3D"),
            "/x:generate/@bob/!$&'()*+,="
        );
        assert_eq!(normalize_path("/caf%c3%a9/%3f%23%25%3b"), "/caf%C3%A9/%3F%23%25%3B");
        assert_eq!(normalize_path("/a;p=%c3/b"), "/a/b");
        // For an origin that does not take `%2F` for `/`, the spelling that keeps it: no dot segments made of it, and
        // no end to a `;parameters` run.
        assert_eq!(normalize_path("/api/expensive%2F..%2Fcheap"), "/api/cheap");
        assert_eq!(normalize_path_keeping_slashes("/api/expensive%2f..%2Fcheap"), "/api/expensive%2F..%2Fcheap");
        assert_eq!(normalize_path_keeping_slashes("/login;x%2F..%2Fadmin"), "/login");
        assert_eq!(normalize_path_keeping_slashes("/%6Cogin//a/../b"), "/login/b");
        // `%5C` is a separator to IIS, as `%2F` is to others; the other spellings keep it.
        assert_eq!(normalize_path_reading_backslashes("/auth%5clogin"), "/auth/login");
        assert_eq!(normalize_path_reading_backslashes("/api/expensive%5C..%5Ccheap"), "/api/cheap");
        assert_eq!(normalize_path("/api%2Fx%5cy"), "/api/x%5Cy");
        assert_eq!(normalize_path_keeping_slashes("/api/expensive%5c..%5Ccheap"), "/api/expensive%5C..%5Ccheap");
        // A format suffix (Rails routes `/users/sign_in.json` to `/users/sign_in`'s action).
        for (path, name) in [
            ("/users/sign_in.json", "/users/sign_in"),
            ("/users/sign_in.json/", "/users/sign_in"),
            ("/users/sign_in.", "/users/sign_in"),
            ("/users/sign_in.a-b", "/users/sign_in"),
            ("/users/sign_in.%C3%A9", "/users/sign_in"),
            ("/users/sign_in.json.xml", "/users/sign_in"),
            ("/a.b/c.tar.gz", "/a.b/c"),
        ] {
            assert_eq!(without_format_suffix(path), Some(name), "{path}");
        }
        for none in ["/users/sign_in", "/.env", "/a.b/c", "/", ""] {
            assert_eq!(without_format_suffix(none), None, "{none}");
        }
        let login = with_pattern("/login");
        assert!(login.matches("POST", "h", "/LOGIN") && login.matches("POST", "h", "/Login/"));
        assert!(with_pattern("/users/*/posts").matches("GET", "h", "/Users/7/POSTS"));
        assert!(RequestMatch::new(vec![], Some("/api/".into()), None, vec![]).unwrap().matches("GET", "h", "/API/x"));
        assert!(login.matches("POST", "h", &normalize_path("/%6Cogin")));
        assert!(login.matches("POST", "h", &normalize_path("//login")));
        assert!(login.matches("POST", "h", &normalize_path("/login;jsessionid=1")));
        assert!(with_pattern("/api/login").matches("POST", "h", &normalize_path("/api%2Flogin")));
        assert!(login.matches("POST", "h", "/login/"));
        assert!(!login.matches("POST", "h", "/login/x"));
        assert!(with_pattern("/").matches("GET", "h", "/"));
    }

    #[test]
    fn a_path_no_request_has_is_refused_with_the_spelling_to_write() {
        // The URL parser percent-encodes a request's path, and normalize_path decodes unreserved escapes and merges
        // slashes: a rule written otherwise would never apply.
        for (written, spelt) in [
            ("/café", "/caf%C3%A9"),
            ("/%6Cogin", "/login"),
            ("//admin", "/admin"),
            ("/a b", "/a%20b"),
            ("/x<y>", "/x%3Cy%3E"),
            ("/a/./b", "/a/b"),
            ("/a/../b", "/b"),
            ("/a/%2e%2e/b", "/b"),
            ("/a\\b", "/a/b"),
            ("/a%2Fb", "/a/b"),
            ("/login;x=1", "/login"),
            ("/x%3Agenerate", "/x:generate"),
            ("/caf%c3%a9", "/caf%C3%A9"),
        ] {
            for (prefix, pattern) in [(Some(written.to_owned()), None), (None, Some(written.to_owned()))] {
                let error = RequestMatch::new(vec![], prefix, pattern, vec![]).unwrap_err().to_string();
                assert!(error.contains(&format!("write {spelt:?}")), "{written}: {error}");
            }
        }
        let cafe = with_pattern("/caf%C3%A9");
        assert!(cafe.matches("GET", "h", &normalize_path("/caf%C3%A9")));
        assert!(with_pattern("/a%3Bb/**").matches("GET", "h", &normalize_path("/a%3Bb/c")));
    }

    #[test]
    fn misspelt_parts_are_refused() {
        assert!(RequestMatch::new(vec![], Some("api".into()), None, vec![]).is_err());
        assert!(RequestMatch::new(vec![], None, None, vec!["GET /".into()]).is_err());
        assert!(RequestMatch::new(vec![], Some("/search?q=".into()), None, vec![]).is_err());
        assert!(RequestMatch::new(vec![], None, Some("/a/*#top".into()), vec![]).is_err());
        for host in ["", "https://example.com", "example.com:443", "example.com/", "*.", "a b"] {
            assert!(RequestMatch::new(vec![host.into()], None, None, vec![]).is_err(), "{host:?}");
        }
        assert!(RequestMatch::new(vec!["*.api-1.example.com".into(), "xn--bcher-kva.de".into()], None, None, vec![])
            .is_ok());
    }
}
