//! What a command-line client shows while it waits for a call: a live bar on a terminal,
//! plain lines otherwise (so logs and CI output stay readable). Everything goes to stderr;
//! stdout is the result.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

/// Resolution of the bar when the server reports fractions.
const SCALE: f64 = 1000.0;

/// Where progress goes.
pub enum View {
    /// A live bar on a terminal.
    Bar(ProgressBar),
    /// A line per report (not a terminal).
    Lines,
    /// Nothing.
    Quiet,
}

impl View {
    /// A bar on a terminal, lines elsewhere, nothing when `quiet`.
    pub fn new(quiet: bool) -> Self {
        if quiet {
            Self::Quiet
        } else if std::io::stderr().is_terminal() {
            let bar = ProgressBar::new_spinner();
            bar.enable_steady_tick(Duration::from_millis(120));
            bar.set_message("waiting for the server");
            Self::Bar(bar)
        } else {
            Self::Lines
        }
    }

    /// A progress report: `done` of `total`, with the server's message.
    pub fn progress(&self, done: f64, total: Option<f64>, message: Option<&str>) {
        let text = describe(done, total, message);
        match self {
            Self::Bar(bar) => {
                if let Some(t) = total.filter(|t| *t > 0.0) {
                    if bar.length().is_none() {
                        bar.set_style(
                            ProgressStyle::with_template("{spinner} {elapsed:>4} [{bar:30}] {msg}")
                                .unwrap_or_else(|_| ProgressStyle::default_bar())
                                .progress_chars("=> "),
                        );
                        bar.set_length(SCALE as u64);
                    }
                    bar.set_position(((done / t).clamp(0.0, 1.0) * SCALE) as u64);
                }
                bar.set_message(text);
            }
            Self::Lines => eprintln!("progress {text}"),
            Self::Quiet => {}
        }
    }

    /// A status line (job or task state, a retry).
    pub fn note(&self, text: &str) {
        match self {
            Self::Bar(bar) => bar.println(text),
            Self::Lines => eprintln!("{text}"),
            Self::Quiet => {}
        }
    }

    /// Clears the bar.
    pub fn finish(&self) {
        if let Self::Bar(bar) = self {
            bar.finish_and_clear();
        }
    }
}

/// What to tell a user whose call stopped at an input request nobody answered (`--input`).
pub fn input_help(result: &serde_json::Value) -> String {
    let mut s = String::from("the server asked:");
    for (key, req) in result["inputRequests"].as_object().into_iter().flatten() {
        let what = req["params"]["message"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| req["params"].to_string());
        s.push_str(&format!(
            "\n  {key}: {} — {what}",
            req["method"].as_str().unwrap_or("?")
        ));
    }
    s.push_str("\nanswer with --input KEY=JSON (e.g. an elicitation: '{\"action\":\"accept\",\"content\":{…}}')");
    s
}

fn describe(done: f64, total: Option<f64>, message: Option<&str>) -> String {
    let mut s = match total {
        Some(t) if t > 0.0 => format!("{}/{} ({:.0}%)", num(done), num(t), done / t * 100.0),
        _ => num(done),
    };
    if let Some(m) = message.filter(|m| !m.is_empty()) {
        s.push(' ');
        s.push_str(m);
    }
    s
}

fn num(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_text() {
        assert_eq!(describe(3.0, Some(10.0), Some("step")), "3/10 (30%) step");
        assert_eq!(describe(0.5, None, None), "0.50");
    }
}
