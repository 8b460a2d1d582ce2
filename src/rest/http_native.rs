//! HTTP natively: reqwest on hyper, with one connection pool per client (shared by its clones).

use std::time::Duration;

use super::Failure;

#[derive(Debug, Clone)]
pub(crate) struct Http {
    client: reqwest::Client,
}

impl Default for Http {
    /// A pool that never follows a redirect: whatever answered elsewhere would be read as the store's decision.
    fn default() -> Self {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            // Below the bridge's 10 s idle timeout, so no request goes on a connection the server is closing.
            .pool_idle_timeout(Duration::from_secs(5))
            .build()
            .expect("an HTTP client (reqwest's TLS backend starts)");
        Http { client }
    }
}

impl Http {
    /// POSTs `body` (JSON) with the bearer `token`, asking for base64-encoded replies; the status and the body.
    pub(crate) async fn post(
        &self,
        url: &str,
        token: &str,
        body: String,
        timeout: Duration,
    ) -> Result<(u16, String), Failure> {
        let request = self
            .client
            .post(url)
            .bearer_auth(token)
            .header("Upstash-Encoding", "base64")
            .header("Content-Type", "application/json")
            .header(super::DEADLINE_HEADER, timeout.as_millis().to_string())
            .timeout(timeout)
            .body(body);
        let response = request.send().await.map_err(failure)?;
        let status = response.status().as_u16();
        Ok((status, response.text().await.map_err(failure)?))
    }
}

fn failure(error: reqwest::Error) -> Failure {
    if error.is_timeout() {
        Failure::Timeout
    } else if error.is_builder() {
        Failure::Local(error.to_string())
    } else {
        Failure::Network(Box::new(error))
    }
}

/// Why `url` is not a URL a request can go to, if it is not (as reqwest reads it).
pub(crate) fn url_problem(url: &str) -> Option<String> {
    reqwest::Url::parse(url).err().map(|error| error.to_string())
}

/// Whether `url` names a user or password (reqwest would send them as Basic auth beside the bearer token).
pub(crate) fn url_has_credentials(url: &str) -> bool {
    reqwest::Url::parse(url).is_ok_and(|url| !url.username().is_empty() || url.password().is_some())
}

/// Natively, one request may wait for another's call (see `http_wasm.rs` for where it may not).
pub(crate) fn requests_may_wait_on_each_other() -> bool {
    true
}

/// Runs `task` on the Tokio runtime the caller is in (reqwest needs one already).
pub(crate) fn spawn(task: impl std::future::Future<Output = ()> + Send + 'static) {
    tokio::spawn(task);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_reqwest_cannot_build_is_local_not_the_network() {
        let error = reqwest::Client::new().post("http://[::1").build().unwrap_err();
        assert!(matches!(failure(error), Failure::Local(_)));
    }
}
