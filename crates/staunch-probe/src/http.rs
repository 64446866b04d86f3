//! Streamable HTTP checks with raw requests: drop a call's SSE stream and come back with
//! `Last-Event-ID` (spec: a disconnect is not a cancel; the server may replay), and the
//! session and Origin guards.

use std::time::Duration;

use serde_json::{Value, json};
use staunch_client::HttpEndpoint;
use staunch_client::protocol::{RequestId, parse_message, request_bytes, version};
use staunch_client::transport::http::{LAST_EVENT_ID, SESSION_HEADER, VERSION_HEADER};
use tokio::time::{Instant, timeout, timeout_at};

use super::watch::ms;
use super::{Check, Probe, Status};

const READ_LIMIT: Duration = Duration::from_secs(5);

fn session_headers(p: &Probe) -> Vec<(String, String)> {
    let mut h = vec![(
        VERSION_HEADER.to_string(),
        p.client.server().protocol_version.clone(),
    )];
    if let Some(s) = p.client.session_id() {
        h.push((SESSION_HEADER.to_string(), s));
    }
    h
}

fn refs(h: &[(String, String)]) -> Vec<(&str, &str)> {
    h.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
}

/// Whether an SSE data field is the response to `id`.
fn answers(data: &str, id: &RequestId) -> bool {
    matches!(parse_message(data.as_bytes()),
        Ok(staunch_client::protocol::Message::Response(r)) if &r.id == id)
}

fn progress_value(data: &str) -> Option<f64> {
    let v: Value = serde_json::from_str(data).ok()?;
    (v["method"] == "notifications/progress")
        .then(|| v["params"]["progress"].as_f64())
        .flatten()
}

pub(crate) async fn resume(p: &Probe) -> Check {
    const ID: &str = "http.resume";
    let Some(ep) = p.client.http_endpoint() else {
        return Check::new(ID, Status::Skip, "not HTTP", json!({}));
    };
    let v = &p.client.server().protocol_version;
    if p.era() == staunch_client::era::Era::Stateless {
        return Check::new(
            ID,
            Status::Skip,
            "2026-07-28 has no resumption: a closed stream is the cancel (see cancel.stream_close)",
            json!({}),
        );
    }
    if !version::at_least(v, "2025-11-25") {
        return Check::new(
            ID,
            Status::Skip,
            format!("negotiated {v}; priming events and polling are 2025-11-25"),
            json!({}),
        );
    }
    let steps = p.steps_for(Duration::from_millis(1000), 5, 100_000);
    let expected = p.step * steps as u32;
    let rid = RequestId::String(format!(
        "staunch-probe-resume-{}",
        &staunch_client::jobs::new_idempotency_key()[..8]
    ));
    let params = json!({"name": p.tool, "arguments": p.arguments(steps),
                        "_meta": {"progressToken": "staunch-probe-resume"}});
    let body = request_bytes(&rid, "tools/call", Some(&params));
    let headers = session_headers(p);
    let t0 = Instant::now();
    let resp = match timeout(READ_LIMIT, ep.post(body, &refs(&headers))).await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => return Check::new(ID, Status::Fail, format!("POST failed: {e}"), json!({})),
        Err(_) => {
            return Check::new(
                ID,
                Status::Fail,
                "POST got no headers within 5 s",
                json!({}),
            );
        }
    };
    if !(200..300).contains(&resp.status()) {
        let s = resp.status();
        let b = resp.text(500).await.unwrap_or_default();
        return Check::new(
            ID,
            Status::Fail,
            format!("POST tools/call → HTTP {s}: {b}"),
            json!({}),
        );
    }
    if !resp.is_sse() {
        return Check::new(
            ID,
            Status::Warn,
            "the call was answered as JSON: there is no stream to drop, and a connection lost \
             mid-call loses the result",
            json!({"content_type": resp.header("content-type")}),
        );
    }
    let mut sse = resp.into_sse();
    let mut first_id: Option<String> = None;
    let mut priming = false;
    let mut events = 0;
    let mut got_result_early = false;
    let mut ids_seen = false;
    let mut progress_before = None;
    let until = t0 + READ_LIMIT;
    while let Ok(Ok(Some(ev))) = timeout_at(until, sse.next_event()).await {
        events += 1;
        if events == 1 && ev.data.is_empty() && ev.id.is_some() {
            priming = true;
        }
        if let Some(v) = progress_value(&ev.data) {
            progress_before = Some(v);
        }
        if answers(&ev.data, &rid) {
            got_result_early = true;
            ids_seen |= ev.id.is_some();
            break;
        }
        if let Some(id) = ev.id {
            first_id = Some(id);
            break;
        }
    }
    let retry = sse.retry();
    let mut data = json!({
        "steps": steps, "expected_ms": expected.as_millis() as u64, "priming_event": priming,
        "retry_ms": retry.map(|d| d.as_millis() as u64), "events_before_drop": events,
    });
    if got_result_early && ids_seen {
        return Check::new(
            ID,
            Status::Warn,
            "the call finished before an event with an id arrived, so there was no moment to \
             drop the stream; try a longer call (--args)",
            data,
        );
    }
    let Some(last_id) = first_id else {
        let why = if got_result_early {
            "the result came on a stream whose events carry no id"
        } else {
            "no SSE event carried an id"
        };
        return Check::new(
            ID,
            Status::Fail,
            format!(
                "{why}: a stream dropped mid-call cannot be resumed (no Last-Event-ID), so the \
                 result is lost"
            ),
            data,
        );
    };
    // Drop the connection the way a proxy timeout would, then stay away until the call
    // must have finished.
    sse.drop_connection();
    drop(sse);
    let t_drop = Instant::now();
    let back =
        (t0 + expected * 3 / 2 + Duration::from_millis(500)).min(t0 + Duration::from_secs(10));
    tokio::time::sleep_until(back.max(t_drop)).await;
    let mut h = headers.clone();
    h.push((LAST_EVENT_ID.to_string(), last_id.clone()));
    data["last_event_id"] = json!(last_id);
    data["away_ms"] = json!(Instant::now().saturating_duration_since(t_drop).as_millis() as u64);
    let got = match timeout(READ_LIMIT, ep.get(&refs(&h))).await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => return Check::new(ID, Status::Fail, format!("GET failed: {e}"), data),
        Err(_) => return Check::new(ID, Status::Fail, "GET got no headers within 5 s", data),
    };
    let status = got.status();
    data["get_status"] = json!(status);
    if !(200..300).contains(&status) || !got.is_sse() {
        let b = got.text(300).await.unwrap_or_default();
        return Check::new(
            ID,
            Status::Fail,
            format!(
                "GET with Last-Event-ID {last_id} → HTTP {status}{}: the result of a call whose \
                 stream dropped is lost",
                if b.is_empty() {
                    String::new()
                } else {
                    format!(" ({b})")
                }
            ),
            data,
        );
    }
    let mut replay = got.into_sse();
    let mut replayed = 0;
    let mut last_progress = None;
    let mut result = None;
    let until = Instant::now() + READ_LIMIT;
    while let Ok(Ok(Some(ev))) = timeout_at(until, replay.next_event()).await {
        if ev.data.is_empty() {
            continue;
        }
        replayed += 1;
        if let Some(v) = progress_value(&ev.data) {
            last_progress = Some(v);
        }
        if answers(&ev.data, &rid) {
            result = Some(ev.data);
            break;
        }
    }
    data["replayed_events"] = json!(replayed);
    data["progress_before_drop"] = json!(progress_before);
    data["progress_replayed_to"] = json!(last_progress);
    let continued = match (progress_before, last_progress) {
        (Some(a), Some(b)) => format!("progress went on from {a} to {b} while away"),
        (None, Some(b)) => format!("progress reached {b} while away"),
        _ => "the work went on while away".to_string(),
    };
    match result {
        Some(r) => {
            let is_error = r.contains("\"isError\":true") || r.contains("\"error\"");
            data["result"] = serde_json::from_str(&r).unwrap_or(Value::Null);
            Check::new(
                ID,
                if is_error { Status::Warn } else { Status::Pass },
                format!(
                    "dropped after event {last_id}, came back {} later: {continued}, and the \
                     result was replayed ({replayed} events){}",
                    ms(Instant::now().saturating_duration_since(t_drop)),
                    if priming { "; priming event sent" } else { "" }
                ),
                data,
            )
        }
        None => Check::new(
            ID,
            Status::Fail,
            format!(
                "resumed from {last_id} but the result never came ({replayed} events in {}): lost",
                ms(READ_LIMIT)
            ),
            data,
        ),
    }
}

/// Session and Origin guards.
pub(crate) async fn guards(p: &Probe) -> Vec<Check> {
    let Some(ep) = p.client.http_endpoint() else {
        return Vec::new();
    };
    let v = p.client.server().protocol_version.clone();
    if p.era() == staunch_client::era::Era::Stateless {
        return stateless_guards(ep, &v).await;
    }
    let list = request_bytes(
        &RequestId::String("staunch-probe-guard".into()),
        "tools/list",
        Some(&json!({})),
    );
    let unknown = format!(
        "staunch-probe-{}",
        staunch_client::jobs::new_idempotency_key()
    );
    let mut out = Vec::new();

    if p.client.session_id().is_some() {
        let r = send(
            ep,
            list.clone(),
            &[(VERSION_HEADER, &v), (SESSION_HEADER, &unknown)],
        )
        .await;
        out.push(judge(
            "http.unknown_session",
            r,
            404,
            "an unknown session id",
            "MUST",
        ));
    } else {
        // A server that never issues session ids has none to expire: nothing to judge.
        out.push(Check::new(
            "http.unknown_session",
            Status::Skip,
            "the server issued no session id (stateless)",
            json!({}),
        ));
    }

    if p.client.session_id().is_some() {
        let r = send(ep, list, &[(VERSION_HEADER, &v)]).await;
        out.push(judge(
            "http.missing_session",
            r,
            400,
            "a request without a session id",
            "SHOULD",
        ));
    } else {
        out.push(Check::new(
            "http.missing_session",
            Status::Skip,
            "the server issued no session id (stateless)",
            json!({}),
        ));
    }

    let init = request_bytes(
        &RequestId::String("staunch-probe-origin".into()),
        "initialize",
        Some(&json!({"protocolVersion": v, "capabilities": {},
                     "clientInfo": {"name": "staunch-probe", "version": "0"}})),
    );
    let r = send(ep, init, &[("origin", "http://evil.example.com")]).await;
    if let Ok((status, _, Some(sid))) = &r
        && (200..300).contains(status)
    {
        let _ = timeout(READ_LIMIT, ep.delete(&[(SESSION_HEADER, sid)])).await;
    }
    out.push(judge("http.bad_origin", r, 403, "a foreign Origin", "MUST"));
    out
}

/// 2026-07-28: no sessions to guard; the Origin check with a well-formed stateless request.
async fn stateless_guards(ep: &HttpEndpoint, v: &str) -> Vec<Check> {
    let skip =
        |id: &'static str| Check::new(id, Status::Skip, "2026-07-28 has no sessions", json!({}));
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": v,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "staunch-probe", "version": "0"},
    });
    let discover = request_bytes(
        &RequestId::String("staunch-probe-origin".into()),
        staunch_client::DISCOVER,
        Some(&json!({"_meta": meta})),
    );
    let r = send(
        ep,
        discover,
        &[
            (VERSION_HEADER, v),
            ("mcp-method", staunch_client::DISCOVER),
            ("origin", "http://evil.example.com"),
        ],
    )
    .await;
    vec![
        skip("http.unknown_session"),
        skip("http.missing_session"),
        judge("http.bad_origin", r, 403, "a foreign Origin", "MUST"),
    ]
}

type Sent = Result<(u16, String, Option<String>), String>;

async fn send(ep: &HttpEndpoint, body: Vec<u8>, headers: &[(&str, &str)]) -> Sent {
    let r = timeout(READ_LIMIT, ep.post(body, headers))
        .await
        .map_err(|_| "no answer within 5 s".to_string())?
        .map_err(|e| e.to_string())?;
    let status = r.status();
    let sid = r.header(SESSION_HEADER).map(str::to_string);
    // Enough of the body for the evidence; an SSE answer is not read to its end.
    let body = if r.is_sse() {
        String::from("(SSE stream)")
    } else {
        timeout(READ_LIMIT, r.text(300))
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default()
    };
    Ok((status, body, sid))
}

fn judge(id: &'static str, r: Sent, want: u16, what: &str, strength: &str) -> Check {
    match r {
        Err(e) => Check::new(id, Status::Fail, format!("{what}: {e}"), json!({})),
        Ok((status, body, _)) => {
            let data = json!({"status": status, "expected": want, "body": body});
            let body = body.trim();
            let tail = if body.is_empty() {
                String::new()
            } else {
                format!(": {body}")
            };
            if status == want {
                Check::new(id, Status::Pass, format!("{what} → {status}{tail}"), data)
            } else if (400..500).contains(&status) {
                Check::new(
                    id,
                    Status::Warn,
                    format!("{what} → {status}, the spec says {want} ({strength}){tail}"),
                    data,
                )
            } else {
                Check::new(
                    id,
                    Status::Fail,
                    format!("{what} → {status}, accepted; the spec says {want} ({strength}){tail}"),
                    data,
                )
            }
        }
    }
}
