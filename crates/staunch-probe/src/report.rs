//! The probe's findings: one row per check, PASS/WARN/FAIL/SKIP with the evidence, as a
//! table for people and JSON for scripts.

use serde::Serialize;
use serde_json::Value;

/// A check's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Status {
    /// The server does what the spec asks.
    Pass,
    /// Allowed, or not observable, but worth knowing.
    Warn,
    /// The server breaks a rule or loses work.
    Fail,
    /// Not applicable to this server or transport.
    Skip,
}

impl Status {
    fn label(self) -> &'static str {
        match self {
            Self::Pass => "PASS",
            Self::Warn => "WARN",
            Self::Fail => "FAIL",
            Self::Skip => "SKIP",
        }
    }
}

/// One check.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    /// Stable id (`cancel.routed`, …).
    pub id: &'static str,
    /// The verdict.
    pub status: Status,
    /// One sentence with the figures behind the verdict.
    pub evidence: String,
    /// The raw figures.
    pub data: Value,
}

impl Check {
    /// A check with its id, verdict, evidence sentence and raw figures.
    pub fn new(id: &'static str, status: Status, evidence: impl Into<String>, data: Value) -> Self {
        Self {
            id,
            status,
            evidence: evidence.into(),
            data,
        }
    }
}

/// Counts per verdict.
#[derive(Debug, Default, Serialize)]
pub struct Summary {
    /// Checks that passed.
    pub pass: usize,
    /// Checks that warned.
    pub warn: usize,
    /// Checks that failed.
    pub fail: usize,
    /// Checks that were skipped.
    pub skip: usize,
}

/// The whole run.
#[derive(Debug, Serialize)]
pub struct ProbeReport {
    /// The server probed: its URL or command line.
    pub target: String,
    /// `Streamable HTTP` or `stdio`.
    pub transport: &'static str,
    /// What the server said of itself: name, version, protocol version, capabilities, era; null
    /// until connected.
    pub server: Value,
    /// The checks, in the order run.
    pub checks: Vec<Check>,
    /// Counts per verdict.
    pub summary: Summary,
    /// How long the run took, in milliseconds.
    pub duration_ms: u64,
}

impl ProbeReport {
    /// An empty report on `target` over `transport`.
    pub fn new(target: String, transport: &'static str) -> Self {
        Self {
            target,
            transport,
            server: Value::Null,
            checks: Vec::new(),
            summary: Summary::default(),
            duration_ms: 0,
        }
    }

    /// Adds a check and counts its verdict.
    pub fn push(&mut self, c: Check) {
        match c.status {
            Status::Pass => self.summary.pass += 1,
            Status::Warn => self.summary.warn += 1,
            Status::Fail => self.summary.fail += 1,
            Status::Skip => self.summary.skip += 1,
        }
        self.checks.push(c);
    }

    /// Whether any check failed.
    pub fn failed(&self) -> bool {
        self.summary.fail > 0
    }

    /// The report as a table for people: the server, one row per check, then the counts.
    pub fn render_table(&self) -> String {
        let mut out = format!("staunch probe: {} ({})\n", self.target, self.transport);
        if let Some(name) = self.server["name"].as_str() {
            out.push_str(&format!(
                "server: {} {}, protocol {}",
                name,
                self.server["version"].as_str().unwrap_or(""),
                self.server["protocol_version"].as_str().unwrap_or("?")
            ));
            if let Some(era) = self.server["era"].as_str() {
                out.push_str(&format!(" ({era} era)"));
            }
            out.push('\n');
        }
        out.push('\n');
        let width = self
            .checks
            .iter()
            .map(|c| c.id.len())
            .max()
            .unwrap_or(5)
            .max(5);
        out.push_str(&format!("{:width$}  RESULT  EVIDENCE\n", "CHECK"));
        for c in &self.checks {
            out.push_str(&format!(
                "{:width$}  {:6}  {}\n",
                c.id,
                c.status.label(),
                c.evidence
            ));
        }
        let s = &self.summary;
        out.push_str(&format!(
            "\n{} passed, {} warned, {} failed, {} skipped in {:.1} s\n",
            s.pass,
            s.warn,
            s.fail,
            s.skip,
            self.duration_ms as f64 / 1000.0
        ));
        out
    }
}
