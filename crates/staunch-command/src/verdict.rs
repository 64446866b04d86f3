//! What a finished command means for its call: a result (stdout text, a JSON object from
//! stdout, or a file), a failure the model can read (exit status and the stderr tail), or a
//! cancellation. A result file is read only inside the tool's directory ([`confine`]).

use std::io::Read;
use std::path::Path;

use serde_json::{Map, Value, json};

use crate::config::{CommandTool, ResultMode};
use crate::confine::{self, Refused};
use crate::supervise::{EndedBy, Finished};

/// The outcome of one call.
#[derive(Debug)]
pub enum Verdict {
    /// Success: text for the model, structured content when the result is JSON.
    Done {
        /// What the model reads.
        text: String,
        /// The result as JSON: the command's object, or what stdout or the file held.
        value: Value,
        /// `value` is the tool's structured content (`result = "json"`).
        structured: bool,
    },
    /// A failure, described for the model.
    Failed(String),
    /// Stopped by a cancel (or the deadline).
    Cancelled,
}

/// Judges a finished command.
pub fn judge(tool: &CommandTool, f: &Finished, args: &Map<String, Value>) -> Verdict {
    match f.ended_by {
        EndedBy::Cancelled { .. } => return Verdict::Cancelled,
        EndedBy::OutputLimit { .. } => {
            return Verdict::Failed(format!(
                "{} printed more than {} bytes on standard output (max_stdout) and was stopped",
                tool.name, tool.limits.max_stdout
            ));
        }
        EndedBy::Exited => {}
    }
    let ok = f.code.is_some_and(|c| tool.ok_exit_codes.contains(&c));
    if !ok {
        let how = match (f.code, f.signal) {
            (Some(c), _) => format!("exit status {c}"),
            (None, Some(s)) => format!("killed by signal {s}"),
            (None, None) => "an unknown status".into(),
        };
        let mut m = format!("{} failed: {how}", tool.name);
        if f.stderr_tail.is_empty() {
            m.push_str(" (nothing on stderr)");
        } else {
            m.push_str("\nstderr (last lines):\n");
            m.push_str(&f.stderr_tail);
        }
        return Verdict::Failed(m);
    }
    match &tool.result {
        ResultMode::Text => {
            let stdout = String::from_utf8_lossy(&f.stdout.bytes).into_owned();
            // The model reads the text, so it says what was cut; the structured result keeps
            // the output as it was, with `stdout_truncated` and the total saying the same.
            let mut text = stdout.clone();
            if f.stdout.truncated {
                text.push_str(&format!(
                    "\n[output truncated: kept the first {} of {} bytes]",
                    f.stdout.bytes.len(),
                    f.stdout.total
                ));
            }
            let value = json!({
                "exit_code": f.code,
                "stdout": stdout,
                "stdout_truncated": f.stdout.truncated,
                "stdout_bytes": f.stdout.total,
            });
            Verdict::Done {
                text,
                value,
                structured: false,
            }
        }
        ResultMode::Json => match serde_json::from_slice::<Value>(&f.stdout.bytes) {
            Ok(v @ Value::Object(_)) => Verdict::Done {
                text: v.to_string(),
                value: v,
                structured: true,
            },
            Ok(_) => Verdict::Failed(format!(
                "{} succeeded but its output is not a JSON object (result = \"json\")",
                tool.name
            )),
            Err(e) => Verdict::Failed(format!(
                "{} succeeded but its output is not JSON (result = \"json\"): {e}",
                tool.name
            )),
        },
        ResultMode::File(tpl) => {
            let flag = |n: &str| tool.flag_of(n);
            let mut parts = Vec::new();
            if let Err(m) = tpl.render(args, &flag, &mut parts, true) {
                return Verdict::Failed(m);
            }
            let Some(rel) = parts.into_iter().next() else {
                return Verdict::Failed("result_file names no file for these arguments".into());
            };
            // The path comes from the client's arguments: it must not make staunch read (and
            // hand back) a file outside the tool's directory.
            let rel = Path::new(&rel);
            match confine::inside(&tool.cwd, rel) {
                Ok(path) => read_result(&path, tool.limits.max_result),
                Err(Refused::Missing(e)) => Verdict::Failed(format!(
                    "the command did not leave its result file {}: {e}",
                    tool.cwd.join(rel).display()
                )),
                Err(why) => Verdict::Failed(format!(
                    "result_file must stay inside the tool's working directory {}: {} {why}",
                    tool.cwd.display(),
                    rel.display()
                )),
            }
        }
    }
}

/// Reads at most `max` bytes of `path` (one open: the size checked is the file read).
fn read_result(path: &Path, max: u64) -> Verdict {
    let read = || -> std::io::Result<Option<Vec<u8>>> {
        // Opening a FIFO (or a device) would wait for a writer that may never come.
        if !std::fs::metadata(path)?.is_file() {
            return Err(std::io::Error::other("not a regular file"));
        }
        let file = std::fs::File::open(path)?;
        let mut b = Vec::new();
        file.take(max + 1).read_to_end(&mut b)?;
        Ok((b.len() as u64 <= max).then_some(b))
    };
    match read() {
        Ok(Some(b)) => {
            let text = String::from_utf8_lossy(&b).into_owned();
            Verdict::Done {
                value: json!({"file": path.display().to_string(), "content": text}),
                text,
                structured: false,
            }
        }
        Ok(None) => Verdict::Failed(format!(
            "the result file {} has more than {max} bytes (max_result)",
            path.display()
        )),
        Err(e) => Verdict::Failed(format!(
            "cannot read the result file {}: {e}",
            path.display()
        )),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::output::Captured;

    #[test]
    fn a_truncated_output_is_said_once_in_the_structured_result() {
        let config = crate::config::parse(
            "[[tool]]\nname = \"t\"\ndescription = \"d\"\nprogram = \"/bin/echo\"\n",
            Path::new("/tmp/staunch.toml"),
            &crate::config::NoFlags,
        )
        .expect("a valid config");
        let finished = Finished {
            pid: 1,
            code: Some(0),
            signal: None,
            ended_by: EndedBy::Exited,
            stdout: Captured {
                bytes: b"abc".to_vec(),
                total: 10,
                truncated: true,
            },
            stderr_tail: String::new(),
            progress_lines: 0,
            elapsed: Duration::ZERO,
        };
        let Verdict::Done { text, value, .. } = judge(&config.tools[0], &finished, &Map::new())
        else {
            panic!("not done");
        };
        assert!(
            text.ends_with("[output truncated: kept the first 3 of 10 bytes]"),
            "{text}"
        );
        assert_eq!(
            value,
            json!({"exit_code": 0, "stdout": "abc", "stdout_truncated": true, "stdout_bytes": 10})
        );
    }
}
