//! `staunch serve`: builds the server from flags and runs it on a transport.

use std::time::Duration;

use anyhow::Context as _;
use staunch_server::{Config, LifecycleLog, ProgressRate, Server, transport};

use crate::cli::ServeArgs;

/// Builds the configured server.
pub fn build_server(args: &ServeArgs) -> anyhow::Result<Server> {
    let config = Config {
        max_in_flight: args.max_in_flight,
        cancel_grace: Duration::from_millis(args.cancel_grace_ms),
        drain_timeout: Duration::from_millis(args.drain_timeout_ms),
        quick_deadline: Duration::from_millis(args.quick_deadline_ms),
        streaming_deadline: Duration::from_millis(args.streaming_deadline_ms),
        progress_rate: ProgressRate {
            burst: args.progress_burst.max(1),
            per_second: args.progress_rate,
        },
        max_message_bytes: args.max_message_bytes,
        ..Config::default()
    };
    let log = if args.no_log {
        LifecycleLog::disabled()
    } else if let Some(path) = &args.log_file {
        LifecycleLog::file(path).with_context(|| format!("opening {}", path.display()))?
    } else {
        LifecycleLog::stderr()
    };
    let builder = Server::builder("staunch", env!("CARGO_PKG_VERSION"))
        .config(config)
        .lifecycle_log(log);
    let builder = match args.profile.as_str() {
        "demo" => crate::tools::demo(builder),
        other => anyhow::bail!("unknown profile {other:?}; use demo or conformance"),
    };
    Ok(builder.build())
}

pub async fn run(args: ServeArgs) -> anyhow::Result<i32> {
    let server = build_server(&args)?;
    let shutdown = server.shutdown_token();
    tokio::spawn(async move {
        wait_for_signal().await;
        shutdown.cancel();
    });
    let exit = transport::stdio::serve_stdio(&server).await?;
    if !exit.drained {
        tracing::warn!("some requests did not end within the drain timeout");
    }
    Ok(0)
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let Ok(mut term) = signal(SignalKind::terminate()) else {
            return std::future::pending().await;
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
