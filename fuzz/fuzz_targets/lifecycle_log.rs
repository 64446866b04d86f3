//! The lifecycle-log reader and `staunch audit`: any bytes, line by line, never panic; the
//! report renders as a table and as JSON, and counts every line it was given.
#![no_main]

use libfuzzer_sys::fuzz_target;
use staunch_audit::{AuditOptions, Auditor};

fuzz_target!(|data: &[u8]| {
    for line in data.split(|&b| b == b'\n') {
        let _ = staunch_lifecycle::parse_line(line);
    }
    let mut audit = Auditor::new(&AuditOptions::default());
    let mut lines = 0u64;
    for line in data.split(|&b| b == b'\n') {
        audit.feed_line(line);
        lines += 1;
    }
    let report = audit.finish();
    let _ = report.render_table();
    let json: serde_json::Value =
        serde_json::from_str(&report.to_json_pretty()).expect("the report is JSON");
    assert!(json.is_object());
    assert_eq!(report.summary.lines, lines, "every line is counted");
});
