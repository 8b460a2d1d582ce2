//! CORS, so that a page (the playground, or any browser app given the token) can call the bridge with `fetch`.
//!
//! Only origins the operator lists are answered (`*` for any): a bridge nobody meant to expose to web pages should not
//! be, token or not. Preflights are answered before the token check (browsers send them without credentials); every
//! response to an allowed origin, errors included, carries `Access-Control-Allow-Origin`.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header::{self, HeaderValue};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

/// The origins a bridge answers; empty: no CORS at all (the default).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CorsOrigins(pub Vec<String>);

impl CorsOrigins {
    /// The `Access-Control-Allow-Origin` value for a request from `origin`, if it is allowed.
    fn allow(&self, origin: &HeaderValue) -> Option<HeaderValue> {
        if self.0.iter().any(|allowed| allowed == "*") {
            return Some(HeaderValue::from_static("*"));
        }
        let origin_text = origin.to_str().ok()?;
        self.0.iter().any(|allowed| allowed == origin_text).then(|| origin.clone())
    }
}

/// The headers a page may send: the token, the body's type, Upstash's base64 switch, the client's deadline.
const ALLOWED_HEADERS: &str = "authorization, content-type, upstash-encoding, edgelimit-deadline-ms";

pub(super) async fn cors(State(origins): State<Arc<CorsOrigins>>, request: Request, next: Next) -> Response {
    let Some(origin) = request.headers().get(header::ORIGIN).cloned() else {
        return next.run(request).await;
    };
    let allowed = origins.allow(&origin);
    if request.method() == Method::OPTIONS {
        let Some(allowed) = allowed else {
            let origin = String::from_utf8_lossy(origin.as_bytes()).into_owned();
            let message = format!("origin {origin} may not call this bridge: start it with --cors-origin {origin}");
            return (StatusCode::FORBIDDEN, Json(json!({ "error": message }))).into_response();
        };
        let mut response = StatusCode::NO_CONTENT.into_response();
        let headers = response.headers_mut();
        headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, allowed);
        headers.insert(header::ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static("POST"));
        headers.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, HeaderValue::from_static(ALLOWED_HEADERS));
        headers.insert(header::ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static("600"));
        headers.insert(header::VARY, HeaderValue::from_static("origin"));
        return response;
    }
    let mut response = next.run(request).await;
    if let Some(allowed) = allowed {
        response.headers_mut().insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, allowed);
        response.headers_mut().insert(header::VARY, HeaderValue::from_static("origin"));
    }
    response
}
