//! HTTP resume: POST a slow call, read the first SSE event that has an id, drop the
//! connection, then come back with `GET` + `Last-Event-ID` — either after the call finished
//! ("finished while away") or at once ("reconnect while it runs"). Counts the GETs needed to
//! get the result (each GET that ends without it is followed by another from the last id
//! seen, up to a bound), and progress values seen twice or never.

use std::collections::BTreeSet;
use std::time::Duration;

use http_body_util::BodyExt;
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::http::{Conn, Session};
use crate::rpc;
use crate::sse::SseParser;

const MAX_GETS: usize = 10;

#[derive(Debug, Default)]
pub struct ResumeStats {
    /// The result arrived.
    pub delivered: bool,
    pub gets: usize,
    /// Progress values received more than once, and steps never seen.
    pub duplicates: usize,
    pub gaps: usize,
    /// Why it could not resume, when it could not.
    pub why: Option<String>,
}

/// `wait`: how long the client stays away (0 = reconnect at once).
pub async fn run(
    port: u16,
    steps: u32,
    delay_ms: u64,
    wait: Duration,
) -> anyhow::Result<ResumeStats> {
    let mut out = ResumeStats::default();
    let mut control = Conn::open(port).await?;
    let session = Session::open(port, &mut control).await?;
    let id = 1_000_001u64;
    let msg = rpc::tool_call(
        id,
        "slow_count",
        json!({"steps": steps, "delay_ms": delay_ms}),
        true,
    );
    let mut seen: Vec<f64> = Vec::new();

    // POST, read up to the first event with an id, then drop the connection.
    let mut last_id: Option<String> = None;
    {
        let mut conn = Conn::open(port).await?;
        let resp = conn.send(session.post(&msg)).await?;
        let is_sse = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if !is_sse {
            out.why = Some("answered as JSON: nothing to resume".into());
            return Ok(out);
        }
        let mut body = resp.into_body();
        let mut p = SseParser::default();
        let until = Instant::now() + Duration::from_secs(5);
        // The first event decides: with an id the client can come back; without one it
        // cannot (the client goes away all the same).
        let first = tokio::time::timeout_at(until, async {
            while let Some(Ok(frame)) = body.frame().await {
                if let Ok(chunk) = frame.into_data() {
                    p.push(&chunk);
                }
                if let Some(e) = p.drain().next() {
                    return Some(e);
                }
            }
            None
        })
        .await;
        if let Ok(Some(e)) = first {
            note(&e.data, id, &mut seen, &mut out);
            last_id = e.id;
        }
        // `conn` and `body` drop here: the client went away.
    }
    if out.delivered {
        out.why = Some("the result came before any event id".into());
        return Ok(out);
    }
    let Some(mut last) = last_id else {
        out.why = Some("first SSE event has no id: cannot resume".into());
        return Ok(out);
    };
    tokio::time::sleep(wait).await;

    let deadline = Instant::now()
        + Duration::from_secs(3)
        + Duration::from_millis(u64::from(steps) * delay_ms);
    while out.gets < MAX_GETS && !out.delivered && Instant::now() < deadline {
        out.gets += 1;
        let mut conn = Conn::open(port).await?;
        let resp = match conn.send(session.resume(&last)).await {
            Ok(r) => r,
            Err(e) => {
                out.why = Some(format!("GET failed: {e}"));
                break;
            }
        };
        if !resp.status().is_success() {
            out.why = Some(format!("GET answered HTTP {}", resp.status()));
            break;
        }
        let mut body = resp.into_body();
        let mut p = SseParser::default();
        while let Ok(Some(Ok(frame))) = tokio::time::timeout_at(deadline, body.frame()).await {
            let Ok(chunk) = frame.into_data() else {
                continue;
            };
            p.push(&chunk);
            for e in p.drain() {
                note(&e.data, id, &mut seen, &mut out);
                if let Some(i) = e.id {
                    last = i;
                }
            }
            if out.delivered {
                break;
            }
        }
    }
    let distinct: BTreeSet<u64> = seen.iter().map(|v| *v as u64).collect();
    out.duplicates = seen.len() - distinct.len();
    if out.delivered {
        out.gaps = (1..=u64::from(steps))
            .filter(|s| !distinct.contains(s))
            .count();
    }
    if !out.delivered && out.why.is_none() {
        out.why = Some(format!("no result after {} GET(s)", out.gets));
    }
    Ok(out)
}

fn note(data: &str, id: u64, seen: &mut Vec<f64>, out: &mut ResumeStats) {
    let Ok(msg) = serde_json::from_str::<Value>(data) else {
        return;
    };
    match rpc::classify(msg, Instant::now()) {
        Some((i, rpc::Event::Progress { value, .. })) if i == id => seen.push(value),
        Some((i, rpc::Event::Response { .. })) if i == id => out.delivered = true,
        _ => {}
    }
}
