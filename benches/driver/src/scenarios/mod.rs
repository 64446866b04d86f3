//! The scenarios, run for one server on one transport, each writing its rows into the
//! [`Report`]. Every scenario gets a fresh server process (memory and CPU figures must not
//! carry another scenario's leftovers), and every loop is bounded in count and time.

pub mod cancel;
pub mod flood;
pub mod latency;
pub mod memory;
pub mod ping;
pub mod resume;
pub mod stateless;
pub mod throughput;

use std::time::Duration;

use crate::client::Client;
use crate::report::{Better, Cell, Report};
use crate::servers::{self, Kind, Programs, Transport};
use crate::stats::{self, percentile};

/// How much of everything.
#[derive(Clone, Debug)]
pub struct Opts {
    pub runs: usize,
    pub http_runs: usize,
    pub pings: usize,
    pub warmup: Duration,
    pub measure: Duration,
    pub flood_reports: u32,
    pub mem_stdio: Vec<usize>,
    pub mem_http: Vec<usize>,
    /// Load/cancel cycles of the largest memory load (the leak check compares each with the
    /// one before).
    pub mem_cycles: usize,
    pub only: Option<Vec<String>>,
    pub rounds: usize,
    pub stdio_rounds: usize,
    pub close_runs: usize,
    pub silent_runs: usize,
    pub mem_stateless: usize,
}

impl Opts {
    pub fn wants(&self, scenario: &str) -> bool {
        self.only
            .as_ref()
            .is_none_or(|o| o.iter().any(|s| s == scenario))
    }

    /// Whether any 2025-era scenario runs.
    pub fn wants_session_era(&self) -> bool {
        [
            "cancel",
            "ping",
            "flood",
            "memory",
            "throughput",
            "resume",
            "latency",
        ]
        .iter()
        .any(|s| self.wants(s))
    }
}

fn fail(report: &mut Report, key: &str, label: &str, kind: Kind, e: &anyhow::Error) {
    eprintln!("  {}: {label}: {e:#}", kind.key());
    report.set(
        key,
        label,
        Better::Neither,
        kind,
        Cell::text(format!("error: {}", short(e))),
    );
}

fn short(e: &anyhow::Error) -> String {
    let s = format!("{e}");
    s.chars().take(60).collect()
}

/// Everything for one server on one transport.
pub async fn bench(
    kind: Kind,
    t: Transport,
    programs: &Programs,
    opts: &Opts,
    report: &mut Report,
) {
    let tk = t.key();
    if kind.has_slow_tools() {
        if (opts.wants("cancel") || opts.wants("ping") || opts.wants("flood"))
            && let Err(e) = behaviour(kind, t, programs, opts, report).await
        {
            fail(
                report,
                &format!("cancel.stop_p50.{tk}"),
                &format!("cancel → last progress p50 ({tk})"),
                kind,
                &e,
            );
        }
        if opts.wants("memory") {
            let counts = if t == Transport::Stdio {
                &opts.mem_stdio
            } else {
                &opts.mem_http
            };
            mem(kind, t, programs, counts, opts.mem_cycles, report).await;
        }
        if t == Transport::Http && opts.wants("resume") {
            resume_rows(kind, programs, report).await;
        }
    } else if opts.wants("memory") {
        // The ceiling has no slow tool: idle memory only.
        match idle_only(kind, t, programs).await {
            Ok(rss) => report.set(
                &format!("mem.idle.{tk}"),
                &format!("RSS idle ({tk})"),
                Better::Lower,
                kind,
                Cell::num(rss as f64, stats::bytes(rss as f64)),
            ),
            Err(e) => fail(
                report,
                &format!("mem.idle.{tk}"),
                &format!("RSS idle ({tk})"),
                kind,
                &e,
            ),
        }
    }
}

async fn behaviour(
    kind: Kind,
    t: Transport,
    programs: &Programs,
    opts: &Opts,
    report: &mut Report,
) -> anyhow::Result<()> {
    let tk = t.key();
    let mut srv = servers::spawn(programs, kind, t).await?;
    let client = Client::connect(&mut srv, t).await?;

    if opts.wants("cancel") {
        let runs = if t == Transport::Http {
            opts.http_runs
        } else {
            opts.runs
        };
        let r = cancel::run(&client, t, "slow_count", runs).await;
        cancel_rows(report, kind, t, "", &r);
        if kind == Kind::Staunch && t == Transport::Stdio {
            // staunch's promise beyond the peers: also blocking and non-cooperative handlers.
            for (tool, what) in [
                ("cpu_count", "ctx.blocking handler"),
                ("stubborn_count", "non-cooperative handler"),
            ] {
                let r = cancel::run(&client, t, tool, opts.runs.div_ceil(2)).await;
                let key = format!("cancel.late_progress.{tool}.{tk}");
                let label = format!("progress after cancel, {what} ({tk})");
                // The value is the p99 of cancel → last progress (the verdict's measure).
                let mut cell = late_cell(&r);
                if let Some(p99) = percentile(&r.stop, 99.0) {
                    cell.text.push_str(&format!(", p99 {}", stats::ms(p99)));
                    cell.value = Some(p99.as_secs_f64() * 1e3);
                }
                report.set(&key, &label, Better::Lower, kind, cell);
            }
        }
    }
    if opts.wants("ping") {
        match ping::run(&client, opts.pings).await {
            Ok(p) => {
                for (q, name) in [(50.0, "p50"), (99.0, "p99")] {
                    let key = format!("ping.{name}.{tk}");
                    let label = format!("ping while 8 slow calls run, {name} ({tk})");
                    match percentile(&p.samples, q) {
                        Some(d) => report.set(
                            &key,
                            &label,
                            Better::Lower,
                            kind,
                            Cell::num(d.as_secs_f64() * 1e3, stats::ms(d)),
                        ),
                        None => report.set(
                            &key,
                            &label,
                            Better::Lower,
                            kind,
                            Cell::text(format!("{} failed", p.failed)),
                        ),
                    }
                }
            }
            Err(e) => fail(
                report,
                &format!("ping.p50.{tk}"),
                &format!("ping while 8 slow calls run, p50 ({tk})"),
                kind,
                &e,
            ),
        }
    }
    if opts.wants("flood") && t == Transport::Stdio {
        flood_rows(report, kind, &client, srv.pid, opts.flood_reports).await;
    }
    Ok(())
}

fn late_cell(r: &cancel::CancelRuns) -> Cell {
    let ok = r.runs - r.failed;
    let mut text = format!("{} in {ok} runs", r.late_progress);
    if r.failed > 0 {
        text.push_str(&format!(" ({} runs failed)", r.failed));
    }
    if ok == 0 {
        return Cell::text(text);
    }
    Cell::num(r.late_progress as f64, text)
}

fn cancel_rows(
    report: &mut Report,
    kind: Kind,
    t: Transport,
    _suffix: &str,
    r: &cancel::CancelRuns,
) {
    let tk = t.key();
    for (q, name) in [(50.0, "p50"), (99.0, "p99")] {
        let key = format!("cancel.stop_{name}.{tk}");
        let label = format!("cancel → last progress, {name} ({tk})");
        match percentile(&r.stop, q) {
            Some(d) => report.set(
                &key,
                &label,
                Better::Lower,
                kind,
                Cell::num(d.as_secs_f64() * 1e3, stats::ms(d)),
            ),
            None => report.set(
                &key,
                &label,
                Better::Lower,
                kind,
                Cell::text(format!("{} runs failed", r.failed)),
            ),
        }
    }
    report.set(
        &format!("cancel.late_progress.{tk}"),
        &format!("progress notifications after the cancel ({tk})"),
        Better::Lower,
        kind,
        late_cell(r),
    );
    let ok = r.runs - r.failed;
    let text = match (&r.response_sample, r.responses) {
        (_, 0) => format!("none in {ok}"),
        (Some(s), n) => format!("{n} of {ok}: {}", s.chars().take(60).collect::<String>()),
        (None, n) => format!("{n} of {ok}"),
    };
    report.set(
        &format!("cancel.response.{tk}"),
        &format!("response sent to a cancelled request ({tk})"),
        Better::Lower,
        kind,
        Cell::num(r.responses as f64, text),
    );
    if t == Transport::Http {
        let closed: Vec<Duration> = r.sse_close.iter().flatten().copied().collect();
        let open = r.sse_close.len() - closed.len();
        let label = "request's SSE stream closed after the cancel, p50 (http)";
        let cell = if open * 2 > r.sse_close.len() {
            Cell::num(
                cancel::SSE_WAIT.as_secs_f64() * 1e3,
                format!(
                    "open > {:.1} s in {open} of {}",
                    cancel::SSE_WAIT.as_secs_f64(),
                    r.sse_close.len()
                ),
            )
        } else {
            match percentile(&closed, 50.0) {
                Some(d) => {
                    let mut text = stats::ms(d);
                    if open > 0 {
                        text.push_str(&format!(" ({open} open)"));
                    }
                    Cell::num(d.as_secs_f64() * 1e3, text)
                }
                None => Cell::text("no runs"),
            }
        };
        report.set("cancel.sse_close.http", label, Better::Lower, kind, cell);
    }
}

async fn flood_rows(report: &mut Report, kind: Kind, client: &Client, pid: u32, reports: u32) {
    match flood::run(client, pid, reports, Duration::from_secs(90)).await {
        Ok(f) => {
            let rate = f.on_wire as f64 / f.wall.as_secs_f64().max(1e-9);
            report.set(
                "flood.wire",
                &format!("progress flood ({reports} reports): notifications on the wire"),
                Better::Lower,
                kind,
                Cell::num(
                    f.on_wire as f64,
                    format!(
                        "{} in {} ({})",
                        f.on_wire,
                        stats::ms(f.wall),
                        stats::rate(rate)
                    ),
                ),
            );
            let exact = f.completed && f.last == Some(f64::from(reports));
            let last = match f.last {
                Some(v) if exact => format!("{v} (exact)"),
                Some(v) => format!("{v}{}", if f.completed { "" } else { ", no result" }),
                None => "none".into(),
            };
            report.set(
                "flood.last",
                "progress flood: last value on the wire",
                Better::Neither,
                kind,
                Cell::text(last),
            );
            if let Some(cpu) = f.cpu {
                let per = cpu.as_secs_f64() * 1e9 / f64::from(reports);
                report.set(
                    "flood.cpu",
                    "progress flood: server CPU per report (end to end)",
                    Better::Lower,
                    kind,
                    Cell::num(per, format!("{per:.0} ns")),
                );
            }
        }
        Err(e) => fail(
            report,
            "flood.wire",
            &format!("progress flood ({reports} reports): notifications on the wire"),
            kind,
            &e,
        ),
    }
}

fn ordinal(n: usize) -> String {
    match n {
        1 => "1st".into(),
        2 => "2nd".into(),
        3 => "3rd".into(),
        n => format!("{n}th"),
    }
}

async fn mem(
    kind: Kind,
    t: Transport,
    programs: &Programs,
    counts: &[usize],
    cycles: usize,
    report: &mut Report,
) {
    let tk = t.key();
    let mut stats_out = memory::MemStats::default();
    let result = async {
        let mut srv = servers::spawn(programs, kind, t).await?;
        let client = Client::connect(&mut srv, t).await?;
        memory::run(&mut srv, &client, counts, cycles, &mut stats_out).await
    }
    .await;
    let s = stats_out;
    if let Some(idle) = s.idle {
        report.set(
            &format!("mem.idle.{tk}"),
            &format!("RSS idle ({tk})"),
            Better::Lower,
            kind,
            Cell::num(idle as f64, stats::bytes(idle as f64)),
        );
    }
    for (n, rss, per) in &s.loaded {
        report.set(
            &format!("mem.per_call.{n}.{tk}"),
            &format!("memory per in-flight call, {n} calls ({tk})"),
            Better::Lower,
            kind,
            Cell::num(
                *per,
                format!("{} (RSS {})", stats::bytes(*per), stats::bytes(*rss as f64)),
            ),
        );
    }
    if let Some(first) = counts.first() {
        let label = format!("{first} in-flight calls cancelled at once ({tk})");
        match s.survived_cancel {
            Some(true) => report.set(
                &format!("mem.survive.{tk}"),
                &label,
                Better::Neither,
                kind,
                Cell::text("survives"),
            ),
            Some(false) => report.set(
                &format!("mem.survive.{tk}"),
                &label,
                Better::Neither,
                kind,
                Cell::text("**crashed / unresponsive**"),
            ),
            None => {}
        }
    }
    if let (Some(after), Some(peak)) = (s.after_cancel, s.peak) {
        report.set(
            &format!("mem.after_cancel.{tk}"),
            &format!(
                "RSS after cancelling {} calls (vs loaded peak) ({tk})",
                counts.last().unwrap_or(&0)
            ),
            Better::Neither,
            kind,
            Cell::num(
                after as f64 - peak as f64,
                format!(
                    "{} (peak {})",
                    stats::bytes(after as f64),
                    stats::bytes(peak as f64)
                ),
            ),
        );
    }
    let signed = |g: f64| format!("{}{}", if g >= 0.0 { "+" } else { "" }, stats::bytes(g));
    if let (Some(a), Some(&b)) = (s.after_cancel, s.after_cycles.first()) {
        let growth = b as f64 - a as f64;
        report.set(
            &format!("mem.leak.{tk}"),
            &format!("RSS growth from a 2nd load/cancel cycle ({tk})"),
            Better::Lower,
            kind,
            Cell::num(growth, signed(growth)),
        );
    }
    // Each later cycle against the one before: the largest growth, and every step.
    let steps: Vec<f64> = s
        .after_cycles
        .windows(2)
        .map(|w| w[1] as f64 - w[0] as f64)
        .collect();
    if let Some(worst) = steps.iter().copied().reduce(f64::max) {
        let each: Vec<String> = steps.iter().map(|g| signed(*g)).collect();
        report.set(
            &format!("mem.leak_later.{tk}"),
            &format!(
                "RSS growth from each further cycle, 3rd to {} ({tk})",
                ordinal(s.after_cycles.len() + 1)
            ),
            Better::Lower,
            kind,
            Cell::num(worst, each.join(", ")),
        );
    }
    if let Err(e) = result {
        fail(
            report,
            &format!("mem.error.{tk}"),
            &format!("memory scenario ({tk})"),
            kind,
            &e,
        );
    }
}

async fn idle_only(kind: Kind, t: Transport, programs: &Programs) -> anyhow::Result<u64> {
    let mut srv = servers::spawn(programs, kind, t).await?;
    let client = Client::connect(&mut srv, t).await?;
    client.request("ping", Duration::from_secs(10)).await?;
    tokio::time::sleep(Duration::from_millis(800)).await;
    crate::procfs::rss_bytes(srv.pid).ok_or_else(|| anyhow::anyhow!("no RSS"))
}

/// Throughput, interleaved: each round measures every (server, transport) once, so drift of
/// the machine hits them alike; the median of the rounds is reported with the range.
pub async fn throughput_phase(
    runs: &[(Kind, Transport)],
    programs: &Programs,
    opts: &Opts,
    report: &mut Report,
    stateless: bool,
) {
    use std::collections::BTreeMap;
    let mut samples: BTreeMap<(String, Kind), Vec<anyhow::Result<throughput::Rate>>> =
        BTreeMap::new();
    let mut labels: BTreeMap<String, String> = BTreeMap::new();
    for round in 0..opts.rounds.max(opts.stdio_rounds) {
        for &(kind, t) in runs {
            let rounds = if t == Transport::Stdio {
                opts.stdio_rounds
            } else {
                opts.rounds
            };
            if round >= rounds {
                continue;
            }
            for (key, label, r) in tput_once(kind, t, programs, opts, stateless).await {
                labels.insert(key.clone(), label);
                samples.entry((key, kind)).or_default().push(r);
            }
        }
    }
    for ((key, kind), rs) in samples {
        let label = labels.get(&key).cloned().unwrap_or_default();
        let mut ok: Vec<f64> = rs
            .iter()
            .filter_map(|r| r.as_ref().ok().map(|r| r.per_sec))
            .collect();
        let errors: u64 = rs
            .iter()
            .filter_map(|r| r.as_ref().ok().map(|r| r.errors))
            .sum();
        if ok.is_empty() {
            if let Some(Err(e)) = rs.into_iter().find(|r| r.is_err()) {
                fail(report, &key, &label, kind, &e);
            }
            continue;
        }
        ok.sort_by(f64::total_cmp);
        let median = ok[ok.len() / 2];
        let mut text = stats::rate(median);
        if ok.len() > 1 {
            text.push_str(&format!(
                " ({}–{})",
                stats::rate(ok[0]).trim_end_matches("/s"),
                stats::rate(ok[ok.len() - 1]).trim_end_matches("/s")
            ));
        }
        if errors > 0 {
            text.push_str(&format!(" ({errors} errors)"));
        }
        report.set(&key, &label, Better::Higher, kind, Cell::num(median, text));
    }
}

/// One round for one server on one transport: (key, label, rate) per measurement.
async fn tput_once(
    kind: Kind,
    t: Transport,
    programs: &Programs,
    opts: &Opts,
    stateless: bool,
) -> Vec<(String, String, anyhow::Result<throughput::Rate>)> {
    // The 2026 rows: the same measurements with the era's requests, keys under `m26.`.
    let (kp, lp) = if stateless {
        ("m26.", "[2026] ")
    } else {
        ("", "")
    };
    match t {
        Transport::Stdio => {
            let r = async {
                let mut srv = servers::spawn(programs, kind, t).await?;
                throughput::stdio(&mut srv, 16, opts.warmup, opts.measure, stateless).await
            }
            .await;
            vec![(
                format!("{kp}tput.stdio.16"),
                format!("{lp}echo throughput, stdio, 16 in flight"),
                r,
            )]
        }
        Transport::Http => {
            let srv = servers::spawn(programs, kind, t).await;
            let mut out = Vec::new();
            for c in [1usize, 16, 64] {
                let key = format!("{kp}tput.http.{c}");
                let label = format!("{lp}echo throughput, HTTP, concurrency {c}");
                let r = match &srv {
                    Ok(srv) => {
                        throughput::http(srv.port, c, opts.warmup, opts.measure, stateless).await
                    }
                    Err(e) => Err(anyhow::anyhow!("{e:#}")),
                };
                out.push((key, label, r));
            }
            out
        }
    }
}

async fn resume_rows(kind: Kind, programs: &Programs, report: &mut Report) {
    let cases = [
        (
            "resume.away",
            "result of a call that finished while the client was away (http)",
            3u32,
            200u64,
            Duration::from_millis(1500),
        ),
        (
            "resume.reconnect",
            "reconnect while the call runs: GETs to the result (http)",
            10,
            100,
            Duration::ZERO,
        ),
    ];
    for (key, label, steps, delay, wait) in cases {
        let r = async {
            let srv = servers::spawn(programs, kind, Transport::Http).await?;
            resume::run(srv.port, steps, delay, wait).await
        }
        .await;
        match r {
            Ok(s) => {
                let text = if s.delivered {
                    let mut t = format!(
                        "delivered, {} GET{}",
                        s.gets,
                        if s.gets == 1 { "" } else { "s" }
                    );
                    if s.gaps > 0 || s.duplicates > 0 {
                        t.push_str(&format!(", {} gap(s), {} dup(s)", s.gaps, s.duplicates));
                    }
                    t
                } else {
                    format!("**lost** ({})", s.why.unwrap_or_default())
                };
                let value = if s.delivered {
                    s.gets as f64
                } else {
                    f64::INFINITY
                };
                report.set(key, label, Better::Lower, kind, Cell::num(value, text));
            }
            Err(e) => fail(report, key, label, kind, &e),
        }
    }
}

/// The 2026-07-28 scenarios over HTTP for one server (the throughput is measured with the
/// others, interleaved): close → stop, the silent handler, memory.
pub async fn stateless_bench(kind: Kind, programs: &Programs, opts: &Opts, report: &mut Report) {
    if !kind.has_slow_tools() {
        return;
    }
    let t = Transport::Http;
    let r = async {
        let srv = servers::spawn(programs, kind, t).await?;
        let close = stateless::close_runs(srv.port, opts.close_runs, kind.key()).await;
        let silent = stateless::silent_runs(srv.port, opts.silent_runs, kind.key()).await;
        anyhow::Ok((close, silent))
    }
    .await;
    match r {
        Ok((close, silent)) => stateless_close_rows(report, kind, &close, silent),
        Err(e) => fail(
            report,
            "m26.close.stop_p50.http",
            "[2026] stream close → handler stopped, p50 (http)",
            kind,
            &e,
        ),
    }
    let mut m = stateless::Mem::default();
    let r = async {
        let srv = servers::spawn(programs, kind, t).await?;
        stateless::memory(srv.port, srv.pid, opts.mem_stateless, &mut m).await
    }
    .await;
    stateless_mem_rows(report, kind, opts.mem_stateless, &m);
    if let Err(e) = r {
        fail(
            report,
            "m26.mem.error.http",
            "[2026] memory scenario (http)",
            kind,
            &e,
        );
    }
}

fn stateless_close_rows(
    report: &mut Report,
    kind: Kind,
    r: &stateless::CloseRuns,
    silent: (usize, usize, Option<String>),
) {
    let ok = r.runs - r.failed;
    if let Some(e) = &r.first_error {
        eprintln!(
            "  {}: 2026 close runs: {} failed, first: {e}",
            kind.key(),
            r.failed
        );
    }
    for (q, name) in [(50.0, "p50"), (99.0, "p99")] {
        let key = format!("m26.close.stop_{name}.http");
        let label = format!("[2026] stream close → handler stopped (its last step), {name} (http)");
        let cell = match percentile(&r.stop, q) {
            Some(_) if r.kept_running * 2 > ok => Cell::num(
                f64::INFINITY,
                format!("never: still running in {} of {ok}", r.kept_running),
            ),
            Some(d) => Cell::num(d.as_secs_f64() * 1e3, stats::ms(d)),
            None => Cell::text(format!("{} runs failed", r.failed)),
        };
        report.set(&key, &label, Better::Lower, kind, cell);
    }
    let mut text = format!("{} in {ok} runs", r.steps_after);
    if r.kept_running > 0 {
        text.push_str(&format!(" ({} kept running)", r.kept_running));
    }
    if r.failed > 0 {
        text.push_str(&format!(" ({} runs failed)", r.failed));
    }
    let cell = if ok == 0 {
        Cell::text(text)
    } else {
        Cell::num(r.steps_after as f64, text)
    };
    report.set(
        "m26.close.after.http",
        "[2026] progress produced after the close (steps recorded; the stream is gone)",
        Better::Lower,
        kind,
        cell,
    );
    let (stopped, sok, err) = silent;
    if let Some(e) = &err {
        eprintln!("  {}: 2026 silent runs: {e}", kind.key());
    }
    let cell = if sok == 0 {
        Cell::text(format!(
            "error: {}",
            err.unwrap_or_default().chars().take(60).collect::<String>()
        ))
    } else {
        Cell::num(
            (sok - stopped) as f64,
            format!("{stopped} of {sok} stopped"),
        )
    };
    report.set(
        "m26.close.silent.http",
        "[2026] silent handler (nothing written yet) stopped by the close",
        Better::Lower,
        kind,
        cell,
    );
}

fn stateless_mem_rows(report: &mut Report, kind: Kind, n: usize, m: &stateless::Mem) {
    let b = |v: u64| stats::bytes(v as f64);
    if let Some(idle) = m.idle {
        report.set(
            "m26.mem.idle.http",
            "[2026] RSS idle (http)",
            Better::Lower,
            kind,
            Cell::num(idle as f64, b(idle)),
        );
        if let Some(loaded) = m.loaded {
            let per = (loaded as f64 - idle as f64) / n as f64;
            report.set(
                &format!("m26.mem.per_call.{n}.http"),
                &format!("[2026] memory per in-flight call, {n} streams (http)"),
                Better::Lower,
                kind,
                Cell::num(per, format!("{} (RSS {})", stats::bytes(per), b(loaded))),
            );
        }
    }
    if let (Some(loaded), Some(after)) = (m.loaded, m.after_close) {
        report.set(
            "m26.mem.after_close.http",
            &format!("[2026] RSS after closing {n} in-flight streams at once (vs loaded)"),
            Better::Neither,
            kind,
            Cell::num(
                after as f64 - loaded as f64,
                format!("{} (loaded {})", b(after), b(loaded)),
            ),
        );
    }
    if let Some(s) = m.survived {
        report.set(
            "m26.mem.survive.http",
            &format!("[2026] {n} in-flight streams closed at once"),
            Better::Neither,
            kind,
            Cell::text(if s {
                "survives"
            } else {
                "**crashed / unresponsive**"
            }),
        );
    }
    if let (Some(a), Some(b2)) = (m.after_close, m.after_close_2) {
        let g = b2 as f64 - a as f64;
        report.set(
            "m26.mem.leak.http",
            "[2026] RSS growth from a 2nd load/close cycle (http)",
            Better::Lower,
            kind,
            Cell::num(
                g,
                format!("{}{}", if g >= 0.0 { "+" } else { "" }, stats::bytes(g)),
            ),
        );
    }
}

/// Sequential echo round trips (p50/p99) of every (server, transport); with both rmcp and the
/// proxy measured, a note says what the proxy adds and keeps.
pub async fn latency_phase(
    runs: &[(Kind, Transport)],
    programs: &Programs,
    opts: &Opts,
    report: &mut Report,
) {
    for &(kind, t) in runs {
        let samples = async {
            let mut srv = servers::spawn(programs, kind, t).await?;
            match t {
                Transport::Stdio => latency::stdio(&mut srv, opts.warmup, opts.measure).await,
                Transport::Http => latency::http(srv.port, opts.warmup, opts.measure).await,
            }
        }
        .await;
        for (p, name) in [(50.0, "p50"), (99.0, "p99")] {
            let key = format!("lat.{}.{name}", t.key());
            let label = format!("echo round trip {name}, {}, one call at a time", t.key());
            match &samples {
                Ok(v) => {
                    if let Some(d) = stats::percentile(v, p) {
                        let us = d.as_secs_f64() * 1e6;
                        report.set(
                            &key,
                            &label,
                            Better::Lower,
                            kind,
                            Cell::num(us, format!("{us:.0} µs")),
                        );
                    }
                }
                Err(e) => fail(report, &key, &label, kind, e),
            }
        }
    }
}
