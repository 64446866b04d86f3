//! `staunch serve`: builds the server from flags and runs it on a transport.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use staunch_jobs::{JobConfig, JobRuntime};
use staunch_server::transport::http::{Allow, HttpTransport, bind_metrics};
use staunch_server::{LifecycleLog, Metrics, Server, StateKey, Traces, transport};

use crate::serve_args::ServeArgs;
use staunch_demo::jobs::ImportDb;

/// Builds the configured server; the demo profile gets the job tools, the conformance profile
/// the tasks extension's fixtures, when a job runtime is given.
pub async fn build_server(
    args: &ServeArgs,
    jobs: Option<(&JobRuntime, ImportDb)>,
    state_key: Option<StateKey>,
    metrics: Metrics,
    traces: Traces,
    commands: Option<&staunch_command::CommandConfig>,
    upstreams: Vec<staunch_proxy::UpstreamSpec>,
) -> anyhow::Result<Built> {
    let config = args.server.config();
    let log = if args.no_log {
        LifecycleLog::disabled()
    } else if let Some(path) = &args.log_file {
        LifecycleLog::file(path).with_context(|| format!("opening {}", path.display()))?
    } else {
        LifecycleLog::stderr()
    };
    let mut builder = Server::builder("staunch", env!("CARGO_PKG_VERSION"))
        .config(config)
        .lifecycle_log(log)
        .metrics(metrics.clone())
        .traces(traces);
    if let Some(key) = state_key {
        builder = builder.state_key(key);
    }
    let runtime = jobs.as_ref().map(|(rt, _)| *rt);
    let demo = serves_demo(args, commands, !upstreams.is_empty());
    let builder = match (args.profile.as_str(), demo) {
        (_, false) => builder,
        ("demo", true) => staunch_demo::demo(builder, jobs),
        ("conformance", true) => {
            staunch_demo::conformance::register(builder, jobs.map(|(rt, _)| rt))
        }
        (other, true) => anyhow::bail!("unknown profile {other:?}; use demo or conformance"),
    };
    let (builder, command_tools) = match commands {
        Some(c) => {
            // A reload (SIGHUP) may add and remove tools: sessions are told.
            let builder = builder.dynamic_tools();
            let (b, tools) = staunch_command::register(builder, c, runtime)?;
            (b, Some(tools))
        }
        None => (builder, None),
    };
    let (builder, proxied) = if upstreams.is_empty() {
        (builder, None)
    } else {
        let (b, r) = staunch_proxy::register(
            builder,
            upstreams,
            runtime,
            &staunch_proxy::connect_options(),
            &metrics,
        )
        .await?;
        announce(&r);
        (b, Some(r))
    };
    Ok(Built {
        server: builder.build(),
        command_tools,
        proxied,
    })
}

/// One line per upstream on stderr: what is served.
fn announce(r: &staunch_proxy::Registered) {
    for pool in &r.pools {
        let up = pool.shared();
        let n = r.tools.iter().filter(|t| t.1 == up.name()).count();
        eprintln!(
            "staunch proxy: {} tools from {:?} ({}, protocol {})",
            n,
            up.name(),
            pool.spec().target.display(),
            up.protocol_version().unwrap_or_default()
        );
    }
}

/// Whether the `--profile` tools are served: always on their own; beside command tools or
/// upstreams only when asked for (`--demo-tools`, or `demo_tools` in the file).
fn serves_demo(
    args: &ServeArgs,
    commands: Option<&staunch_command::CommandConfig>,
    has_upstreams: bool,
) -> bool {
    args.demo_tools || (commands.is_none() && !has_upstreams)
}

/// What [`build_server`] made.
pub struct Built {
    pub server: Server,
    pub command_tools: Option<staunch_command::CommandTools>,
    /// The upstreams of `staunch proxy`.
    pub proxied: Option<staunch_proxy::Registered>,
}

/// `serve`; `commands` is its `--config`, loaded (its `[serve]` table already applied to
/// `args`).
pub async fn run(
    args: ServeArgs,
    commands: Option<staunch_command::CommandConfig>,
) -> anyhow::Result<i32> {
    run_with(args, Vec::new(), commands).await
}

/// `serve`, with the tools of `upstreams` (`staunch proxy`) beside or instead of the others.
pub async fn run_with(
    mut args: ServeArgs,
    mut upstreams: Vec<staunch_proxy::UpstreamSpec>,
    commands: Option<staunch_command::CommandConfig>,
) -> anyhow::Result<i32> {
    if let Some(c) = &commands {
        upstreams.extend(c.upstreams.iter().map(staunch_proxy::UpstreamSpec::from));
    }
    // Job tools keep their state in the store, so stdio needs it too when they are served.
    let demo = serves_demo(&args, commands.as_ref(), !upstreams.is_empty());
    let with_jobs = (demo && (args.profile == "demo" || args.profile == "conformance"))
        || commands.as_ref().is_some_and(|c| c.has_job_tools())
        || upstreams.iter().any(|u| {
            u.default_shape == staunch_server::Shape::Job
                || u.tools
                    .values()
                    .any(|r| r.shape == Some(staunch_server::Shape::Job))
        });
    // Fails early on auth flags without --http (stdio has no auth).
    args.auth.check_transport(args.http.is_some())?;
    let stores = if with_jobs || args.http.is_some() {
        if args.store == staunch_store::location::DEFAULT_STORE {
            args.store = staunch_store::location::resolve_store(&args.store, true)?;
            eprintln!("staunch: store {}", args.store);
        }
        Some(open_store(&args).await?)
    } else {
        None
    };
    let metrics = if args.metrics.is_some() {
        Metrics::enabled()
    } else {
        Metrics::disabled()
    };
    let export = crate::traces::TraceExport::start(args.otlp_endpoint.as_deref())?;
    let traces = export.traces();
    let jobs = match (&stores, with_jobs) {
        (Some(stores), true) => Some(job_runtime(&args, stores, &metrics, &traces)?),
        _ => None,
    };
    let state_key = match &stores {
        // Kept in the store, so that every instance sharing it (and this one after a restart)
        // can continue an input-required round another began.
        Some(stores) => Some(
            StateKey::shared(stores.sessions.as_ref())
                .await
                .context("reading the input-state key from the store")?,
        ),
        None => None,
    };
    let Built {
        server,
        command_tools,
        proxied,
    } = build_server(
        &args,
        jobs.as_ref().map(|(rt, db)| (rt, db.clone())),
        state_key,
        metrics.clone(),
        traces,
        commands.as_ref(),
        upstreams,
    )
    .await?;
    if let Some(p) = &proxied {
        p.reap_isolated(Duration::from_secs(args.server.http.session_idle_secs));
        staunch_proxy::follow_tool_changes(p, server.clone());
    }
    if let (Some(c), Some(tools)) = (&commands, command_tools) {
        staunch_command::sweep::sweep_orphans_periodically();
        staunch_command::reload::reload_on_sighup(
            c.path.clone(),
            tools,
            server.clone(),
            crate::serve_args::settable_flags(),
        );
    }
    if let Some((rt, _)) = &jobs {
        rt.start().await.context("starting the job runtime")?;
    }
    if let Some(addr) = args.metrics {
        let store = stores.as_ref().map(|s| s.jobs.clone());
        let allow = Allow::for_listener(addr, &args.server.http.allow_hosts);
        let listener = args.server.limits.listener(allow);
        let bound = bind_metrics(addr, &metrics, store, listener, server.shutdown_token())
            .await
            .with_context(|| format!("binding the metrics address {addr}"))?;
        // Not written as a URL: tools that read the MCP endpoint's URL from stderr take the
        // first.
        eprintln!("staunch: serving metrics at {bound} path /metrics");
    }
    crate::release_memory::watch(&server);
    let shutdown = server.shutdown_token();
    tokio::spawn(async move {
        wait_for_signal().await;
        shutdown.cancel();
    });
    match (args.http, stores) {
        (Some(addr), Some(stores)) => {
            let upstreams = proxied
                .as_ref()
                .map(|p| p.pools.clone())
                .unwrap_or_default();
            serve_http(&args, server, addr, stores, upstreams).await?
        }
        _ => {
            let exit = transport::stdio::serve_stdio(&server).await?;
            if !exit.drained {
                tracing::warn!("some requests did not end within the drain timeout");
            }
        }
    }
    if let Some((rt, _)) = jobs {
        rt.shutdown(Duration::from_millis(args.server.request.drain_timeout_ms))
            .await;
    }
    if let Some(p) = proxied {
        p.shut_down().await;
    }
    export.finish().await;
    Ok(0)
}

/// The job runtime's settings from the `--job-*` flags, with this process's metrics, traces and
/// principal hook.
fn job_config(args: &ServeArgs, metrics: &Metrics, traces: &Traces) -> JobConfig {
    JobConfig {
        metrics: metrics.clone(),
        traces: traces.clone(),
        principal: args.auth.principal_fn(),
        ..args.jobs.config()
    }
}

/// The job runtime from the `--job-*` flags, and the table `import_rows` writes to.
fn job_runtime(
    args: &ServeArgs,
    stores: &staunch_store::Stores,
    metrics: &Metrics,
    traces: &Traces,
) -> anyhow::Result<(JobRuntime, ImportDb)> {
    let config = job_config(args, metrics, traces);
    let rt = JobRuntime::new(stores.jobs.clone(), config).context("job settings")?;
    let path = staunch_demo::jobs::import_db_path(&args.store, args.import_db.as_deref());
    let db = staunch_demo::jobs::open_import_db(path.as_deref()).with_context(|| {
        format!(
            "opening the import_rows database {}",
            path.as_deref()
                .map_or(":memory:".into(), |p| p.display().to_string())
        )
    })?;
    Ok((rt, db))
}

/// Serves MCP over HTTP on `addr` (and the live page; `upstreams`: the proxy's, whose work
/// after a cancel the page lists).
async fn serve_http(
    args: &ServeArgs,
    server: Server,
    addr: std::net::SocketAddr,
    stores: staunch_store::Stores,
    upstreams: Vec<Arc<staunch_proxy::Pool>>,
) -> anyhow::Result<()> {
    let mut cfg = args.server.http_config();
    cfg.auth = args.auth.config().await?;
    if !addr.ip().is_loopback() {
        tracing::warn!(%addr, "serving on a non-loopback address");
    }
    if let Some(base) = &args.live_page {
        staunch_live::validate(base, &args.server.http.endpoint, addr, args.auth.enabled())
            .map_err(anyhow::Error::msg)?;
        if let Some(auth) = &mut cfg.auth {
            // Listed in the protected-resource metadata's scopes_supported.
            auth.other_scopes.push(args.live_page_scope.clone());
        }
    }
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding {addr}"))?;
    eprintln!(
        "staunch: serving MCP (Streamable HTTP) on http://{}{}",
        listener.local_addr()?,
        cfg.endpoint
    );
    let mut transport =
        HttpTransport::new(server.clone(), stores.events, stores.sessions, cfg.clone())
            .with_store_signals(stores.jobs.clone());
    if let Some(base) = &args.live_page {
        // The endpoint's own verifier (and JWKS cache): the page asks for the same tokens.
        let auth = transport
            .authenticator()
            .map(|a| (a, args.live_page_scope.clone()));
        let access = staunch_live::Access {
            allow: cfg.allow.clone(),
            auth,
            max_streams: args.live_page_max_streams as usize,
        };
        transport = transport.with_routes(staunch_live::routes(
            base,
            server,
            stores.jobs,
            upstreams,
            access,
        ));
        eprintln!("staunch: live page at {base} on the same address");
    }
    transport.serve(listener).await?;
    Ok(())
}

/// Opens the durable store named by `--store` (and `--store-schema` for PostgreSQL).
pub async fn open_store(args: &ServeArgs) -> anyhow::Result<staunch_store::Stores> {
    staunch_store::open_in(&args.store, args.store_schema.as_deref())
        .await
        .with_context(|| {
            format!(
                "opening the store {:?} (durable jobs and HTTP sessions live there; choose a \
                 writable path with --store, or --store :memory:)",
                args.store
            )
        })
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
