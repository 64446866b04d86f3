//! Everything the server sends during a check, with arrival times: the probe's evidence.

use serde_json::Value;
use staunch_client::protocol::mcp::ProgressToken;
use staunch_client::protocol::{ErrorObject, Message, RequestId};
use staunch_client::{Client, Observed};
use tokio::sync::mpsc;
use tokio::time::{Instant, timeout_at};

pub(crate) struct Watch {
    rx: mpsc::UnboundedReceiver<Observed>,
    pub seen: Vec<Observed>,
}

impl Watch {
    pub(crate) fn new(client: &Client) -> Self {
        Self {
            rx: client.tap(),
            seen: Vec::new(),
        }
    }

    /// Reads until `pred` holds for a message seen so far, or `deadline`; whether it held.
    pub(crate) async fn until(
        &mut self,
        deadline: Instant,
        pred: impl Fn(&[Observed]) -> bool,
    ) -> bool {
        loop {
            if pred(&self.seen) {
                return true;
            }
            match timeout_at(deadline, self.rx.recv()).await {
                Ok(Some(o)) => self.seen.push(o),
                _ => return pred(&self.seen),
            }
        }
    }

    /// Reads everything until `deadline`.
    pub(crate) async fn pump_until(&mut self, deadline: Instant) {
        let _ = self.until(deadline, |_| false).await;
    }

    /// `(arrival, progress)` of notifications carrying `token`.
    pub(crate) fn progress_for(&self, token: &ProgressToken) -> Vec<(Instant, f64)> {
        let want = serde_json::to_value(token).unwrap_or(Value::Null);
        progress_in(&self.seen, &want)
    }

    /// Every progress notification, whatever its token.
    pub(crate) fn all_progress(&self) -> Vec<Value> {
        self.seen
            .iter()
            .filter_map(|o| match &o.msg {
                Message::Notification(n) if n.method == "notifications/progress" => {
                    Some(n.params.clone().unwrap_or(Value::Null))
                }
                _ => None,
            })
            .collect()
    }

    /// The `data` of log messages a proxy sent after `since` about request `id` (logger
    /// `staunch.proxy`, `data.requestId`): its upstream went on with the cancelled work.
    pub(crate) fn proxy_reports(&self, since: Instant, id: &Value) -> Vec<Value> {
        self.seen
            .iter()
            .filter(|o| o.at > since)
            .filter_map(|o| match &o.msg {
                Message::Notification(n) if n.method == "notifications/message" => {
                    let p = n.params.as_ref()?;
                    (p["logger"] == "staunch.proxy" && p["data"]["requestId"] == *id)
                        .then(|| p["data"].clone())
                }
                _ => None,
            })
            .collect()
    }

    /// The response to `id`, with its arrival time.
    pub(crate) fn response_for(
        &self,
        id: &RequestId,
    ) -> Option<(Instant, Result<Value, ErrorObject>)> {
        self.seen.iter().find_map(|o| match &o.msg {
            Message::Response(r) if &r.id == id => Some((o.at, r.outcome.clone())),
            _ => None,
        })
    }
}

/// `(arrival, progress)` of the notifications in `seen` whose token is `want` (as JSON).
pub(crate) fn progress_in(seen: &[Observed], want: &Value) -> Vec<(Instant, f64)> {
    seen.iter()
        .filter_map(|o| match &o.msg {
            Message::Notification(n) if n.method == "notifications/progress" => {
                let p = n.params.as_ref()?;
                (p["progressToken"] == *want)
                    .then(|| (o.at, p["progress"].as_f64().unwrap_or(f64::NAN)))
            }
            _ => None,
        })
        .collect()
}

/// Whether `seen` holds the response to `id`.
pub(crate) fn has_response(seen: &[Observed], id: &RequestId) -> bool {
    seen.iter()
        .any(|o| matches!(&o.msg, Message::Response(r) if &r.id == id))
}

/// Milliseconds, one decimal, for evidence.
pub(crate) fn ms(d: std::time::Duration) -> String {
    let v = d.as_secs_f64() * 1000.0;
    if v < 10.0 {
        format!("{v:.1} ms")
    } else {
        format!("{v:.0} ms")
    }
}
