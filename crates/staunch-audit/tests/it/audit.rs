//! Each fixture under `tests/fixtures/` is a hand-written log with one kind of finding; each
//! test asserts that finding specifically, plus that nothing else is reported.

use std::time::Duration;

use serde_json::{Value, json};
use staunch_audit::report::{ClusterKind, UnknownCancelKind};
use staunch_audit::{AuditOptions, MAX_LINE_BYTES, Report, RequestId, audit_reader, audit_str};

fn fixture(name: &str) -> String {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn audit(name: &str) -> Report {
    audit_str(&fixture(name), &AuditOptions::default())
}

fn num(n: u64) -> RequestId {
    RequestId::Number(n.into())
}

fn string(s: &str) -> RequestId {
    RequestId::String(s.to_owned())
}

fn tool<'a>(r: &'a Report, name: &str) -> &'a staunch_audit::report::ToolStats {
    r.tools
        .iter()
        .find(|t| t.tool.as_deref() == Some(name))
        .unwrap_or_else(|| panic!("no stats for {name}: {:?}", r.tools))
}

#[test]
fn clean_log_with_a_promptly_cancelled_call() {
    let r = audit("clean.jsonl");
    assert!(r.is_clean(), "{}", r.render_table());
    assert!(r.summary.clean);
    assert_eq!(r.orphaned.count, 0);
    // Stopped 3 ms after its cancel: below the 100 ms threshold, so not slow to stop either.
    assert_eq!(r.slow_to_stop.count, 0);
    // `not_cancellable` is not an unknown id.
    assert_eq!(r.unknown_cancels.count, 0);
    assert_eq!(r.summary.requests, 4);
    assert_eq!(r.summary.ended, 4);

    let slow = tool(&r, "slow_count");
    assert_eq!((slow.calls, slow.cancelled, slow.orphaned), (1, 1, 0));
    assert_eq!(slow.outcomes.get("cancelled"), Some(&1));
    let echo = tool(&r, "echo");
    assert_eq!(
        (echo.calls, echo.p50_ms, echo.p95_ms, echo.max_ms),
        (2, Some(4), Some(6), Some(6))
    );
    // A request that is not a tool call is grouped under its method.
    assert!(
        r.tools
            .iter()
            .any(|t| t.tool.is_none() && t.method.as_deref() == Some("initialize"))
    );

    let text = r.render_table();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[1],
        "clean: no orphaned work, no retry clusters, no unknown cancels, no unended requests"
    );
    assert!(!text.contains("NOT CLEAN"));
    assert!(text.contains("Tools (slowest p95 first)"));
    // The only other section is the per-tool table.
    for section in [
        "Orphaned",
        "Slow to stop",
        "Retry",
        "unknown requests",
        "Never ended",
    ] {
        assert!(!text.contains(section), "{section} in:\n{text}");
    }
}

#[test]
fn late_finish_and_aborted_are_orphaned_and_cancelled_is_not() {
    let r = audit("orphans.jsonl");
    assert!(!r.is_clean());
    assert_eq!(r.orphaned.count, 3);

    // Worst tool first: export_report ran 48.2 s past its cancel.
    let by_tool = &r.orphaned.by_tool;
    assert_eq!(by_tool.len(), 2);
    assert_eq!(by_tool[0].tool.as_deref(), Some("export_report"));
    assert_eq!(by_tool[0].count, 2);
    let worst: Vec<_> = by_tool[0]
        .worst
        .iter()
        .map(|o| (o.request_id.clone(), o.outcome.as_str(), o.after_cancel_ms))
        .collect();
    assert_eq!(
        worst,
        vec![
            (num(1), "late_finish", Some(48_200)),
            (num(4), "late_finish", Some(2_500))
        ]
    );
    let first = &by_tool[0].worst[0];
    assert_eq!(first.session, "http-a");
    assert_eq!(first.start.as_deref(), Some("2026-11-29T10:00:00.000Z"));
    assert_eq!(first.cancel.as_deref(), Some("2026-11-29T10:00:30.000Z"));
    assert_eq!(first.end, "2026-11-29T10:01:18.200Z");
    assert_eq!(first.duration_ms, Some(78_200));

    // The aborted call's end has no after_cancel_ms: computed from the cancel's timestamp.
    assert_eq!(by_tool[1].tool.as_deref(), Some("stubborn_sync"));
    let stubborn = &by_tool[1].worst[0];
    assert_eq!(stubborn.request_id, string("s-1"));
    assert_eq!(stubborn.outcome, "aborted");
    assert_eq!(stubborn.after_cancel_ms, Some(5_002));

    // slow_count: id 2 stopped 3 ms after its cancel (fine), id 3 took 350 ms (slow to stop).
    assert_eq!(r.slow_to_stop.count, 1);
    let slow = &r.slow_to_stop.by_tool[0];
    assert_eq!(slow.tool.as_deref(), Some("slow_count"));
    assert_eq!(slow.worst[0].request_id, num(3));
    assert_eq!(slow.worst[0].after_cancel_ms, Some(350));
    let sc = tool(&r, "slow_count");
    assert_eq!((sc.calls, sc.cancelled, sc.orphaned), (2, 2, 0));
    let ex = tool(&r, "export_report");
    assert_eq!((ex.calls, ex.cancelled, ex.orphaned), (2, 2, 2));

    // A raised threshold turns the slow stop into a fine one.
    let lenient = AuditOptions {
        slow_stop_threshold: Duration::from_millis(500),
        ..AuditOptions::default()
    };
    let r2 = audit_str(&fixture("orphans.jsonl"), &lenient);
    assert_eq!(r2.slow_to_stop.count, 0);
    assert_eq!(r2.orphaned.count, 3);

    assert!(r.retry_clusters.is_empty());
    assert!(r.never_ended.is_empty());
    assert_eq!(r.unknown_cancels.count, 0);

    let text = r.render_table();
    assert!(
        text.contains("NOT CLEAN: 3 orphaned, 1 slow to stop\n"),
        "{text}"
    );
    assert!(text.contains("Orphaned work: ran past their cancel (3)"));
    assert!(text.contains("48.2 s"));
}

#[test]
fn a_server_without_late_finish_is_audited_from_the_minimal_subset() {
    let r = audit("minimal_server.jsonl");
    // `ok` 2.25 s after the cancel is orphaned work, with both durations from timestamps.
    assert_eq!(r.orphaned.count, 1);
    let o = &r.orphaned.by_tool[0].worst[0];
    assert_eq!(r.orphaned.by_tool[0].tool.as_deref(), Some("fetch_page"));
    assert_eq!(
        (o.outcome.as_str(), o.after_cancel_ms, o.duration_ms),
        ("ok", Some(2_250), Some(12_250))
    );
    // An atomic tool that ignored its cancel on purpose and finished is not.
    let w = tool(&r, "write_row");
    assert_eq!((w.calls, w.cancelled, w.orphaned), (1, 1, 0));
}

#[test]
fn retry_while_the_first_attempt_still_runs_is_the_dangerous_cluster() {
    let r = audit("retry.jsonl");
    assert!(!r.is_clean());
    let kinds: Vec<_> = r
        .retry_clusters
        .iter()
        .map(|c| {
            (
                c.tool.as_str(),
                c.args_fingerprint.as_str(),
                c.kind,
                c.members.len(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        vec![
            (
                "export_report",
                "abcdef0123456789",
                ClusterKind::Overlapping,
                2
            ),
            (
                "send_email",
                "0000000000000e0e",
                ClusterKind::AfterFailure,
                2
            ),
            ("get_export", "9999999999999999", ClusterKind::Repeat, 2),
        ]
    );
    let c = &r.retry_clusters[0];
    assert_eq!(c.first_start, "2026-11-29T12:00:00.000Z");
    assert_eq!(c.last_start, "2026-11-29T12:01:02.000Z");
    let m: Vec<_> = c
        .members
        .iter()
        .map(|m| {
            (
                m.session.as_str(),
                m.request_id.clone(),
                m.outcome.as_deref(),
                m.earlier_running.clone(),
            )
        })
        .collect();
    assert_eq!(
        m,
        vec![
            ("agent-1", num(1), Some("late_finish"), vec![]),
            ("agent-2", num(1), Some("ok"), vec![0]),
        ]
    );
    assert_eq!(
        c.members[0].end.as_deref(),
        Some("2026-11-29T12:01:30.000Z")
    );
    // The same call again at 12:05 is outside the window: not a member.
    assert!(!c.members.iter().any(|m| m.request_id == num(3)));

    let text = r.render_table();
    assert!(
        text.contains("!!export_report args abcdef0123456789: 2 starts"),
        "{text}"
    );
    assert!(text.contains("started while #1 still running"));
    assert!(
        text.contains("NOT CLEAN: 1 orphaned, 2 retry clusters\n"),
        "{text}"
    );

    // With a 60 s window the retry 62 s later is not a cluster any more.
    let narrow = AuditOptions {
        retry_window: Duration::from_secs(60),
        ..AuditOptions::default()
    };
    let r2 = audit_str(&fixture("retry.jsonl"), &narrow);
    assert!(r2.retry_clusters.iter().all(|c| c.tool != "export_report"));
}

#[test]
fn repeated_successful_calls_are_listed_but_clean() {
    let polling: String = fixture("retry.jsonl")
        .lines()
        .filter(|l| l.contains("get_export"))
        .map(|l| format!("{l}\n"))
        .collect();
    let r = audit_str(&polling, &AuditOptions::default());
    assert_eq!(r.retry_clusters.len(), 1);
    assert_eq!(r.retry_clusters[0].kind, ClusterKind::Repeat);
    assert!(r.is_clean());
    let text = r.render_table();
    assert!(text.contains("repeated after success"));
    assert!(text.contains("no unended requests (repeated successful calls listed below)\n"));
}

#[test]
fn cancels_of_unknown_ids() {
    let r = audit("unknown_cancels.jsonl");
    assert!(!r.is_clean());
    let got: Vec<_> = r
        .unknown_cancels
        .examples
        .iter()
        .map(|c| {
            (
                c.kind,
                c.session.as_str(),
                c.request_id.clone(),
                c.ts.as_str(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            // "5" is not 5.
            (
                UnknownCancelKind::NotInFlight,
                "s1",
                string("5"),
                "2026-11-29T13:00:00.100Z"
            ),
            // Ids are per session.
            (
                UnknownCancelKind::NotInFlight,
                "s2",
                num(5),
                "2026-11-29T13:00:00.200Z"
            ),
            // After the request ended.
            (
                UnknownCancelKind::NotInFlight,
                "s1",
                num(5),
                "2026-11-29T13:00:00.400Z"
            ),
            (
                UnknownCancelKind::IgnoredUnknownId,
                "s1",
                num(99),
                "2026-11-29T13:00:00.500Z"
            ),
        ]
    );
    assert_eq!(r.unknown_cancels.count, 4);
    assert_eq!(
        r.unknown_cancels.examples[3].reason.as_deref(),
        Some("Request timed out")
    );
    // None of those cancels reached request 5, so it is an ordinary call.
    let echo = tool(&r, "echo");
    assert_eq!((echo.calls, echo.cancelled, echo.orphaned), (1, 0, 0));
    assert_eq!(r.orphaned.count, 0);
    assert!(r.render_table().contains("Cancels of unknown requests (4)"));
}

#[test]
fn requests_that_never_ended_and_reused_ids() {
    let r = audit("never_ended.jsonl");
    assert!(!r.is_clean());
    // The log's last timestamp is the job heartbeat at 14:05:00, an event audit otherwise ignores.
    assert_eq!(
        r.summary.last_ts.as_deref(),
        Some("2026-11-29T14:05:00.000Z")
    );
    let got: Vec<_> = r
        .never_ended
        .iter()
        .map(|u| {
            (
                u.request_id.clone(),
                u.tool.as_deref(),
                u.start.as_str(),
                u.running_ms,
                u.cancel_received,
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (
                num(1),
                Some("export_report"),
                "2026-11-29T14:00:00.000Z",
                300_000,
                true
            ),
            // Id 2 was used three times; only the third use is still open.
            (
                num(2),
                Some("echo"),
                "2026-11-29T14:03:00.000Z",
                120_000,
                false
            ),
        ]
    );
    let echo = tool(&r, "echo");
    assert_eq!(
        (echo.calls, echo.unended, echo.p50_ms, echo.max_ms),
        (2, 1, Some(5), Some(7))
    );
    assert_eq!(tool(&r, "export_report").unended, 1);
    let text = r.render_table();
    assert!(text.contains("Never ended (2)"), "{text}");
    assert!(text.contains("5m 00s"));
}

#[test]
fn slow_tool_percentiles_are_exact() {
    let r = audit("slow_tool.jsonl");
    // Durations 10..=200 ms in steps of 10; nearest rank: p50 is the 10th, p95 the 19th.
    let render = tool(&r, "render");
    assert_eq!(render.calls, 20);
    assert_eq!(
        (render.p50_ms, render.p95_ms, render.max_ms),
        (Some(100), Some(190), Some(200))
    );
    assert_eq!(render.cancelled, 2);
    assert_eq!(render.orphaned, 0);
    assert_eq!(render.outcomes.get("ok"), Some(&18));
    assert_eq!(render.outcomes.get("cancelled"), Some(&2));
    // `lookup` logs no duration_ms: computed from timestamps (9, 5, 7 ms).
    let lookup = tool(&r, "lookup");
    assert_eq!(
        (lookup.calls, lookup.p50_ms, lookup.p95_ms, lookup.max_ms),
        (3, Some(7), Some(9), Some(9))
    );
    // Slowest p95 first.
    assert_eq!(r.tools[0].tool.as_deref(), Some("render"));
    // Slow alone is clean.
    assert!(r.is_clean(), "{}", r.render_table());
}

#[test]
fn malformed_lines_are_counted_not_fatal() {
    let r = audit("malformed.jsonl");
    // Line 2 is plain text, not a damaged log line (as a start banner would be): skipped and
    // counted apart.
    assert_eq!(r.summary.text_lines, 1);
    assert_eq!(r.malformed.count, 7);
    let lines: Vec<u64> = r.malformed.examples.iter().map(|m| m.line).collect();
    assert_eq!(
        lines,
        vec![4, 5, 6, 7, 9],
        "first `examples` (5) in line order"
    );
    let errors: Vec<&str> = r
        .malformed
        .examples
        .iter()
        .map(|m| m.error.as_str())
        .collect();
    assert_eq!(errors[0], "not a JSON object");
    assert_eq!(errors[1], "missing `request_id`");
    assert!(errors[2].starts_with("`ts` is not RFC 3339"));
    assert_eq!(errors[3], "`request.end` without `outcome`");
    // The good start and good end around them still pair up (unknown fields ignored).
    assert_eq!(r.summary.lines, 12);
    assert_eq!((r.summary.requests, r.summary.ended), (1, 1));
    assert!(r.never_ended.is_empty());
    assert_eq!(tool(&r, "echo").max_ms, Some(5));
    // Malformed lines are reported, but do not by themselves make a log unclean.
    assert!(r.is_clean());
    let text = r.render_table();
    assert!(text.contains("Malformed lines skipped (7)"));
    assert!(
        text.contains("(1 line of plain text not JSON, skipped)"),
        "{text}"
    );
    assert!(text.contains("  line 4: not a JSON object"), "{text}");
    assert!(text.contains("  ... and 2 more"));
}

#[test]
fn hostile_bytes_never_panic() {
    let start = r#"{"ts":"2026-11-29T16:00:00.000Z","event":"request.start","request_id":1,"session":"s","tool":"t"}"#;
    let end = r#"{"ts":"2026-11-29T16:00:00.009Z","event":"request.end","request_id":1,"session":"s","outcome":"ok"}"#;
    let mut log = Vec::new();
    log.extend_from_slice(start.as_bytes());
    log.extend_from_slice(b"\r\n");
    log.extend_from_slice(&[0xff, 0xfe, b'{', b'\n']); // not UTF-8
    log.extend(std::iter::repeat_n(b'x', MAX_LINE_BYTES + 10)); // too long
    log.push(b'\n');
    log.extend_from_slice(end.as_bytes()); // last line, no newline
    let r = audit_reader(&log[..], &AuditOptions::default()).unwrap();
    assert_eq!(r.summary.lines, 4);
    assert_eq!(r.malformed.count, 2);
    assert_eq!(r.malformed.examples[1].line, 3);
    assert!(r.malformed.examples[1].error.contains("longer than"));
    assert_eq!(tool(&r, "t").max_ms, Some(9));
    assert!(r.never_ended.is_empty());

    // An empty log is a clean, empty report.
    let empty = audit_str("", &AuditOptions::default());
    assert!(empty.is_clean());
    assert_eq!(empty.summary.lines, 0);
    assert!(empty.render_table().contains("clean:"));
}

#[test]
fn io_errors_are_errors() {
    struct Failing;
    impl std::io::Read for Failing {
        fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
            Err(std::io::Error::other("disk on fire"))
        }
    }
    let err = audit_reader(std::io::BufReader::new(Failing), &AuditOptions::default()).unwrap_err();
    assert!(err.to_string().contains("disk on fire"), "{err}");
}

#[test]
fn a_rejected_duplicate_id_does_not_end_the_running_request() {
    let log = r#"{"ts":"2026-11-29T17:00:00.000Z","event":"request.start","request_id":1,"session":"s","tool":"long"}
{"ts":"2026-11-29T17:00:01.000Z","event":"request.start","request_id":1,"session":"s","tool":"long"}
{"ts":"2026-11-29T17:00:01.001Z","event":"request.end","request_id":1,"session":"s","outcome":"rejected","duration_ms":0}
{"ts":"2026-11-29T17:00:02.000Z","event":"request.cancel_received","request_id":1,"session":"s"}
{"ts":"2026-11-29T17:00:02.010Z","event":"request.end","request_id":1,"session":"s","outcome":"cancelled","duration_ms":2010}
"#;
    let r = audit_str(log, &AuditOptions::default());
    assert!(r.is_clean(), "{}", r.render_table());
    let t = tool(&r, "long");
    assert_eq!((t.calls, t.cancelled, t.max_ms), (2, 1, Some(2010)));
    assert_eq!(t.outcomes.get("rejected"), Some(&1));
}

#[test]
fn json_shape_is_stable() {
    let r = audit("orphans.jsonl");
    let v: Value = serde_json::from_str(&r.to_json_pretty()).unwrap();
    let keys = |v: &Value| -> Vec<String> {
        let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
        k.sort();
        k
    };
    assert_eq!(
        keys(&v),
        [
            "format_version",
            "malformed",
            "never_ended",
            "options",
            "orphaned",
            "orphaned_upstream",
            "retry_clusters",
            "slow_to_stop",
            "summary",
            "tools",
            "unknown_cancels"
        ]
    );
    assert_eq!(v["format_version"], 1);
    assert_eq!(
        v["options"],
        json!({"retry_window_ms": 90000, "slow_stop_threshold_ms": 100, "examples": 5})
    );
    assert_eq!(
        v["summary"],
        json!({
            "clean": false, "lines": 16, "events": 16, "requests": 5, "ended": 5,
            "ends_without_start": 0, "text_lines": 0,
            "first_ts": "2026-11-29T10:00:00.000Z", "last_ts": "2026-11-29T10:02:32.500Z",
            "dropped_lines": 0
        })
    );
    assert_eq!(v["orphaned"]["count"], 3);
    assert_eq!(
        v["orphaned"]["by_tool"][1],
        json!({
            "tool": "stubborn_sync", "method": null, "count": 1,
            "worst": [{
                "session": "http-b", "request_id": "s-1", "outcome": "aborted",
                "start": "2026-11-29T10:00:00.100Z", "cancel": "2026-11-29T10:00:30.100Z",
                "end": "2026-11-29T10:00:35.102Z", "duration_ms": 35002, "after_cancel_ms": 5002
            }]
        })
    );
    // Numeric ids stay numbers.
    assert_eq!(
        v["orphaned"]["by_tool"][0]["worst"][0]["request_id"],
        json!(1)
    );
    let ex = v["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tool"] == "export_report")
        .unwrap();
    assert_eq!(
        *ex,
        json!({
            "tool": "export_report", "method": null, "calls": 2,
            "p50_ms": 32500, "p95_ms": 78200, "max_ms": 78200,
            "cancelled": 2, "orphaned": 2, "unended": 0, "outcomes": {"late_finish": 2}
        })
    );
    assert_eq!(v["unknown_cancels"], json!({"count": 0, "examples": []}));
    assert_eq!(v["malformed"], json!({"count": 0, "examples": []}));
    assert_eq!(v["never_ended"], json!([]));

    let v: Value = serde_json::to_value(audit("retry.jsonl")).unwrap();
    assert_eq!(
        v["retry_clusters"][0],
        json!({
            "tool": "export_report", "args_fingerprint": "abcdef0123456789", "kind": "overlapping",
            "first_start": "2026-11-29T12:00:00.000Z", "last_start": "2026-11-29T12:01:02.000Z",
            "members": [
                {"session": "agent-1", "request_id": 1, "start": "2026-11-29T12:00:00.000Z",
                 "end": "2026-11-29T12:01:30.000Z", "outcome": "late_finish", "earlier_running": []},
                {"session": "agent-2", "request_id": 1, "start": "2026-11-29T12:01:02.000Z",
                 "end": "2026-11-29T12:01:40.000Z", "outcome": "ok", "earlier_running": [0]}
            ]
        })
    );
    assert_eq!(v["retry_clusters"][1]["kind"], "after_failure");
    assert_eq!(v["retry_clusters"][2]["kind"], "repeat");

    let v: Value = serde_json::to_value(audit("unknown_cancels.jsonl")).unwrap();
    assert_eq!(
        v["unknown_cancels"]["examples"][3],
        json!({"kind": "ignored_unknown_id", "ts": "2026-11-29T13:00:00.500Z", "session": "s1",
               "request_id": 99, "reason": "Request timed out"})
    );
    let v: Value = serde_json::to_value(audit("never_ended.jsonl")).unwrap();
    assert_eq!(
        v["never_ended"][0],
        json!({"session": "s", "request_id": 1, "tool": "export_report", "method": "tools/call",
               "start": "2026-11-29T14:00:00.000Z", "running_ms": 300000, "cancel_received": true})
    );
    let v: Value = serde_json::to_value(audit("malformed.jsonl")).unwrap();
    assert_eq!(
        v["malformed"]["examples"][1],
        json!({"line": 5, "error": "missing `request_id`"})
    );
}

/// staunch marks a request cancelled before it writes the `cancel_received` line, so a handler
/// finishing in between can log its end first. The late line is that request's own cancel.
#[test]
fn a_cancel_line_written_after_its_end_is_not_an_unknown_cancel() {
    let log = r#"{"ts":"2026-11-29T18:00:00.000Z","event":"request.start","request_id":1,"session":"s","tool":"slow","shape":"quick"}
{"ts":"2026-11-29T18:00:05.000Z","event":"request.end","request_id":1,"session":"s","tool":"slow","outcome":"late_finish","duration_ms":5000,"after_cancel_ms":0}
{"ts":"2026-11-29T18:00:05.001Z","event":"request.cancel_received","request_id":1,"session":"s","since_start_ms":5000}
{"ts":"2026-11-29T18:00:06.000Z","event":"request.start","request_id":2,"session":"s","tool":"write","shape":"atomic"}
{"ts":"2026-11-29T18:00:06.300Z","event":"request.end","request_id":2,"session":"s","tool":"write","outcome":"ok","duration_ms":300,"after_cancel_ms":0}
{"ts":"2026-11-29T18:00:06.301Z","event":"request.cancel_received","request_id":2,"session":"s","since_start_ms":300}
{"ts":"2026-11-29T18:00:06.301Z","event":"request.cancel_ignored","request_id":2,"session":"s","why":"atomic"}
{"ts":"2026-11-29T18:00:07.000Z","event":"request.cancel_received","request_id":1,"session":"s","reason":"a second, genuinely late cancel"}
"#;
    let r = audit_str(log, &AuditOptions::default());
    assert_eq!(r.orphaned.count, 1, "the late_finish, not the atomic write");
    assert_eq!(r.orphaned.by_tool[0].tool.as_deref(), Some("slow"));
    // Only the second cancel of id 1 is unknown: the first belonged to the ended request.
    assert_eq!(r.unknown_cancels.count, 1);
    assert_eq!(r.unknown_cancels.examples[0].ts, "2026-11-29T18:00:07.000Z");
    let w = tool(&r, "write");
    assert_eq!((w.cancelled, w.orphaned), (1, 0));
}

/// The stateless era: requests keyed by `req-<tag>-<n>` instead of a session, and an
/// input-required round (the same call sent again with the answers) that is not a retry.
#[test]
fn stateless_requests_and_input_required_rounds() {
    let log = r#"{"ts":"2026-12-01T10:00:00.000Z","event":"request.start","request_id":1,"session":"req-0a1b2c-1","method":"tools/call","tool":"greet","shape":"streaming","args_fingerprint":"44136fa355b3678a","protocol_version":"2026-07-28"}
{"ts":"2026-12-01T10:00:00.002Z","event":"request.end","request_id":1,"session":"req-0a1b2c-1","method":"tools/call","tool":"greet","outcome":"input_required","duration_ms":2}
{"ts":"2026-12-01T10:00:01.000Z","event":"request.start","request_id":2,"session":"req-0a1b2c-2","method":"tools/call","tool":"greet","shape":"streaming","args_fingerprint":"44136fa355b3678a","protocol_version":"2026-07-28"}
{"ts":"2026-12-01T10:00:01.003Z","event":"request.end","request_id":2,"session":"req-0a1b2c-2","method":"tools/call","tool":"greet","outcome":"ok","duration_ms":3}
{"ts":"2026-12-01T10:00:02.000Z","event":"request.start","request_id":3,"session":"req-0a1b2c-3","method":"tools/call","tool":"slow_count","shape":"streaming","args_fingerprint":"5f2b9c0e4a1d3b77","protocol_version":"2026-07-28"}
{"ts":"2026-12-01T10:00:02.400Z","event":"request.cancel_received","request_id":3,"session":"req-0a1b2c-3","reason":"stream closed","since_start_ms":400}
{"ts":"2026-12-01T10:00:02.401Z","event":"request.end","request_id":3,"session":"req-0a1b2c-3","method":"tools/call","tool":"slow_count","outcome":"cancelled","duration_ms":401,"after_cancel_ms":1}
"#;
    let r = audit_str(log, &AuditOptions::default());
    assert!(r.is_clean(), "{}", r.render_table());
    assert_eq!(r.malformed.count, 0);
    assert!(r.retry_clusters.is_empty(), "{:?}", r.retry_clusters);
    let greet = tool(&r, "greet");
    assert_eq!(greet.calls, 2);
    assert_eq!(greet.orphaned, 0);
    assert_eq!(greet.outcomes.get("input_required"), Some(&1));
    let slow = tool(&r, "slow_count");
    assert_eq!((slow.calls, slow.cancelled, slow.orphaned), (1, 1, 0));
}

#[test]
fn a_log_whose_writer_dropped_lines_is_not_clean_and_says_so() {
    let log = concat!(
        r#"{"ts":"2026-12-01T10:00:00.000Z","event":"request.start","request_id":1,"session":"s","method":"tools/call","tool":"echo"}"#,
        "\n",
        r#"{"ts":"2026-12-01T10:00:00.004Z","event":"request.end","request_id":1,"session":"s","method":"tools/call","tool":"echo","outcome":"ok","duration_ms":4}"#,
        "\n",
        r#"{"ts":"2026-12-01T10:00:01.000Z","event":"log.dropped","count":37}"#,
        "\n",
    );
    let r = audit_str(log, &AuditOptions::default());
    assert_eq!(r.summary.dropped_lines, 37);
    assert_eq!(
        r.malformed.count, 0,
        "log.dropped is understood, not malformed"
    );
    assert!(!r.is_clean());
    let text = r.render_table();
    assert!(text.contains("37 log lines dropped"), "{text}");
    assert_eq!(
        r.summary.last_ts.as_deref(),
        Some("2026-12-01T10:00:01.000Z")
    );
    // Without the drop the same log is clean.
    let clean = audit_str(
        &log[..log.find(r#"{"ts":"2026-12-01T10:00:01"#).unwrap()],
        &AuditOptions::default(),
    );
    assert!(clean.is_clean());
}

/// An upstream that answers its cancelled request with an error, 6 ms later (the Python SDK's
/// "Request cancelled"), stopped: the late answer is logged, but it is not orphaned work.
#[test]
fn a_late_error_answer_from_the_upstream_is_not_orphaned_work() {
    let r = audit("upstream_late_error.jsonl");
    assert_eq!(r.orphaned.count, 0);
    assert_eq!(r.orphaned_upstream.count, 0);
    assert!(r.is_clean());
}

/// Behind `staunch proxy` the downstream request stops cleanly (`cancelled`, 3 ms) while the
/// upstream goes on: its late progress and response (`upstream.late`) are orphaned work, and
/// the log is not clean.
#[test]
fn upstream_work_after_the_cancel_is_orphaned_work() {
    let r = audit("upstream_late.jsonl");
    assert!(
        r.orphaned.count == 0,
        "the downstream request itself stopped"
    );
    assert_eq!(r.orphaned_upstream.count, 1);
    let g = &r.orphaned_upstream.by_upstream[0];
    assert_eq!(g.upstream, "everything");
    assert_eq!(g.tool.as_deref(), Some("everything_longRunningOperation"));
    let o = &g.worst[0];
    assert_eq!((o.progress, o.response), (2, true));
    assert_eq!(o.after_cancel_ms, Some(5_500));
    assert_eq!(o.cancel.as_deref(), Some("2026-11-29T17:00:01.000Z"));
    assert!(!r.is_clean());
    let text = r.render_table();
    assert!(
        text.contains("1 call whose upstream kept working after the cancel"),
        "{text}"
    );
    assert!(text.contains("Orphaned upstream work"), "{text}");
    assert!(text.contains("5.5 s") || text.contains("5500"), "{text}");
}

/// A proxied call cancelled at 17:00:01.000 whose upstream sent `late` lines (`(ms after the
/// cancel, what)`).
fn proxied_call_with_late(late: &[(u64, &str)]) -> String {
    let mut log = String::from(
        r#"{"ts":"2026-11-29T17:00:00.000Z","event":"request.start","request_id":1,"session":"s","method":"tools/call","tool":"py_slow_count"}
{"ts":"2026-11-29T17:00:01.000Z","event":"request.cancel_received","request_id":1,"session":"s","reason":"timeout"}
{"ts":"2026-11-29T17:00:01.001Z","event":"upstream.cancel_sent","request_id":1,"session":"s","upstream":"py","upstream_id":3}
{"ts":"2026-11-29T17:00:01.001Z","event":"request.end","request_id":1,"session":"s","tool":"py_slow_count","outcome":"cancelled","duration_ms":1001,"after_cancel_ms":1}
"#,
    );
    for (ms, what) in late {
        log.push_str(&format!(
            r#"{{"ts":"2026-11-29T17:00:{:02}.{:03}Z","event":"upstream.late","request_id":1,"session":"s","upstream":"py","upstream_id":3,"late":"{what}"}}"#,
            1 + ms / 1000,
            ms % 1000
        ));
        log.push('\n');
    }
    log
}

/// Progress the upstream sent just after the cancel (it crossed the cancel on the wire) is
/// not work that went on, when nothing follows it later than the slow-stop threshold; work
/// that went on past it, or a late result, is.
#[test]
fn upstream_progress_that_crossed_the_cancel_is_not_orphaned_work() {
    let opts = AuditOptions::default();
    let crossed = audit_str(
        &proxied_call_with_late(&[(1, "progress"), (6, "error")]),
        &opts,
    );
    assert_eq!(crossed.orphaned_upstream.count, 0);
    assert!(crossed.is_clean());

    let went_on = audit_str(
        &proxied_call_with_late(&[(1, "progress"), (250, "progress")]),
        &opts,
    );
    assert_eq!(went_on.orphaned_upstream.count, 1);
    assert_eq!(
        went_on.orphaned_upstream.by_upstream[0].worst[0].progress,
        2
    );
    assert!(!went_on.is_clean());

    let answered = audit_str(&proxied_call_with_late(&[(2, "response")]), &opts);
    assert_eq!(answered.orphaned_upstream.count, 1, "the work was done");
}
