//! Property-ish: concurrent writers interleave sessions' lines arbitrarily, so the findings must
//! depend only on timestamps and each session's own line order. Shuffle the interleaving of all
//! fixtures' sessions many ways (a fixed-seed generator, so failures reproduce) and demand the
//! very same report.

use staunch_audit::{AuditOptions, audit_str};

const FIXTURES: &[&str] = &[
    "clean.jsonl",
    "orphans.jsonl",
    "minimal_server.jsonl",
    "retry.jsonl",
    "unknown_cancels.jsonl",
    "never_ended.jsonl",
    "slow_tool.jsonl",
];

/// All fixtures' lines, split per session (each keeps its order); lines without a session
/// (ignored events) form their own stream.
fn streams() -> Vec<Vec<String>> {
    let mut by_session: Vec<(String, Vec<String>)> = Vec::new();
    for name in FIXTURES {
        let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
        for line in std::fs::read_to_string(path).unwrap().lines() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            let session = v["session"].as_str().unwrap_or("").to_owned();
            match by_session.iter_mut().find(|(s, _)| *s == session) {
                Some((_, lines)) => lines.push(line.to_owned()),
                None => by_session.push((session, vec![line.to_owned()])),
            }
        }
    }
    by_session.into_iter().map(|(_, l)| l).collect()
}

/// A tiny xorshift generator: no dependency, same sequence everywhere.
struct Rng(u64);
impl Rng {
    fn next(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

fn interleave(streams: &[Vec<String>], rng: &mut Rng) -> String {
    let mut pos = vec![0; streams.len()];
    let mut out = String::new();
    loop {
        let open: Vec<usize> = (0..streams.len())
            .filter(|&i| pos[i] < streams[i].len())
            .collect();
        if open.is_empty() {
            return out;
        }
        let i = open[rng.next(open.len())];
        out.push_str(&streams[i][pos[i]]);
        out.push('\n');
        pos[i] += 1;
    }
}

#[test]
fn interleaving_sessions_does_not_change_findings() {
    let streams = streams();
    assert!(
        streams.len() >= 10,
        "enough sessions to make this meaningful"
    );
    let opts = AuditOptions::default();

    // Baseline: one session after another.
    let sequential: String = streams.iter().flatten().map(|l| format!("{l}\n")).collect();
    let baseline = audit_str(&sequential, &opts);
    // It found something of every kind, so every kind is being checked.
    assert!(baseline.orphaned.count > 0 && baseline.slow_to_stop.count > 0);
    assert!(baseline.retry_clusters.len() >= 3);
    assert!(baseline.unknown_cancels.count > 0 && !baseline.never_ended.is_empty());

    // Sessions in reverse order.
    let reversed: String = streams
        .iter()
        .rev()
        .flatten()
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(audit_str(&reversed, &opts), baseline);

    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for round in 0..200 {
        let log = interleave(&streams, &mut rng);
        let report = audit_str(&log, &opts);
        assert_eq!(report, baseline, "round {round}:\n{log}");
        if round == 0 {
            assert_eq!(report.render_table(), baseline.render_table());
            assert_eq!(report.to_json_pretty(), baseline.to_json_pretty());
        }
    }
}
