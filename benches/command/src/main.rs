//! Per-call overhead of a command tool, for the program `true`, in three layers, one call at a
//! time (latency, not throughput):
//!
//! 1. **plain spawn**: `tokio::process::Command::new("true")` with piped stdout/stderr read to
//!    the end, then `wait` — the floor;
//! 2. **supervisor**: `staunch_command::supervise::run` — its own process group, the
//!    parent-death signal (which makes std fork+exec instead of posix_spawn), an empty
//!    environment, bounded readers, the group kill at the end;
//! 3. **tools/call**: a `quick` command tool through `staunch serve --config` over stdio (raw
//!    JSON-RPC): argument validation, argv, the request core, the lifecycle log off.
//!
//! Usage: `staunch-command-bench [--staunch PATH] [--calls N]`. Prints a Markdown table.

#![forbid(unsafe_code)]

use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};
use staunch_command::config::{OutputLimits, Overflow};
use staunch_command::spawn::Spawn;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;
use tokio_util::sync::CancellationToken;

fn true_path() -> anyhow::Result<std::path::PathBuf> {
    for p in ["/usr/bin/true", "/bin/true"] {
        if std::path::Path::new(p).exists() {
            return Ok(p.into());
        }
    }
    bail!("no `true` program found")
}

async fn plain(prog: &std::path::Path) -> anyhow::Result<()> {
    let mut child = Command::new(prog)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let (mut o, mut e) = (
        child.stdout.take().context("stdout")?,
        child.stderr.take().context("stderr")?,
    );
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let (r1, r2, st) = tokio::join!(o.read_to_end(&mut a), e.read_to_end(&mut b), child.wait());
    r1?;
    r2?;
    if !st?.success() {
        bail!("true failed");
    }
    Ok(())
}

async fn supervised(spec: &Spawn) -> anyhow::Result<()> {
    let limits = OutputLimits {
        max_stdout: 1 << 20,
        overflow: Overflow::Truncate,
        stderr_tail: 4096,
        max_result: 1 << 20,
    };
    let f = staunch_command::supervise::run(
        spec,
        limits,
        Duration::from_secs(5),
        CancellationToken::new(),
        Arc::new(|_, _| {}),
        None,
    )
    .await?;
    if f.code != Some(0) {
        bail!("true failed: {f:?}");
    }
    Ok(())
}

fn stats(mut v: Vec<Duration>) -> (f64, f64, f64) {
    v.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let p = |q: f64| ms(v[((v.len() as f64 - 1.0) * q).round() as usize]);
    let mean = v.iter().map(|d| ms(*d)).sum::<f64>() / v.len() as f64;
    (p(0.5), p(0.95), mean)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut staunch = String::from("target/release/staunch");
    let mut calls = 300usize;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--staunch" => staunch = it.next().context("--staunch PATH")?,
            "--calls" => calls = it.next().context("--calls N")?.parse()?,
            other => bail!("unknown argument {other:?}"),
        }
    }
    let prog = true_path()?;
    let mut rows = Vec::new();

    let mut t = Vec::with_capacity(calls);
    for _ in 0..calls {
        let s = Instant::now();
        plain(&prog).await?;
        t.push(s.elapsed());
    }
    rows.push(("plain tokio::process spawn", stats(t)));

    let spec = Spawn {
        program: prog.clone(),
        args: vec![],
        cwd: std::env::current_dir()?,
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
    };
    let mut t = Vec::with_capacity(calls);
    for _ in 0..calls {
        let s = Instant::now();
        supervised(&spec).await?;
        t.push(s.elapsed());
    }
    rows.push(("supervise::run (group, pdeathsig, readers)", stats(t)));

    let dir = tempfile::tempdir()?;
    let config = dir.path().join("staunch.toml");
    std::fs::write(
        &config,
        format!(
            "[[tool]]\nname = \"t\"\ndescription = \"true\"\nprogram = \"{}\"\n",
            prog.display()
        ),
    )?;
    let mut child = Command::new(&staunch)
        .args(["serve", "--no-log", "--store", ":memory:", "--config"])
        .arg(&config)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {staunch}"))?;
    let mut stdin = child.stdin.take().context("stdin")?;
    let mut lines = BufReader::new(child.stdout.take().context("stdout")?).lines();
    let mut rpc = async |id: u64, method: &str, params: Value| -> anyhow::Result<Value> {
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        stdin.write_all(format!("{msg}\n").as_bytes()).await?;
        stdin.flush().await?;
        loop {
            let line = lines.next_line().await?.context("staunch closed stdout")?;
            let v: Value = serde_json::from_str(&line)?;
            if v["id"] == id {
                return Ok(v);
            }
        }
    };
    rpc(
        0,
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}),
    )
    .await?;
    let mut t = Vec::with_capacity(calls);
    for i in 0..calls {
        let s = Instant::now();
        let r = rpc(
            i as u64 + 1,
            "tools/call",
            json!({"name": "t", "arguments": {}}),
        )
        .await?;
        t.push(s.elapsed());
        if r["result"]["isError"] == true || r.get("error").is_some() {
            bail!("tools/call failed: {r}");
        }
    }
    rows.push(("tools/call of a command tool (stdio, end to end)", stats(t)));

    println!("| `true`, {calls} calls one at a time | p50 ms | p95 ms | mean ms |");
    println!("|---|---:|---:|---:|");
    for (name, (p50, p95, mean)) in rows {
        println!("| {name} | {p50:.3} | {p95:.3} | {mean:.3} |");
    }
    Ok(())
}
