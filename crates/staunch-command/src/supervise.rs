//! Running one command to its end: [`run`] starts it (see `spawn.rs`), captures its output
//! within the limits, passes its progress on, and ends it on cancel: SIGTERM to the whole
//! process group, SIGKILL after the grace period. When the command's first process exits, any
//! process it left behind in its group is SIGKILLed too: nothing outlives the call.

use std::os::unix::process::ExitStatusExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustix::process::Signal;
use tokio::process::Child;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::config::OutputLimits;
use crate::group::{GroupGuard, signal_group};
use crate::output::{self, Captured, Tail};
use crate::progress_line::Report;
use crate::spawn::{self, Spawn};

/// How long output is still read after the group was ended (a process that left the group,
/// e.g. with setsid, may hold the pipe open; it is not waited for).
const DRAIN_AFTER_EXIT: Duration = Duration::from_secs(2);

/// Where progress goes: the command's own reports, and elapsed-time reports while it has sent
/// none (`elapsed == true`).
pub type ProgressSink = Arc<dyn Fn(Report, bool) + Send + Sync>;

/// Why the command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndedBy {
    /// It exited by itself.
    Exited,
    /// The call was cancelled (or its deadline passed); `killed` if it needed SIGKILL.
    Cancelled {
        /// It needed SIGKILL after the grace.
        killed: bool,
    },
    /// Its standard output passed the limit with `stdout_overflow = "fail"`.
    OutputLimit {
        /// It needed SIGKILL after the grace.
        killed: bool,
    },
}

/// How a command ended, with its output.
#[derive(Debug)]
pub struct Finished {
    /// Process id of the command, also its process group id.
    pub pid: u32,
    /// Exit code, when it exited.
    pub code: Option<i32>,
    /// The signal that ended it, when one did.
    pub signal: Option<i32>,
    /// Why it ended.
    pub ended_by: EndedBy,
    /// What was kept of standard output.
    pub stdout: Captured,
    /// The end of standard error, without progress lines.
    pub stderr_tail: String,
    /// Stderr lines that were progress reports.
    pub progress_lines: u64,
    /// Time from the start to the end.
    pub elapsed: Duration,
}

/// Runs a command to its end. Cancel `cancel` to stop it. `elapsed` sets how often elapsed
/// progress goes out while the command reports none (`None`: never).
pub async fn run(
    spec: &Spawn,
    limits: OutputLimits,
    grace: Duration,
    cancel: CancellationToken,
    progress: ProgressSink,
    elapsed: Option<Duration>,
) -> std::io::Result<Finished> {
    let started = Instant::now();
    let mut child = spawn::start(spec)?;
    let pid = child.id().unwrap_or(0);
    let mut guard = GroupGuard::new(pid, grace);
    let stdout = Arc::new(Mutex::new(Captured::default()));
    let tail = Arc::new(Mutex::new(Tail::new(limits.stderr_tail)));
    let overflowed = CancellationToken::new();
    let reported = Arc::new(AtomicBool::new(false));
    let mut readers = Vec::new();
    if let Some(out) = child.stdout.take() {
        readers.push(tokio::spawn(output::read_stdout(
            out,
            limits.max_stdout,
            limits.overflow,
            overflowed.clone(),
            stdout.clone(),
        )));
    }
    if let Some(err) = child.stderr.take() {
        let (sink, seen) = (progress.clone(), reported.clone());
        readers.push(tokio::spawn(output::read_stderr(
            err,
            tail.clone(),
            move |r| {
                seen.store(true, Ordering::Relaxed);
                sink(r, false);
            },
        )));
    }
    let tick = elapsed.unwrap_or(Duration::from_secs(3600));
    let mut ticker = tokio::time::interval_at(started + tick, tick);
    let (status, ended_by) = loop {
        tokio::select! {
            s = child.wait() => break (s?, EndedBy::Exited),
            _ = cancel.cancelled() => {
                let (s, killed) = terminate(&mut child, pid, grace).await?;
                break (s, EndedBy::Cancelled { killed });
            }
            _ = overflowed.cancelled() => {
                let (s, killed) = terminate(&mut child, pid, grace).await?;
                break (s, EndedBy::OutputLimit { killed });
            }
            _ = ticker.tick(), if elapsed.is_some() => {
                if !reported.load(Ordering::Relaxed) {
                    // Tenths of a second, so every tick (at least 100 ms apart) increases.
                    let secs = (started.elapsed().as_secs_f64() * 10.0).floor() / 10.0;
                    progress(
                        Report {
                            progress: secs,
                            total: None,
                            message: Some(format!("running for {secs:.0}s")),
                        },
                        true,
                    );
                }
            }
        }
    };
    // Whatever the first process left running in its group ends with it.
    signal_group(pid, Signal::KILL);
    guard.disarm();
    let drain = async {
        for r in &mut readers {
            let _ = r.await;
        }
    };
    if tokio::time::timeout(DRAIN_AFTER_EXIT, drain).await.is_err() {
        // Keep what was read; stop reading a pipe held open by a process outside the group.
        tracing::warn!(
            pid,
            "command output still open after its process group ended"
        );
        for r in &readers {
            r.abort();
        }
    }
    let stdout = std::mem::take(&mut *stdout.lock().unwrap_or_else(|p| p.into_inner()));
    let t = tail.lock().unwrap_or_else(|p| p.into_inner());
    Ok(Finished {
        pid,
        code: status.code(),
        signal: status.signal(),
        ended_by,
        stdout,
        stderr_tail: t.text(),
        progress_lines: t.progress_lines,
        elapsed: started.elapsed(),
    })
}

/// SIGTERM to the group, SIGKILL after `grace`; returns the status and whether SIGKILL was
/// needed.
async fn terminate(
    child: &mut Child,
    pgid: u32,
    grace: Duration,
) -> std::io::Result<(std::process::ExitStatus, bool)> {
    signal_group(pgid, Signal::TERM);
    match tokio::time::timeout(grace, child.wait()).await {
        Ok(s) => Ok((s?, false)),
        Err(_) => {
            signal_group(pgid, Signal::KILL);
            Ok((child.wait().await?, true))
        }
    }
}
