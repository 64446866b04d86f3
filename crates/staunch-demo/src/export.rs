//! `export_report {pages, delay_ms}`: the seed article's export, done right.
//!
//! Each page is fetched from a simulated source through `Context::run` (so a cancel drops the
//! in-flight fetch) after a cancel check; on cancel, compensation runs in `Context::cleanup`,
//! shielded and bounded: the partial export is removed and the abort recorded.
//! `export_status` shows the record, so the compensation can be seen from outside.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use staunch_server::{CallToolResult, Context, ServerBuilder, ToolError, ToolSpec};

use crate::no_args::NoArgs;

#[derive(Deserialize, JsonSchema)]
struct ExportArgs {
    /// Pages to export.
    pages: u32,
    /// Milliseconds each page takes to fetch.
    #[serde(default = "default_delay")]
    delay_ms: u64,
}

fn default_delay() -> u64 {
    50
}

/// What happened to each export, newest last.
#[derive(Default)]
struct Ledger(Mutex<Vec<String>>);

impl Ledger {
    fn record(&self, line: String) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push(line);
    }
    fn lines(&self) -> Vec<String> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

pub(crate) fn register(b: ServerBuilder) -> ServerBuilder {
    let ledger = Arc::new(Ledger::default());
    let for_status = ledger.clone();
    b.tool(
        ToolSpec::streaming(
            "export_report",
            "Exports a report page by page with progress. If cancelled, the partial export is \
             removed and the abort recorded (see export_status).",
        ),
        move |ctx, a: ExportArgs| export(ctx, a, ledger.clone()),
    )
    .tool(
        ToolSpec::quick(
            "export_status",
            "Lists what happened to each export_report call.",
        )
        .annotations(serde_json::json!({"readOnlyHint": true})),
        move |_ctx, _a: NoArgs| {
            let lines = for_status.lines();
            async move {
                Ok(CallToolResult::structured(
                    serde_json::json!({ "exports": lines }),
                ))
            }
        },
    )
}

async fn fetch_page(page: u32, delay: Duration) -> Vec<String> {
    tokio::time::sleep(delay).await;
    (0..10).map(|r| format!("page {page} row {r}")).collect()
}

async fn export(
    ctx: Context,
    a: ExportArgs,
    ledger: Arc<Ledger>,
) -> Result<CallToolResult, ToolError> {
    let id = format!("export-{}", ctx.request_id());
    let mut rows = 0usize;
    for page in 0..a.pages {
        let fetched = match ctx.check() {
            Ok(()) => {
                ctx.run(fetch_page(page, Duration::from_millis(a.delay_ms)))
                    .await
            }
            Err(e) => Err(e),
        };
        let fetched = match fetched {
            Ok(f) => f,
            Err(e) => {
                let ledger = ledger.clone();
                let id = id.clone();
                ctx.cleanup(Duration::from_secs(5), async move {
                    // The compensation: remove the partial output, record why.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    ledger.record(format!(
                        "{id}: aborted after {page} pages; partial output removed"
                    ));
                });
                return Err(e);
            }
        };
        rows += fetched.len();
        ctx.progress(
            f64::from(page + 1),
            Some(f64::from(a.pages)),
            Some(format!("exported page {} of {}", page + 1, a.pages)),
        );
    }
    ledger.record(format!("{id}: complete, {} pages, {rows} rows", a.pages));
    Ok(CallToolResult::text(format!(
        "exported {} pages ({rows} rows)",
        a.pages
    )))
}
