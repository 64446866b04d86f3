//! Job throughput of `staunch serve`, end to end over stdio (raw JSON-RPC, so what is measured
//! is the server and its store, not a client library):
//!
//! - **starts per second**: `start_long_scan` calls pipelined 32 at a time; each answer comes
//!   only after the job record is durable (and the job is then run by the instance's workers);
//! - **`get` latency**: `get_long_scan` for one job, one call at a time, p50/p99.
//!
//! Usage: `staunch-job-bench [--staunch PATH] [--starts N] [--gets N] [--store SPEC]…`; without
//! `--store`, a fresh SQLite file, plus PostgreSQL when `STAUNCH_TEST_POSTGRES` is set (a
//! fresh schema, dropped afterwards). Prints a Markdown table.

#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

struct Server {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Server {
    async fn start(bin: &str, store: &[String]) -> anyhow::Result<Self> {
        let mut child = Command::new(bin)
            .args(["serve", "--no-log"])
            .args(store)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {bin}"))?;
        let stdin = child.stdin.take().context("stdin")?;
        let lines = BufReader::new(child.stdout.take().context("stdout")?).lines();
        let mut s = Self {
            child,
            stdin,
            lines,
        };
        s.send(&json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
            "protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"job-bench","version":"0"}}}))
            .await?;
        s.response(0).await?;
        s.send(&json!({"jsonrpc":"2.0","method":"notifications/initialized"}))
            .await?;
        Ok(s)
    }

    async fn send(&mut self, v: &Value) -> anyhow::Result<()> {
        let mut line = v.to_string();
        line.push('\n');
        self.stdin.write_all(line.as_bytes()).await?;
        Ok(())
    }

    async fn next(&mut self) -> anyhow::Result<Value> {
        let line = tokio::time::timeout(Duration::from_secs(60), self.lines.next_line())
            .await
            .context("no answer within 60 s")??
            .context("server closed stdout")?;
        Ok(serde_json::from_str(&line)?)
    }

    async fn response(&mut self, id: i64) -> anyhow::Result<Value> {
        loop {
            let m = self.next().await?;
            if m.get("method").is_none() && m["id"] == id {
                return Ok(m);
            }
        }
    }
}

fn call(id: i64, tool: &str, args: Value) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":tool,"arguments":args}})
}

fn job_id(resp: &Value) -> anyhow::Result<String> {
    let r = &resp["result"];
    if let Some(id) = r["structuredContent"]["job_id"].as_str() {
        return Ok(id.to_string());
    }
    let text = r["content"][0]["text"].as_str().unwrap_or_default();
    let v: Value = serde_json::from_str(text).with_context(|| format!("no job_id in {resp}"))?;
    v["job_id"]
        .as_str()
        .map(String::from)
        .with_context(|| format!("no job_id in {resp}"))
}

struct Figures {
    starts_per_sec: f64,
    get_p50: Duration,
    get_p99: Duration,
}

async fn measure(
    bin: &str,
    store: &[String],
    starts: usize,
    gets: usize,
) -> anyhow::Result<Figures> {
    let mut s = Server::start(bin, store).await?;
    // Starts, 32 in flight; distinct arguments so no two calls are deduplicated.
    let window = 32usize;
    let t0 = Instant::now();
    let mut sent = 0usize;
    let mut done = 0usize;
    let mut first_job = None;
    let mut pending: HashMap<i64, ()> = HashMap::new();
    while done < starts {
        while sent < starts && pending.len() < window {
            let id = i64::try_from(sent).unwrap_or(i64::MAX) + 1;
            s.send(&call(id, "start_long_scan", json!({"steps": 1, "delay_ms": 0, "idempotency_key": format!("k{sent}-{}", std::process::id())})))
                .await?;
            pending.insert(id, ());
            sent += 1;
        }
        let m = s.next().await?;
        if m.get("method").is_some() {
            continue;
        }
        let id = m["id"].as_i64().unwrap_or(-1);
        if pending.remove(&id).is_some() {
            if m.get("error").is_some() || m["result"]["isError"] == true {
                bail!("start failed: {m}");
            }
            if first_job.is_none() {
                first_job = Some(job_id(&m)?);
            }
            done += 1;
        }
    }
    let starts_per_sec = starts as f64 / t0.elapsed().as_secs_f64();
    let job = first_job.context("no job started")?;
    let mut lat = Vec::with_capacity(gets);
    for i in 0..gets {
        let id = 1_000_000 + i64::try_from(i).unwrap_or(0);
        let t = Instant::now();
        s.send(&call(id, "get_long_scan", json!({"job_id": job})))
            .await?;
        let r = s.response(id).await?;
        lat.push(t.elapsed());
        if r.get("error").is_some() {
            bail!("get failed: {r}");
        }
    }
    lat.sort();
    let pct = |p: f64| lat[((lat.len() as f64 - 1.0) * p).round() as usize];
    drop(s.stdin);
    let _ = tokio::time::timeout(Duration::from_secs(10), s.child.wait()).await;
    Ok(Figures {
        starts_per_sec,
        get_p50: pct(0.5),
        get_p99: pct(0.99),
    })
}

fn flag(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let bin = flag(&args, "--staunch").unwrap_or_else(|| "target/release/staunch".into());
    let starts: usize = flag(&args, "--starts").map_or(Ok(2000), |s| s.parse())?;
    let gets: usize = flag(&args, "--gets").map_or(Ok(2000), |s| s.parse())?;
    let dir = std::env::temp_dir().join(format!("staunch-job-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let mut targets: Vec<(String, Vec<String>)> = vec![(
        "SQLite (file, WAL)".into(),
        vec!["--store".into(), dir.join("bench.db").display().to_string()],
    )];
    let mut schema = None;
    if let Ok(url) = std::env::var("STAUNCH_TEST_POSTGRES") {
        let name = format!("staunch_job_bench_{}", std::process::id());
        targets.push((
            "PostgreSQL (local)".into(),
            vec![
                "--store".into(),
                url.clone(),
                "--store-schema".into(),
                name.clone(),
            ],
        ));
        schema = Some((url, name));
    } else {
        eprintln!("note: STAUNCH_TEST_POSTGRES not set; PostgreSQL not measured");
    }
    println!("| store | starts/s (32 in flight) | get p50 | get p99 |");
    println!("|---|---|---|---|");
    for (name, store) in &targets {
        let f = measure(&bin, store, starts, gets).await?;
        println!(
            "| {name} | {:.0} | {:.2} ms | {:.2} ms |",
            f.starts_per_sec,
            f.get_p50.as_secs_f64() * 1e3,
            f.get_p99.as_secs_f64() * 1e3
        );
    }
    println!(
        "\n{starts} starts, {gets} gets; `staunch serve --no-log --store …` over stdio, raw JSON-RPC."
    );
    if let Some((url, name)) = schema {
        let _ = std::process::Command::new("psql")
            .arg(url)
            .arg("-qc")
            .arg(format!("DROP SCHEMA IF EXISTS {name} CASCADE"))
            .output();
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
