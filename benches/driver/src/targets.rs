//! DESIGN.md's Targets table, checked against what was measured. A row that was not measured
//! in this run gets no verdict (and says so).

use crate::report::Report;
use crate::servers::Kind;

const KIB: f64 = 1024.0;

/// Sets the target text and verdict of every row that has one.
pub fn check(r: &mut Report, flood_burst_rate: (f64, f64)) {
    let s = |r: &Report, key: &str| r.value(key, Kind::Staunch);
    for t in ["stdio", "http"] {
        // "Within the running step": the tool's steps are 10 ms; 5 ms more for the wire.
        let p99 = s(r, &format!("cancel.stop_p99.{t}"));
        r.set_target(
            &format!("cancel.late_progress.{t}"),
            "quiet within the running step (cancel → last progress p99 ≤ 10 ms step + 5 ms)",
            p99.map(|ms| ms <= 15.0),
        );
        let v = s(r, &format!("cancel.response.{t}"));
        r.set_target(
            &format!("cancel.response.{t}"),
            "never",
            v.map(|v| v == 0.0),
        );
        let v = s(r, &format!("ping.p99.{t}"));
        let rmcp = r.value(&format!("ping.p99.{t}"), Kind::Rmcp);
        let verdict = match (v, rmcp) {
            (Some(a), Some(b)) => Some(a <= b),
            _ => None,
        };
        r.set_target(&format!("ping.p99.{t}"), "≤ rmcp", verdict);
        let survive = r
            .get(&format!("mem.survive.{t}"), Kind::Staunch)
            .map(|c| c.text == "survives");
        r.set_target(
            &format!("mem.survive.{t}"),
            "survives; every resource freed",
            survive,
        );
        // The cell's value is RSS after the cancel minus the loaded peak.
        let past_peak = s(r, &format!("mem.after_cancel.{t}"));
        r.set_target(
            &format!("mem.after_cancel.{t}"),
            "no growth past the loaded peak",
            past_peak.map(|g| g <= 1024.0 * KIB),
        );
        let leak = s(r, &format!("mem.leak.{t}"));
        // RSS is page-granular and the allocator keeps freed pages: allow 1 MiB of noise.
        r.set_target(
            &format!("mem.leak.{t}"),
            "a 2nd cycle adds nothing (≤ 1 MiB noise)",
            leak.map(|g| g <= 1024.0 * KIB),
        );
        let later = s(r, &format!("mem.leak_later.{t}"));
        r.set_target(
            &format!("mem.leak_later.{t}"),
            "each adds nothing (≤ 1 MiB noise)",
            later.map(|g| g <= 1024.0 * KIB),
        );
    }
    for n in [1000, 10000] {
        let key = format!("mem.per_call.{n}.stdio");
        let v = s(r, &key);
        r.set_target(&key, "≤ 4 KiB", v.map(|b| b <= 4.0 * KIB));
        let key = format!("mem.per_call.{n}.http");
        let v = s(r, &key);
        r.set_target(
            &key,
            "≤ 16 KiB incl. connection",
            v.map(|b| b <= 16.0 * KIB),
        );
    }
    let close = s(r, "cancel.sse_close.http");
    r.set_target(
        "cancel.sse_close.http",
        "closed within a few ms (≤ 10 ms)",
        close.map(|ms| ms <= 10.0),
    );
    for key in [
        "tput.stdio.16",
        "tput.http.1",
        "tput.http.16",
        "tput.http.64",
    ] {
        let v = s(r, key);
        let bare = r.value(key, Kind::Bare);
        let verdict = match (v, bare) {
            (Some(a), Some(b)) if b > 0.0 => Some(a >= 0.6 * b),
            _ => None,
        };
        let text = match (v, bare) {
            (Some(a), Some(b)) if b > 0.0 => {
                format!("≥ 60 % of the bare ceiling (is {:.0} %)", 100.0 * a / b)
            }
            _ => "≥ 60 % of the bare ceiling".to_string(),
        };
        r.set_target(key, &text, verdict);
    }
    // Flood: the wire held to burst + rate × duration (+1 for the flush before the response).
    let (burst, rate) = flood_burst_rate;
    if let Some(cell) = r.get("flood.wire", Kind::Staunch) {
        let wall_s = cell
            .text
            .split(" in ")
            .nth(1)
            .and_then(|t| t.split(" ms").next())
            .and_then(|t| t.trim().parse::<f64>().ok())
            .map(|ms| ms / 1000.0);
        let allowed = wall_s.map(|w| burst + rate * w + 2.0);
        let verdict = match (cell.value, allowed) {
            (Some(n), Some(a)) => Some(n <= a),
            _ => None,
        };
        r.set_target(
            "flood.wire",
            &format!("held to the limit (burst {burst:.0} + {rate:.0}/s)"),
            verdict,
        );
    }
    let exact = r
        .get("flood.last", Kind::Staunch)
        .map(|c| c.text.contains("exact"));
    r.set_target("flood.last", "last value exact", exact);
    let cpu = s(r, "flood.cpu");
    r.set_target(
        "flood.cpu",
        "< 100 ns per coalesced report (micro-benchmark; this row is end to end)",
        cpu.map(|ns| ns < 100.0),
    );
    let away = r
        .get("resume.away", Kind::Staunch)
        .map(|c| c.text.starts_with("delivered"));
    r.set_target("resume.away", "delivered by default", away);
    let gets = r
        .get("resume.reconnect", Kind::Staunch)
        .map(|c| c.text == "delivered, 1 GET");
    r.set_target("resume.reconnect", "one GET, no gap, no duplicate", gets);
    // The 2026-07-28 era: closing the stream is the cancel.
    let p99 = s(r, "m26.close.stop_p99.http");
    r.set_target(
        "m26.close.stop_p99.http",
        "stopped within the running step (≤ 10 ms step + 5 ms)",
        p99.map(|ms| ms <= 15.0),
    );
    let after = s(r, "m26.close.after.http");
    r.set_target(
        "m26.close.after.http",
        "nothing after the close",
        after.map(|n| n == 0.0),
    );
    let silent = s(r, "m26.close.silent.http");
    r.set_target(
        "m26.close.silent.http",
        "stopped even when silent",
        silent.map(|n| n == 0.0),
    );
    for key in [
        "m26.tput.stdio.16",
        "m26.tput.http.1",
        "m26.tput.http.16",
        "m26.tput.http.64",
    ] {
        let v = s(r, key);
        let bare = r.value(key, Kind::Bare);
        let (verdict, text) = match (v, bare) {
            (Some(a), Some(b)) if b > 0.0 => (
                Some(a >= 0.6 * b),
                format!("≥ 60 % of the bare ceiling (is {:.0} %)", 100.0 * a / b),
            ),
            _ => (None, "≥ 60 % of the bare ceiling".to_string()),
        };
        r.set_target(key, &text, verdict);
    }
    let keys: Vec<String> = r
        .rows
        .iter()
        .filter(|row| row.key.starts_with("m26.mem.per_call."))
        .map(|row| row.key.clone())
        .collect();
    for key in keys {
        let v = s(r, &key);
        r.set_target(
            &key,
            "≤ 16 KiB incl. connection",
            v.map(|b| b <= 16.0 * KIB),
        );
    }
    let survive = r
        .get("m26.mem.survive.http", Kind::Staunch)
        .map(|c| c.text == "survives");
    r.set_target("m26.mem.survive.http", "survives", survive);
    let leak = s(r, "m26.mem.leak.http");
    r.set_target(
        "m26.mem.leak.http",
        "a 2nd cycle adds ≤ 1 MiB",
        leak.map(|g| g <= 1024.0 * KIB),
    );
    for tool in ["cpu_count", "stubborn_count"] {
        // staunch stops their progress at the cancel itself: only what was already on its way
        // may arrive, so the same bound as the cooperative tool (the value is the p99 in ms).
        let key = format!("cancel.late_progress.{tool}.stdio");
        let p99 = s(r, &key);
        r.set_target(
            &key,
            "quiet within the running step, like a cooperative tool (peers never stop these)",
            p99.map(|ms| ms <= 15.0),
        );
    }
}

/// `staunch proxy` against the rmcp peer it fronts, when both were measured: throughput kept
/// (target ≥ 70 %) and p50 latency added (target ≤ 50 µs), as notes under the table.
pub fn proxy_overhead(r: &mut Report) {
    for proxy in [Kind::Proxy, Kind::ProxyRetrySafe] {
        let name = proxy.key();
        for key in [
            "tput.stdio.16",
            "tput.http.1",
            "tput.http.16",
            "tput.http.64",
        ] {
            if let (Some(p), Some(d)) = (r.value(key, proxy), r.value(key, Kind::Rmcp))
                && d > 0.0
            {
                let kept = 100.0 * p / d;
                let verdict = if kept >= 70.0 { "meets" } else { "misses" };
                r.notes.push(format!(
                    "{name} {key}: keeps {kept:.0} % of rmcp's direct throughput ({verdict} ≥ 70 %)"
                ));
            }
        }
        for t in ["stdio", "http"] {
            let key = format!("lat.{t}.p50");
            if let (Some(p), Some(d)) = (r.value(&key, proxy), r.value(&key, Kind::Rmcp)) {
                let added = p - d;
                let verdict = if added <= 50.0 { "meets" } else { "misses" };
                r.notes.push(format!(
                    "{name} {key}: adds {added:.0} µs to rmcp's direct p50 ({verdict} ≤ 50 µs)"
                ));
            }
        }
    }
}
