//! Counting tools that take time: one cooperative, one stubborn, one blocking.
//!
//! - `slow_count` (streaming) checks its cancel before each step, sleeps through
//!   `Context::sleep` (dropped on cancel) and reports progress per step.
//! - `stubborn_count` (quick) never looks at its cancel: the runtime stops its progress at the
//!   cancel and aborts it after the grace period.
//! - `cpu_count` (quick) burns CPU in `Context::blocking`, checking between units.
//! - `slow_count_status {tag?}` reads what slow_count and stubborn_count did: each step of a tagged count is a
//!   side effect recorded here (steps so far, time of the last one), so a client that closed
//!   a stream can ask later whether the work really stopped. `staunch probe` and the peers in
//!   `benches/peers` share this convention.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use schemars::JsonSchema;
use serde::Deserialize;
use staunch_server::{CallToolResult, Context, ServerBuilder, ToolError, ToolSpec};

#[derive(Deserialize, JsonSchema)]
struct CountArgs {
    /// How many steps to count.
    steps: u32,
    /// Milliseconds per step.
    #[serde(default = "default_delay")]
    delay_ms: u64,
    /// Names this count so `slow_count_status` can report its steps (a side effect to watch).
    #[serde(default)]
    tag: Option<String>,
}

fn default_delay() -> u64 {
    100
}

#[derive(Deserialize, JsonSchema)]
struct StatusArgs {
    /// The tag a count was started with; absent reads the untagged counter.
    #[serde(default)]
    tag: Option<String>,
}

/// Steps done per tag: the side-effect record `slow_count_status` reads.
#[derive(Clone, Default)]
struct Steps(Arc<Mutex<HashMap<String, (u64, u64)>>>);

impl Steps {
    fn record(&self, tag: Option<&str>) {
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let entry = map.entry(tag.unwrap_or_default().to_owned()).or_default();
        entry.0 += 1;
        entry.1 = now_ms;
    }

    fn read(&self, tag: Option<&str>) -> (u64, u64) {
        let map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        map.get(tag.unwrap_or_default())
            .copied()
            .unwrap_or_default()
    }
}

pub(crate) fn register(b: ServerBuilder) -> ServerBuilder {
    let steps = Steps::default();
    let counted = steps.clone();
    let stubborn = steps.clone();
    b.tool(
        ToolSpec::streaming(
            "slow_count",
            "Counts to `steps`, waiting `delay_ms` per step and reporting progress. Stops \
             promptly when cancelled.",
        )
        .annotations(serde_json::json!({"readOnlyHint": true})),
        move |ctx, a: CountArgs| slow_count(ctx, a, counted.clone()),
    )
    .tool(
        ToolSpec::quick(
            "slow_count_status",
            "How many steps `slow_count` (or `stubborn_count`) calls with this `tag` have done, \
             and when the last one happened (unix ms): whether work continued after a cancel.",
        )
        .annotations(serde_json::json!({"readOnlyHint": true})),
        move |_ctx, a: StatusArgs| {
            let steps = steps.clone();
            async move {
                let (done, last) = steps.read(a.tag.as_deref());
                let status = serde_json::json!({
                    "tag": a.tag.unwrap_or_default(),
                    "steps": done,
                    "last_step_unix_ms": last,
                });
                Ok::<_, ToolError>(CallToolResult::structured(status))
            }
        },
    )
    .tool(
        ToolSpec::quick(
            "stubborn_count",
            "Like slow_count but ignores cancellation on purpose (a demonstration of the \
             runtime aborting a handler after the grace period).",
        )
        .annotations(serde_json::json!({"readOnlyHint": true})),
        move |ctx, a: CountArgs| stubborn_count(ctx, a, stubborn.clone()),
    )
    .tool(
        ToolSpec::quick(
            "cpu_count",
            "Busy-counts on a blocking thread for `steps` units of `delay_ms` each, checking \
             for cancellation between units.",
        )
        .annotations(serde_json::json!({"readOnlyHint": true})),
        |ctx, a: CountArgs| cpu_count(ctx, a),
    )
}

async fn slow_count(ctx: Context, a: CountArgs, steps: Steps) -> Result<CallToolResult, ToolError> {
    let total = f64::from(a.steps);
    for step in 1..=a.steps {
        ctx.check()?;
        ctx.sleep(Duration::from_millis(a.delay_ms)).await?;
        steps.record(a.tag.as_deref());
        ctx.progress(f64::from(step), Some(total), None);
    }
    Ok(CallToolResult::text(format!("counted {}", a.steps)))
}

async fn stubborn_count(
    ctx: Context,
    a: CountArgs,
    steps: Steps,
) -> Result<CallToolResult, ToolError> {
    let total = f64::from(a.steps);
    for step in 1..=a.steps {
        // Deliberately not ctx.sleep / ctx.check: this handler does not listen.
        tokio::time::sleep(Duration::from_millis(a.delay_ms)).await;
        steps.record(a.tag.as_deref());
        ctx.progress(f64::from(step), Some(total), None);
    }
    Ok(CallToolResult::text(format!("counted {}", a.steps)))
}

async fn cpu_count(ctx: Context, a: CountArgs) -> Result<CallToolResult, ToolError> {
    let progress = ctx.clone();
    let done = ctx
        .blocking(move |unit| {
            for step in 1..=a.steps {
                unit.check()?;
                let until = Instant::now() + Duration::from_millis(a.delay_ms);
                let mut spins: u64 = 0;
                while Instant::now() < until {
                    spins = std::hint::black_box(spins.wrapping_add(1));
                }
                progress.progress(f64::from(step), Some(f64::from(a.steps)), None);
            }
            Ok(a.steps)
        })
        .await?;
    Ok(CallToolResult::text(format!("counted {done}")))
}

#[derive(Deserialize, JsonSchema)]
struct FloodArgs {
    /// How many progress reports to make, back to back.
    reports: u32,
}

/// `progress_flood {reports}`: reports progress as fast as it can, to show the rate limit:
/// the wire carries a burst then the configured rate, and the last value exactly.
pub(crate) fn register_flood(b: ServerBuilder) -> ServerBuilder {
    b.tool(
        ToolSpec::streaming(
            "progress_flood",
            "Reports progress `reports` times as fast as possible (a rate-limit demonstration).",
        )
        .annotations(serde_json::json!({"readOnlyHint": true})),
        |ctx: Context, a: FloodArgs| async move {
            let total = f64::from(a.reports);
            for i in 1..=a.reports {
                ctx.progress(f64::from(i), Some(total), None);
                if i % 1024 == 0 {
                    // Yield now and then so a cancel can be observed.
                    tokio::task::yield_now().await;
                    ctx.check()?;
                }
            }
            Ok(CallToolResult::text(format!("reported {}", a.reports)))
        },
    )
}
