//! Whatever bytes a log holds, the audit reports; it never panics. Fixture logs are corrupted
//! at random (fixed seed) and spiked with extreme values, and every result must still add up.

use staunch_audit::{AuditOptions, audit_reader};

struct Rng(u64);
impl Rng {
    fn next(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

fn all_fixtures() -> Vec<u8> {
    let dir = format!("{}/tests/fixtures", env!("CARGO_MANIFEST_DIR"));
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    names.sort();
    names
        .iter()
        .flat_map(|p| std::fs::read(p).unwrap())
        .collect()
}

#[test]
fn corrupted_logs_never_panic() {
    let clean = all_fixtures();
    let junk: &[&[u8]] = &[
        b"\"",
        b"{",
        b"}",
        b"\n",
        b"\xff",
        b"null",
        b"-1",
        b"1e308",
        b"18446744073709551615",
        b"9223372036854775807",
        b"\"9999-12-31T23:59:59.999Z\"",
        b"\"0000-01-01T00:00:00Z\"",
        b"[]",
        b"\"request.end\"",
        b"\"aborted\"",
        b"\"atomic\"",
        b"\"unknown_id\"",
    ];
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let opts = AuditOptions {
        examples: 3,
        ..AuditOptions::default()
    };
    for _ in 0..300 {
        let mut log = clean.clone();
        for _ in 0..1 + rng.next(20) {
            let at = rng.next(log.len());
            let j = junk[rng.next(junk.len())];
            // Overwrite a few bytes or insert, at random.
            if rng.next(2) == 0 {
                let end = (at + j.len()).min(log.len());
                log.splice(at..end, j.iter().copied());
            } else {
                log.splice(at..at, j.iter().copied());
            }
        }
        let r = audit_reader(&log[..], &opts).expect("in-memory read");
        // The counts stay consistent with each other.
        assert!(r.malformed.examples.len() <= 3);
        assert!(r.summary.events + r.malformed.count <= r.summary.lines);
        let orphan_examples: u64 = r.orphaned.by_tool.iter().map(|g| g.count).sum();
        assert_eq!(orphan_examples, r.orphaned.count);
        let _ = r.render_table();
        let _ = r.to_json_pretty();
    }
}

#[test]
fn extreme_values_are_findings_not_crashes() {
    let log = r#"{"ts":"0000-01-01T00:00:00.000Z","event":"request.start","request_id":1,"session":"s","tool":"t","args_fingerprint":"f"}
{"ts":"9999-12-31T23:59:59.999Z","event":"request.aborted","request_id":1,"session":"s","since_cancel_ms":18446744073709551615}
{"ts":"9999-12-31T23:59:59.999Z","event":"request.start","request_id":1e300,"session":"s","tool":"t","args_fingerprint":"f"}
{"ts":"0000-01-01T00:00:00.000Z","event":"request.aborted","request_id":1e300,"session":"s","since_cancel_ms":9223372036854775807}
{"ts":"9999-12-31T23:59:59.999Z","event":"request.end","request_id":1e300,"session":"s","outcome":"aborted","duration_ms":1.7e19}
{"ts":"9999-12-31T23:59:59.999Z","event":"request.end","request_id":1,"session":"s","outcome":"aborted","duration_ms":18446744073709551615,"after_cancel_ms":18446744073709551615}
"#;
    let r = audit_reader(log.as_bytes(), &AuditOptions::default()).unwrap();
    assert_eq!(r.orphaned.count, 2);
    assert_eq!(r.malformed.count, 0);
    assert!(r.render_table().contains("ORPHANED"));
}
