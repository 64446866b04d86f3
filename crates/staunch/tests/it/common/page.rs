//! Helpers of the live page's tests: raw HTTP exchanges (the page's access rules need exact
//! headers) and the headless browser.

use std::path::PathBuf;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One raw HTTP/1.1 exchange on the server's port: (status code, headers, body).
pub async fn raw(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> (u16, String, String) {
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Length: 0\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    // An SSE response never ends: read what arrives within a moment.
    let _ = tokio::time::timeout(Duration::from_secs(2), s.read_to_end(&mut out)).await;
    let text = String::from_utf8_lossy(&out).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (code, head.to_string(), body.to_string())
}

/// Node, playwright-core and Chromium, or `None` after saying why the browser test is skipped.
pub fn browser() -> Option<(PathBuf, PathBuf, PathBuf)> {
    let node = super::external::node()?;
    let driver = super::external::tool(
        "tests-external/browser/node_modules/playwright-core/package.json",
        "playwright-core",
    )?;
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    let chromium = PathBuf::from(chromium);
    if !chromium.exists() {
        if std::env::var("STAUNCH_REQUIRE_EXTERNAL").as_deref() == Ok("1") {
            panic!(
                "Chromium is missing at {} (apt-get install chromium)",
                chromium.display()
            );
        }
        eprintln!(
            "SKIPPED: Chromium not installed at {} (apt-get install chromium)",
            chromium.display()
        );
        return None;
    }
    let _ = driver;
    Some((
        node,
        super::external::root().join("tests-external/browser/live_page.mjs"),
        chromium,
    ))
}
