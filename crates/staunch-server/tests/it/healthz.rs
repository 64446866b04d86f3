//! `GET /healthz` of a server on a real PostgreSQL server reached through a loopback forwarder
//! the test can cut: 200 while the store answers, 503 "store unreachable" while it cannot be
//! reached, 200 again once it can.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::Value;
use staunch_testkit::auth::get_path;
use staunch_testkit::pg::{drop_schema_async, fresh_schema};
use staunch_testkit::{Endpoint, TestServer};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

/// Forwards loopback connections to PostgreSQL while `open`; when closed, drops every
/// connection it carries and refuses new ones (they are accepted and closed at once).
struct Forwarder {
    port: u16,
    open: Arc<AtomicBool>,
    cut: Arc<tokio::sync::Notify>,
}

impl Forwarder {
    async fn start(target: (String, u16)) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let open = Arc::new(AtomicBool::new(true));
        let cut = Arc::new(tokio::sync::Notify::new());
        let (o, c) = (open.clone(), cut.clone());
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                if !o.load(Ordering::SeqCst) {
                    continue; // dropped: closed at once
                }
                let (target, c) = (target.clone(), c.clone());
                tokio::spawn(async move {
                    let Ok(mut outbound) = TcpStream::connect((target.0.as_str(), target.1)).await
                    else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = c.notified() => {}
                    }
                });
            }
        });
        Self { port, open, cut }
    }

    fn set_open(&self, open: bool) {
        self.open.store(open, Ordering::SeqCst);
        if !open {
            self.cut.notify_waiters();
        }
    }
}

async fn health(s: &Endpoint) -> (u16, Value) {
    get_path(s.port, "/healthz").await
}

async fn health_until(s: &Endpoint, want: u16) -> Value {
    let end = Instant::now() + Duration::from_secs(20);
    loop {
        let (code, body) = health(s).await;
        if code == want {
            return body;
        }
        assert!(
            Instant::now() < end,
            "/healthz never answered {want}; last {code} {body}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn healthz_says_when_the_store_is_unreachable_and_when_it_is_back() {
    let Some((url, schema)) = fresh_schema("healthz on PostgreSQL") else {
        return;
    };
    // postgres://user@host:port/db → the same through the forwarder.
    let rest = url.split_once("://").unwrap().1;
    let (auth_host, db) = rest.split_once('/').unwrap();
    let (user, hostport) = auth_host.rsplit_once('@').unwrap();
    let (host, port) = hostport.rsplit_once(':').unwrap_or((hostport, "5432"));
    let fwd = Forwarder::start((host.to_string(), port.parse().unwrap())).await;
    let via = format!("postgres://{user}@127.0.0.1:{}/{db}", fwd.port);
    let s = TestServer::setup()
        .store(&via)
        .schema(&schema)
        .start()
        .await;

    assert_eq!(health(&s).await, (200, serde_json::json!({"status": "ok"})));
    fwd.set_open(false);
    let down = health_until(&s, 503).await;
    assert_eq!(down["status"], "unavailable", "{down}");
    assert_eq!(down["reason"], "store unreachable", "{down}");
    // The reason is logged (it may name the database host), not shown.
    assert!(!down.to_string().contains("127.0.0.1"), "{down}");
    fwd.set_open(true);
    health_until(&s, 200).await;
    drop(s);
    drop_schema_async(&url, &schema).await;
}
