//! The stop policy's end of a call's own upstream process (`kill_after_cancel`): after an
//! answer, the ordinary shutdown; after a cancel, the grace and then the process group killed,
//! counted, put on the ledger and told to the client whose call it was.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use staunch_server::{Context, LifecycleEvent, Metrics};

use crate::ledger::Ledger;
use crate::pool::Pool;
use crate::upstream::Upstream;

/// Where a pool's stopped processes are counted and listed, owned, so a process can be ended
/// later than the call that holds the pool (a parked call its client never answered).
pub(crate) struct Stopper {
    metrics: Metrics,
    ledger: Arc<Ledger>,
}

impl Stopper {
    /// `pool`'s metrics and ledger.
    pub(crate) fn of(pool: &Pool) -> Self {
        Self {
            metrics: pool.metrics().clone(),
            ledger: pool.ledger().clone(),
        }
    }
}

/// Ends the process that served one call under the stop policy, off the call's path: the
/// ordinary shutdown after an answer; after a cancel, `grace` to exit and then its group
/// killed — counted, and logged on the call's request (`upstream.stopped`).
pub(crate) fn end_own_process(
    Stopper { metrics, ledger }: Stopper,
    up: Arc<Upstream>,
    tool: &str,
    ctx: Option<Context>,
    grace: Duration,
    cancelled: bool,
) {
    let tool = tool.to_string();
    let cancelled_at = std::time::Instant::now();
    tokio::spawn(async move {
        if !cancelled {
            up.shut_down().await;
            return;
        }
        let Some(killed) = up.stop_after_cancel(grace).await else {
            return;
        };
        metrics.upstream_stopped(up.name(), &tool, killed);
        if killed {
            tracing::warn!(upstream = %up.name(), tool = %tool, grace_ms = grace.as_millis() as u64,
                "upstream.stopped: still running after the cancelled call's grace; its process group was killed");
        }
        if let Some(ctx) = ctx {
            let request_id = ctx.request_id().to_string();
            let key = crate::ledger::CallKey {
                upstream: up.name(),
                tool: &tool,
                session: ctx.session_id(),
                request_id: &request_id,
            };
            ledger.stopped(key, cancelled_at, killed);
            if killed {
                ctx.log_to_session(
                    staunch_protocol::mcp::LoggingLevel::Warning,
                    crate::route::LATE_LOGGER,
                    json!({
                        "message": format!(
                            "the upstream server {:?} was still running cancelled request {} \
                             (tool {tool}) {} ms after the cancel: its process was killed",
                            up.name(),
                            request_id,
                            grace.as_millis()
                        ),
                        "upstream": up.name(),
                        "tool": &tool,
                        "requestId": ctx.request_id(),
                        "stopped": "killed",
                        "graceMs": u64::try_from(grace.as_millis()).unwrap_or(u64::MAX),
                    }),
                );
            }
            ctx.log_event(&LifecycleEvent::UpstreamStopped {
                upstream: up.name().into(),
                grace_ms: u64::try_from(grace.as_millis()).unwrap_or(u64::MAX),
                killed,
            });
        }
    });
}
