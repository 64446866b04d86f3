//! `staunch-bench`: staunch beside the official SDKs' servers (rmcp, TypeScript, Python) and
//! a bare tokio JSON-RPC ceiling, measured the same way over raw JSON-RPC.
//!
//! The driver spawns every server itself (stdio pipes, or HTTP on an ephemeral 127.0.0.1
//! port), runs the scenarios of [`scenarios`] against each, and prints one table — rows are
//! metrics, columns are servers, each peer cell carries staunch's ratio to it — with the
//! DESIGN.md target for staunch and whether it is met ([`targets`]). `--json` and `--md`
//! write the same results to files. It runs on a single-threaded runtime so that on a
//! 2-core machine the server under test keeps at least one core to itself.

#![forbid(unsafe_code)]

mod client;
mod http;
mod procfs;
mod report;
mod rpc;
mod scenarios;
mod servers;
mod sse;
mod stateless;
mod stats;
mod stdio;
mod targets;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use serde_json::json;

use crate::report::Report;
use crate::scenarios::Opts;
use crate::servers::{Kind, Programs, Transport};

/// Benchmarks staunch beside rmcp, the TypeScript and Python SDKs and a bare ceiling.
#[derive(Debug, Parser)]
#[command(name = "staunch-bench", version)]
struct Args {
    /// Servers of the 2025-era scenarios (staunch, staunch-mem, rmcp, ts, python, bare),
    /// comma-separated. `staunch` is staunch as users run it (lifecycle log on, SQLite store);
    /// `staunch-mem` adds `--no-log --store :memory:` (the labelled other configuration).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "staunch,staunch-mem,rmcp,ts,python,bare"
    )]
    servers: Vec<String>,
    /// Servers of the 2026-07-28 scenarios (`--only stateless`): staunch, staunch-mem, ts2,
    /// python2, rmcp-stateless, and bare (echo throughput only: the ceiling).
    #[arg(
        long,
        alias = "modern-servers",
        value_delimiter = ',',
        default_value = "staunch,staunch-mem,ts2,python2,rmcp-stateless,bare"
    )]
    stateless_servers: Vec<String>,
    /// Close → stop runs per server in the 2026 scenarios (each ~0.4 s).
    #[arg(long, default_value_t = 20)]
    close_runs: usize,
    /// Silent-handler runs per server in the 2026 scenarios (each 1.5 s).
    #[arg(long, default_value_t = 3)]
    silent_runs: usize,
    /// In-flight streams of the 2026 memory scenario (each on its own connection).
    #[arg(long, alias = "mem-modern", default_value_t = 1000)]
    mem_stateless: usize,
    /// Transports (stdio, http), comma-separated. HTTP is skipped for staunch when its
    /// binary has no `--http` yet.
    #[arg(long, value_delimiter = ',', default_value = "stdio,http")]
    transports: Vec<String>,
    /// Only these scenarios (cancel, ping, flood, memory, throughput, resume; stateless = every
    /// 2026-07-28 scenario).
    #[arg(long, value_delimiter = ',')]
    only: Option<Vec<String>>,
    /// Cancel runs per server and transport (p50/p99 over these).
    #[arg(long, default_value_t = 20)]
    runs: usize,
    /// Cancel runs over HTTP (each may wait 1.6 s for a stream that stays open).
    #[arg(long, default_value_t = 10)]
    http_runs: usize,
    /// Pings measured while 8 slow calls run.
    #[arg(long, default_value_t = 1000)]
    pings: usize,
    /// Seconds of each throughput measurement (after the warm-up).
    #[arg(long, default_value_t = 2.0)]
    secs: f64,
    /// Throughput rounds: every server is measured once per round, servers interleaved, and
    /// the median is reported (a shared 2-core machine drifts by tens of percent).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Throughput rounds over stdio (cheap, and the pipe's batching makes single runs
    /// bimodal, the ceiling's most of all).
    #[arg(long, default_value_t = 5)]
    stdio_rounds: usize,
    /// Seconds of warm-up before each throughput measurement.
    #[arg(long, default_value_t = 0.5)]
    warmup_secs: f64,
    /// Reports of the progress flood.
    #[arg(long, default_value_t = 50_000)]
    flood: u32,
    /// In-flight call counts of the stdio memory scenario.
    #[arg(long, value_delimiter = ',', default_value = "1000,10000")]
    mem_stdio: Vec<usize>,
    /// In-flight call counts of the HTTP memory scenario (each holds a connection).
    #[arg(long, value_delimiter = ',', default_value = "1000")]
    mem_http: Vec<usize>,
    /// Load/cancel cycles of the largest memory load; from the 2nd on, each cycle's RSS after
    /// the cancel is compared with the one before (a leak grows every time).
    #[arg(long, default_value_t = 3)]
    mem_cycles: usize,
    /// Write the results as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write the results as a Markdown table.
    #[arg(long)]
    md: Option<PathBuf>,
    /// The staunch binary.
    #[arg(long, default_value = "target/release/staunch")]
    staunch: PathBuf,
    /// The binary of the `staunch-b` server (another build, for an A/B comparison in one
    /// interleaved run); the `--staunch` binary when not given.
    #[arg(long)]
    staunch_b: Option<PathBuf>,
    /// What `staunch proxy` speaks to the rmcp peer behind it. The direct rmcp column is
    /// measured in the 2025 session era, so the proxy speaks it too by default: the overhead
    /// is then the proxy's alone (with `auto` rmcp serves each call statelessly, which costs
    /// rmcp itself more per call).
    #[arg(long, default_value = "2025-11-25")]
    proxy_upstream_protocol: String,
    /// Flags for `staunch serve`, chosen for the load: room for 10,000 in-flight calls (the
    /// default limit is 1,024), for 1,000 SSE connections in one HTTP session (the default
    /// limit is 256), and for all of them from one client (the driver; the default per client
    /// is 256). The lifecycle log stays on (to stderr, which the driver discards) and the
    /// store is a fresh SQLite file: what users run.
    #[arg(
        long,
        default_value = "--max-in-flight 20000 --max-streams-per-session 20000 \
                         --max-in-flight-per-session 20000 --max-in-flight-per-peer 20000",
        allow_hyphen_values = true
    )]
    staunch_flags: String,
    #[arg(long, default_value = "target/release/rmcp-peer")]
    rmcp: PathBuf,
    #[arg(long, default_value = "target/release/bare-peer")]
    bare: PathBuf,
    /// Node 22 (`source scripts/tools-env` sets STAUNCH_NODE).
    #[arg(long, env = "STAUNCH_NODE", default_value = "node")]
    node: PathBuf,
    /// Python with mcp 1.30 (STAUNCH_PY).
    #[arg(long, env = "STAUNCH_PY", default_value = "python3")]
    python: PathBuf,
    #[arg(long, default_value = "benches/peers/ts/server.mjs")]
    ts_script: PathBuf,
    #[arg(long, default_value = "benches/peers/python/server.py")]
    py_script: PathBuf,
    /// Python with mcp 2.3 (STAUNCH_PY2).
    #[arg(long, env = "STAUNCH_PY2", default_value = ".tools/py2/bin/python")]
    python2: PathBuf,
    #[arg(long, default_value = "benches/peers/ts2/server.mjs")]
    ts2_script: PathBuf,
    #[arg(long, default_value = "benches/peers/python2/server.py")]
    py2_script: PathBuf,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(run(args))
}

async fn run(args: Args) -> anyhow::Result<()> {
    let kinds: Vec<Kind> = args
        .servers
        .iter()
        .map(|s| Kind::parse(s).with_context(|| format!("unknown server {s:?}")))
        .collect::<anyhow::Result<_>>()?;
    let transports: Vec<Transport> = args
        .transports
        .iter()
        .map(|t| match t.as_str() {
            "stdio" => Ok(Transport::Stdio),
            "http" => Ok(Transport::Http),
            other => anyhow::bail!("unknown transport {other:?}"),
        })
        .collect::<anyhow::Result<_>>()?;
    let programs = Programs {
        staunch: args.staunch.clone(),
        staunch_b: args
            .staunch_b
            .clone()
            .unwrap_or_else(|| args.staunch.clone()),
        proxy_upstream_protocol: args.proxy_upstream_protocol.clone(),
        rmcp: args.rmcp.clone(),
        bare: args.bare.clone(),
        node: args.node.clone(),
        python: args.python.clone(),
        ts_script: args.ts_script.clone(),
        py_script: args.py_script.clone(),
        python2: args.python2.clone(),
        ts2_script: args.ts2_script.clone(),
        py2_script: args.py2_script.clone(),
        staunch_flags: args
            .staunch_flags
            .split_whitespace()
            .map(String::from)
            .collect(),
        scratch: std::env::temp_dir().join(format!("staunch-bench-{}", std::process::id())),
    };
    std::fs::create_dir_all(&programs.scratch)?;
    let opts = Opts {
        runs: args.runs,
        http_runs: args.http_runs,
        pings: args.pings,
        warmup: Duration::from_secs_f64(args.warmup_secs),
        measure: Duration::from_secs_f64(args.secs),
        flood_reports: args.flood,
        mem_stdio: args.mem_stdio.clone(),
        mem_http: args.mem_http.clone(),
        mem_cycles: args.mem_cycles.max(2),
        // `modern`: the name these scenarios had before, in commands recorded with results.
        only: args.only.clone().map(|only| {
            only.into_iter()
                .map(|s| {
                    if s == "modern" {
                        "stateless".to_string()
                    } else {
                        s
                    }
                })
                .collect()
        }),
        rounds: args.rounds.max(1),
        stdio_rounds: args.stdio_rounds.max(1),
        close_runs: args.close_runs,
        silent_runs: args.silent_runs,
        mem_stateless: args.mem_stateless,
    };
    let stateless_kinds: Vec<Kind> = args
        .stateless_servers
        .iter()
        .map(|s| Kind::parse(s).with_context(|| format!("unknown server {s:?}")))
        .collect::<anyhow::Result<_>>()?;
    let staunch_http = staunch_has_http(&args.staunch);

    // Columns: the 2025 servers, then the 2026 peers (only those whose scenarios run).
    let mut columns = if opts.wants_session_era() {
        kinds.clone()
    } else {
        Vec::new()
    };
    if opts.wants("stateless") {
        for k in &stateless_kinds {
            if !columns.contains(k) {
                columns.push(*k);
            }
        }
    }
    columns.sort();
    let mut report = Report {
        kinds: columns,
        ..Report::default()
    };
    report.notes.push(format!(
        "staunch runs as `staunch serve {} --store <fresh SQLite file>`: the lifecycle log on \
         (to stderr, discarded by the driver) and the SQLite store, as users run it; the \
         `staunch (--no-log, :memory: store)` column adds `--no-log --store :memory:`",
        args.staunch_flags
    ));
    let started = std::time::Instant::now();
    for &t in &transports {
        for &k in &kinds {
            if !opts.wants_session_era() {
                break;
            }
            if matches!(k, Kind::Staunch | Kind::StaunchMem | Kind::StaunchB)
                && t == Transport::Http
                && !staunch_http
            {
                let note = "staunch HTTP not measured: this staunch binary has no `serve --http`"
                    .to_string();
                eprintln!("{note}");
                report.notes.push(note);
                continue;
            }
            eprintln!(
                "[{:>5.0}s] {} over {}",
                started.elapsed().as_secs_f64(),
                k.title(),
                t.key()
            );
            scenarios::bench(k, t, &programs, &opts, &mut report).await;
        }
    }
    if opts.wants("stateless") {
        for &k in &stateless_kinds {
            eprintln!(
                "[{:>5.0}s] {} in the 2026-07-28 era",
                started.elapsed().as_secs_f64(),
                k.title()
            );
            scenarios::stateless_bench(k, &programs, &opts, &mut report).await;
        }
        let runs: Vec<(Kind, Transport)> = transports
            .iter()
            .flat_map(|&t| stateless_kinds.iter().map(move |&k| (k, t)))
            .collect();
        eprintln!(
            "[{:>5.0}s] 2026-07-28 throughput, {} rounds over stdio, {} over HTTP",
            started.elapsed().as_secs_f64(),
            opts.stdio_rounds,
            opts.rounds
        );
        scenarios::throughput_phase(&runs, &programs, &opts, &mut report, true).await;
    }
    if opts.wants("throughput") {
        let runs: Vec<(Kind, Transport)> = transports
            .iter()
            .flat_map(|&t| kinds.iter().map(move |&k| (k, t)))
            .filter(|&(k, t)| match k {
                Kind::Staunch
                | Kind::StaunchMem
                | Kind::StaunchB
                | Kind::Proxy
                | Kind::ProxyRetrySafe => t == Transport::Stdio || staunch_http,
                _ => true,
            })
            .collect();
        eprintln!(
            "[{:>5.0}s] throughput, {} rounds over stdio, {} over HTTP",
            started.elapsed().as_secs_f64(),
            opts.stdio_rounds,
            opts.rounds
        );
        scenarios::throughput_phase(&runs, &programs, &opts, &mut report, false).await;
    }
    if opts.wants("latency") {
        let runs: Vec<(Kind, Transport)> = transports
            .iter()
            .flat_map(|&t| kinds.iter().map(move |&k| (k, t)))
            .filter(|&(k, t)| match k {
                Kind::Staunch
                | Kind::StaunchMem
                | Kind::StaunchB
                | Kind::Proxy
                | Kind::ProxyRetrySafe => t == Transport::Stdio || staunch_http,
                _ => true,
            })
            .collect();
        eprintln!("[{:>5.0}s] latency", started.elapsed().as_secs_f64());
        scenarios::latency_phase(&runs, &programs, &opts, &mut report).await;
    }
    let _ = std::fs::remove_dir_all(&programs.scratch);
    let (burst, rate) = progress_limits(&programs.staunch_flags);
    report.sort_rows();
    targets::check(&mut report, (burst, rate));
    targets::proxy_overhead(&mut report);

    let meta = json!({
        "date": time::OffsetDateTime::now_utc().date().to_string(),
        "duration_s": started.elapsed().as_secs_f64().round(),
        "versions": versions(&programs).await,
        "staunch_flags": args.staunch_flags,
        "command": std::env::args().collect::<Vec<_>>().join(" "),
        "machine": machine(),
        "ratio": "each peer cell shows (×r) with r = staunch ÷ peer",
    });
    println!("{}", report.text());
    for n in &report.notes {
        println!("note: {n}");
    }
    println!("(×r) in a peer's cell = staunch ÷ that peer");
    if let Some(p) = &args.json {
        std::fs::write(p, serde_json::to_string_pretty(&report.json(meta.clone()))?)?;
    }
    if let Some(p) = &args.md {
        std::fs::write(p, markdown(&report, &meta))?;
    }
    Ok(())
}

fn markdown(report: &Report, meta: &serde_json::Value) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        "Measured {} on {} ({} s). Versions: {}.\n\n",
        meta["date"].as_str().unwrap_or(""),
        meta["machine"].as_str().unwrap_or(""),
        meta["duration_s"],
        meta["versions"]
            .as_object()
            .map(|m| m
                .iter()
                .map(|(k, v)| format!("{k} {}", v.as_str().unwrap_or("?")))
                .collect::<Vec<_>>()
                .join(", "))
            .unwrap_or_default()
    ));
    s.push_str(&format!(
        "Command: `{}`\n\n",
        meta["command"].as_str().unwrap_or("")
    ));
    s.push_str(&report.markdown());
    s.push('\n');
    for n in &report.notes {
        s.push_str(&format!("- {n}\n"));
    }
    s.push_str("- (×r) in a peer's cell = staunch ÷ that peer (for latency and memory lower is better, for throughput higher).\n");
    s
}

/// The progress limit staunch was given (its defaults otherwise), for the flood verdict.
fn progress_limits(flags: &[String]) -> (f64, f64) {
    let get = |name: &str| {
        flags
            .iter()
            .position(|f| f == name)
            .and_then(|i| flags.get(i + 1))
            .and_then(|v| v.parse::<f64>().ok())
    };
    (
        get("--progress-burst").unwrap_or(20.0),
        get("--progress-rate").unwrap_or(20.0),
    )
}

fn staunch_has_http(staunch: &PathBuf) -> bool {
    std::process::Command::new(staunch)
        .args(["serve", "--help"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("--http"))
        .unwrap_or(false)
}

fn machine() -> String {
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_default();
    format!("{cores} cores, {cpu}")
}

async fn versions(p: &Programs) -> serde_json::Value {
    let out = |cmd: &PathBuf, args: &[&str]| {
        std::process::Command::new(cmd)
            .args(args)
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "?".into())
    };
    let ts_pkg = pkg_version(&p.ts_script, "@modelcontextprotocol/sdk");
    json!({
        "staunch": out(&p.staunch, &["--version"]),
        "rmcp": "3.11.0",
        "@modelcontextprotocol/sdk": ts_pkg,
        "node": out(&p.node, &["--version"]),
        "mcp (Python)": out(&p.python, &["-c", "import importlib.metadata as m; print(m.version('mcp'))"]),
        "mcp (Python, 2.x peer)": out(&p.python2, &["-c", "import importlib.metadata as m; print(m.version('mcp'))"]),
        "@modelcontextprotocol/server": pkg_version(&p.ts2_script, "@modelcontextprotocol/server"),
        "python": out(&p.python, &["-c", "import platform; print(platform.python_version())"]),
    })
}

/// The version of npm package `pkg` in the node_modules next to `script`.
fn pkg_version(script: &std::path::Path, pkg: &str) -> String {
    script
        .parent()
        .map(|d| d.join("node_modules").join(pkg).join("package.json"))
        .and_then(|f| std::fs::read_to_string(f).ok())
        .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok())
        .and_then(|v| v["version"].as_str().map(String::from))
        .unwrap_or_else(|| "?".into())
}
