//! [`Origin`] against a real HTTP/1.1 server on loopback that counts its connections and
//! requests: connections are reused once a body has ended, closed when one is dropped before,
//! replaced when the server closed them, and a request that was written is never sent again.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame, Incoming};
use hyper::header::HOST;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use staunch_net::{Origin, error_chain};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

/// What the test server has seen.
#[derive(Default)]
struct Seen {
    connections: AtomicUsize,
    requests: AtomicUsize,
}

/// A response body that sends one frame and then nothing, saying when it is dropped (which
/// the server does when the client closes the connection).
struct Endless {
    sent: bool,
    dropped: mpsc::UnboundedSender<()>,
}

impl Body for Endless {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.sent {
            return Poll::Pending;
        }
        self.sent = true;
        Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"first")))))
    }
}

impl Drop for Endless {
    fn drop(&mut self) {
        let _ = self.dropped.send(());
    }
}

type Reply = http_body_util::combinators::BoxBody<Bytes, Infallible>;

/// Serves on loopback: `/ok` answers "ok", `/empty` 202 with no body, `/endless` a body that
/// never ends, `/close` answers and closes the connection, `/hang-up` closes it unanswered.
async fn server() -> (String, Arc<Seen>, mpsc::UnboundedReceiver<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let seen = Arc::new(Seen::default());
    let (dropped, dropped_rx) = mpsc::unbounded_channel();
    let counts = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            counts.connections.fetch_add(1, Ordering::SeqCst);
            let (counts, dropped) = (counts.clone(), dropped.clone());
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                    counts.requests.fetch_add(1, Ordering::SeqCst);
                    let dropped = dropped.clone();
                    async move {
                        let ok =
                            |text: &'static str| Full::new(Bytes::from_static(text.as_bytes()));
                        let resp: Response<Reply> = match req.uri().path() {
                            "/empty" => Response::builder()
                                .status(202)
                                .body(ok("").boxed())
                                .unwrap(),
                            "/endless" => Response::new(
                                Endless {
                                    sent: false,
                                    dropped,
                                }
                                .boxed(),
                            ),
                            "/close" => Response::builder()
                                .header("connection", "close")
                                .body(ok("bye").boxed())
                                .unwrap(),
                            "/hang-up" => return Err("hung up"),
                            _ => Response::new(ok("ok").boxed()),
                        };
                        Ok::<_, &str>(resp)
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (url, seen, dropped_rx)
}

fn request(url: &str, path: &'static str) -> Request<Full<Bytes>> {
    let host = url.trim_start_matches("http://").split('/').next().unwrap();
    Request::builder()
        .uri(path)
        .header(HOST, host)
        .body(Full::new(Bytes::new()))
        .unwrap()
}

async fn text(origin: &Origin, url: &str, path: &'static str) -> String {
    let resp = origin.send(request(url, path)).await.unwrap();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8(body.to_vec()).unwrap()
}

fn origin(url: &str) -> Origin {
    Origin::new(&url.parse().unwrap())
}

#[tokio::test]
async fn requests_one_after_another_share_one_connection() {
    let (url, seen, _) = server().await;
    let origin = origin(&url);
    for _ in 0..3 {
        assert_eq!(text(&origin, &url, "/ok").await, "ok");
    }
    assert_eq!(seen.connections.load(Ordering::SeqCst), 1);
    assert_eq!(seen.requests.load(Ordering::SeqCst), 3);
    assert_eq!(origin.idle(), 1);
}

#[tokio::test]
async fn requests_at_once_get_connections_of_their_own_which_are_then_kept() {
    let (url, seen, _) = server().await;
    let origin = origin(&url);
    let first = origin.send(request(&url, "/ok")).await.unwrap();
    let second = origin.send(request(&url, "/ok")).await.unwrap();
    assert_eq!(seen.connections.load(Ordering::SeqCst), 2);
    assert_eq!(origin.idle(), 0, "both bodies are unread");
    first.into_body().collect().await.unwrap();
    second.into_body().collect().await.unwrap();
    assert_eq!(origin.idle(), 2);
    assert_eq!(text(&origin, &url, "/ok").await, "ok");
    assert_eq!(seen.connections.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_response_without_a_body_gives_its_connection_back_unread() {
    let (url, seen, _) = server().await;
    let origin = origin(&url);
    let resp = origin.send(request(&url, "/empty")).await.unwrap();
    assert_eq!(resp.status(), 202);
    assert_eq!(
        origin.idle(),
        1,
        "nothing to read, so nothing holds the connection"
    );
    drop(resp);
    assert_eq!(text(&origin, &url, "/ok").await, "ok");
    assert_eq!(seen.connections.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_body_dropped_before_its_end_closes_its_connection() {
    let (url, seen, mut dropped) = server().await;
    let origin = origin(&url);
    let resp = origin.send(request(&url, "/endless")).await.unwrap();
    let mut body = resp.into_body();
    let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
    assert_eq!(first, "first");
    drop(body);
    // The server sees the connection close: that is how a 2026-07-28 server learns of a cancel.
    tokio::time::timeout(Duration::from_secs(5), dropped.recv())
        .await
        .expect("the server never saw the connection close")
        .unwrap();
    assert_eq!(text(&origin, &url, "/ok").await, "ok");
    assert_eq!(seen.connections.load(Ordering::SeqCst), 2);
}

/// The same while its reader waits for the next frame (a request given up on: its task is
/// dropped mid-read): the next request is answered at once, on another connection, however
/// long the dropped one's connection task takes to see the drop.
#[tokio::test]
async fn a_request_does_not_wait_on_a_connection_whose_body_was_dropped_mid_read() {
    let (url, _seen, _dropped) = server().await;
    let origin = origin(&url);
    let resp = origin.send(request(&url, "/endless")).await.unwrap();
    let reader = tokio::spawn(async move {
        let mut body = resp.into_body();
        while body.frame().await.is_some() {}
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    reader.abort();
    let _ = reader.await;
    let next = tokio::time::timeout(Duration::from_secs(5), text(&origin, &url, "/ok")).await;
    assert_eq!(
        next.expect("the next request waited on the dropped body's connection"),
        "ok"
    );
}

#[tokio::test]
async fn a_body_dropped_after_its_end_on_the_wire_keeps_its_connection() {
    let (url, seen, _) = server().await;
    let origin = origin(&url);
    let resp = origin.send(request(&url, "/ok")).await.unwrap();
    // The two bytes are on the wire; give hyper's connection task a moment to read them.
    tokio::time::sleep(Duration::from_millis(50)).await;
    drop(resp);
    assert_eq!(text(&origin, &url, "/ok").await, "ok");
    assert_eq!(seen.connections.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_connection_the_server_closed_is_replaced_not_used() {
    let (url, seen, _) = server().await;
    let origin = origin(&url);
    assert_eq!(text(&origin, &url, "/close").await, "bye");
    // However the close and the next checkout interleave, the request is answered.
    assert_eq!(text(&origin, &url, "/ok").await, "ok");
    assert_eq!(seen.connections.load(Ordering::SeqCst), 2);
    assert_eq!(seen.requests.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_request_the_server_received_is_never_sent_again() {
    let (url, seen, _) = server().await;
    let origin = origin(&url);
    assert_eq!(text(&origin, &url, "/ok").await, "ok");
    // On the reused connection the server reads the request and hangs up without an answer:
    // the request may have taken effect, so it fails instead of going out again.
    let e = origin.send(request(&url, "/hang-up")).await.unwrap_err();
    assert!(matches!(e, staunch_net::OriginError::Exchange(_)), "{e:?}");
    assert_eq!(seen.requests.load(Ordering::SeqCst), 2);
    assert_eq!(seen.connections.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn nothing_listening_is_said_in_words() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    drop(listener);
    let e = origin(&url).send(request(&url, "/ok")).await.unwrap_err();
    assert!(matches!(e, staunch_net::OriginError::Connect(_)), "{e:?}");
    assert!(
        error_chain(&e).contains("connection refused"),
        "{}",
        error_chain(&e)
    );
}
