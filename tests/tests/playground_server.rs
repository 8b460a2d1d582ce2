//! The dev stack's playground server over real HTTP: the page and the package with the right content types, the
//! bridge's address for the page, nothing outside its folders, and a clear error when the package is not built.

use std::path::PathBuf;

use edgelimit_cli::playground::{self, PlaygroundConfig};

/// A checkout-like folder with `www/` and `pkg/` (or without `pkg/`), removed when dropped.
struct Checkout(PathBuf);

impl Checkout {
    fn new(with_package: bool) -> Checkout {
        let root = std::env::temp_dir().join(format!("edgelimit-playground-{}-{with_package}", std::process::id()));
        std::fs::create_dir_all(root.join("www/app")).unwrap();
        std::fs::write(root.join("www/index.html"), "<!doctype html><title>playground</title>").unwrap();
        std::fs::write(root.join("www/app/main.js"), "export {};").unwrap();
        std::fs::write(root.join("secret.js"), "outside").unwrap();
        if with_package {
            std::fs::create_dir_all(root.join("pkg")).unwrap();
            std::fs::write(root.join("pkg/browser.js"), "export {};").unwrap();
            std::fs::write(root.join("pkg/core_bg.wasm"), b"\0asm\x01\0\0\0").unwrap();
        }
        Checkout(root)
    }

    fn config(&self) -> PlaygroundConfig {
        PlaygroundConfig::in_checkout(&self.0, 0).expect("www/index.html exists")
    }
}

impl Drop for Checkout {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

async fn get(url: &str) -> (u16, String, Vec<u8>) {
    let response = reqwest::get(url).await.unwrap();
    let status = response.status().as_u16();
    let content_type =
        response.headers().get("content-type").map(|value| value.to_str().unwrap().to_owned()).unwrap_or_default();
    (status, content_type, response.bytes().await.unwrap().to_vec())
}

/// A GET of `target` exactly as written, over a plain TCP connection: the whole reply.
async fn raw_get(url: &str, target: &str) -> String {
    raw_get_for(url, target, "localhost").await
}

/// [`raw_get`] with this `Host` header (with the server's port).
async fn raw_get_for(url: &str, target: &str, host: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(url.trim_start_matches("http://")).await.unwrap();
    let port = url.rsplit(':').next().unwrap();
    let request = format!("GET {target} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut reply = String::new();
    stream.read_to_string(&mut reply).await.unwrap();
    reply
}

#[tokio::test]
async fn serves_the_page_the_package_and_where_the_bridge_is() {
    let checkout = Checkout::new(true);
    let server = playground::start(&checkout.config(), "http://127.0.0.1:8079", "dev-token").await.unwrap();
    let url = server.url.trim_end_matches('/');

    let (status, content_type, body) = get(&format!("{url}/")).await;
    assert_eq!((status, content_type.as_str()), (200, "text/html; charset=utf-8"));
    assert_eq!(body, b"<!doctype html><title>playground</title>");
    let (status, content_type, _) = get(&format!("{url}/app/main.js")).await;
    assert_eq!((status, content_type.as_str()), (200, "text/javascript; charset=utf-8"));
    // Browsers compile wasm while it downloads only when it comes as application/wasm.
    let (status, content_type, body) = get(&format!("{url}/pkg/core_bg.wasm")).await;
    assert_eq!((status, content_type.as_str(), &body[..4]), (200, "application/wasm", &b"\0asm"[..]));

    let (status, _, body) = get(&format!("{url}/playground.json")).await;
    let endpoint: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(status, 200);
    assert_eq!(endpoint, serde_json::json!({ "url": "http://127.0.0.1:8079", "token": "dev-token" }));

    // Sent raw: an HTTP client resolves dot segments before sending; a hostile one does not.
    for outside in ["/../secret.js", "/pkg/../secret.js", "/..%2fsecret.js", "/app/%2e%2e/%2e%2e/secret.js"] {
        let reply = raw_get(url, outside).await;
        assert!(reply.starts_with("HTTP/1.1 404"), "{outside}: {reply}");
        assert!(!reply.contains("outside"), "{outside}: {reply}");
    }
    // Another name for this address (DNS rebinding) must not read the token.
    let reply = raw_get_for(url, "/playground.json", "attacker.example").await;
    assert!(reply.starts_with("HTTP/1.1 403"), "{reply}");
    assert!(!reply.contains("dev-token"), "{reply}");
    assert!(raw_get(url, "/playground.json").await.contains("dev-token"));

    let (status, _, body) = get(&format!("{url}/missing.js")).await;
    assert_eq!((status, String::from_utf8(body).unwrap()), (404, "not found: /missing.js\n".to_owned()));
    server.stop();
}

#[tokio::test]
async fn an_unbuilt_package_is_a_clear_error() {
    let checkout = Checkout::new(false);
    let error = playground::start(&checkout.config(), "http://127.0.0.1:8079", "t").await.unwrap_err();
    assert!(error.contains("not built: run scripts/build-wasm"), "{error}");
    assert!(PlaygroundConfig::in_checkout(&checkout.0.join("www"), 0).is_none(), "no www/index.html, no playground");
}
