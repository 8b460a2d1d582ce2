//! The playground in the dev stack: a static file server for the checkout's page (`www/`) and the npm package it
//! imports (`pkg/`, wasm included), plus `/playground.json`, which tells the page where the bridge is and its token.
//!
//! The page runs the wasm core in the browser and calls the bridge itself; this server only hands out files, built
//! beforehand by `scripts/build-wasm`.

use std::net::SocketAddr;
use std::path::{Component, Path, PathBuf};

use axum::extract::{Path as UrlPath, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use tokio::task::JoinHandle;

/// Where the playground's files are and where it listens.
#[derive(Debug, Clone)]
pub struct PlaygroundConfig {
    /// The page: `index.html` and its modules.
    pub www: PathBuf,
    /// The built npm package the page imports.
    pub pkg: PathBuf,
    /// Address to listen on (port 0: any free port).
    pub listen: SocketAddr,
}

impl PlaygroundConfig {
    /// The playground of the checkout at `root`, if it has one (`www/index.html`), on loopback port `port`.
    pub fn in_checkout(root: &Path, port: u16) -> Option<PlaygroundConfig> {
        root.join("www/index.html").is_file().then(|| PlaygroundConfig {
            www: root.join("www"),
            pkg: root.join("pkg"),
            listen: SocketAddr::from(([127, 0, 0, 1], port)),
        })
    }
}

/// The running playground server.
#[derive(Debug)]
pub struct Playground {
    server: JoinHandle<()>,
    /// The page's URL.
    pub url: String,
}

impl Playground {
    /// Stops serving.
    pub fn stop(self) {
        self.server.abort();
    }
}

#[derive(Clone)]
struct Site {
    www: PathBuf,
    pkg: PathBuf,
    endpoint: serde_json::Value,
    /// The `Host` values a request may carry: this server's own loopback names.
    hosts: Vec<String>,
}

/// Starts serving the page, telling it to use the bridge at `bridge_url` with `token`.
pub async fn start(config: &PlaygroundConfig, bridge_url: &str, token: &str) -> Result<Playground, String> {
    if !config.pkg.join("browser.js").is_file() {
        return Err(format!(
            "the playground imports the npm package from {}, which is not built: run scripts/build-wasm (or \
             scripts/dev, which builds it), or pass --no-playground",
            config.pkg.display()
        ));
    }
    let listener = tokio::net::TcpListener::bind(config.listen).await.map_err(|e| {
        format!("could not listen on {} for the playground: {e}; pass --playground-port", config.listen)
    })?;
    let address = listener.local_addr().map_err(|e| e.to_string())?;
    let site = Site {
        www: config.www.clone(),
        pkg: config.pkg.clone(),
        endpoint: serde_json::json!({ "url": bridge_url, "token": token }),
        hosts: ["127.0.0.1", "localhost", "[::1]"].iter().map(|host| format!("{host}:{}", address.port())).collect(),
    };
    let app = Router::new()
        .route("/playground.json", get(endpoint))
        .route("/pkg/{*path}", get(package_file))
        .route("/", get(index))
        .route("/{*path}", get(page_file))
        .layer(middleware::from_fn_with_state(site.clone(), own_host_only))
        .with_state(site);
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(Playground { server, url: format!("http://{address}/") })
}

/// Refuses requests for any other host name: a page elsewhere could point its own name at 127.0.0.1 (DNS rebinding)
/// and read `/playground.json`, token included.
async fn own_host_only(State(site): State<Site>, request: Request, next: Next) -> Response {
    let host = request.headers().get(header::HOST).and_then(|host| host.to_str().ok());
    if host.is_some_and(|host| site.hosts.iter().any(|own| own == host)) {
        return next.run(request).await;
    }
    let message = format!("this playground answers only to {}\n", site.hosts.join(", "));
    (StatusCode::FORBIDDEN, message).into_response()
}

async fn endpoint(State(site): State<Site>) -> Response {
    no_store(Json(site.endpoint).into_response())
}

async fn index(State(site): State<Site>) -> Response {
    file(&site.www, "index.html").await
}

async fn page_file(State(site): State<Site>, UrlPath(path): UrlPath<String>) -> Response {
    file(&site.www, &path).await
}

async fn package_file(State(site): State<Site>, UrlPath(path): UrlPath<String>) -> Response {
    file(&site.pkg, &path).await
}

/// `path` under `folder`, with its content type. Only plain names are followed, so nothing outside is served.
async fn file(folder: &Path, path: &str) -> Response {
    let relative = Path::new(path);
    let plain = relative.components().all(|part| matches!(part, Component::Normal(_)));
    let Some(content_type) = plain.then(|| content_type(relative)).flatten() else {
        return not_found(path);
    };
    match tokio::fs::read(folder.join(relative)).await {
        Ok(bytes) => no_store(([(header::CONTENT_TYPE, content_type)], bytes).into_response()),
        Err(_) => not_found(path),
    }
}

/// The content types of the page's files; anything else is not served. Browsers stream-compile wasm only with
/// `application/wasm`.
fn content_type(path: &Path) -> Option<&'static str> {
    Some(match path.extension()?.to_str()? {
        "html" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "json" => "application/json",
        "svg" => "image/svg+xml",
        "wasm" => "application/wasm",
        "ts" => "text/plain; charset=utf-8",
        _ => return None,
    })
}

fn not_found(path: &str) -> Response {
    (StatusCode::NOT_FOUND, format!("not found: /{path}\n")).into_response()
}

/// Never let the browser keep a stale copy (the files change as the developer rebuilds), nor guess another type.
fn no_store(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, header::HeaderValue::from_static("no-store"));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, header::HeaderValue::from_static("nosniff"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_pages_kinds_of_file_have_a_content_type() {
        assert_eq!(content_type(Path::new("core_bg.wasm")), Some("application/wasm"));
        assert_eq!(content_type(Path::new("app/log.js")), Some("text/javascript; charset=utf-8"));
        assert_eq!(content_type(Path::new("secrets.env")), None);
        assert_eq!(content_type(Path::new("Makefile")), None);
    }
}
