//! [`Runner`]: one tool's definition plus its concurrency limit; turns validated arguments
//! into a [`Spawn`] (argv from the templates, the environment from the policy) and runs it.

use std::ffi::OsString;
use std::sync::Arc;

use serde_json::{Map, Value};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::config::{BASE_ENV, CommandTool};
use crate::spawn::Spawn;
use crate::supervise::{self, ProgressSink};
use crate::sweep;
use crate::template;
use crate::verdict::{self, Verdict};

/// A tool ready to run.
#[derive(Debug)]
pub struct Runner {
    /// The tool's definition.
    pub tool: Arc<CommandTool>,
    /// Calls of this tool running at once.
    pub permits: Arc<Semaphore>,
}

impl Runner {
    /// A runner that lets `tool.concurrency` calls run at once.
    pub fn new(tool: Arc<CommandTool>) -> Self {
        let permits = Arc::new(Semaphore::new(tool.concurrency));
        Self { tool, permits }
    }

    /// The process to start for `args` (already validated), with `extra` variables.
    pub fn prepare(
        &self,
        args: &Map<String, Value>,
        extra: &[(&str, String)],
    ) -> Result<Spawn, String> {
        let t = &self.tool;
        let flag = |n: &str| t.flag_of(n);
        let argv = template::render_all(&t.args, args, &flag)?;
        let mut env: Vec<(OsString, OsString)> = Vec::new();
        for name in BASE_ENV
            .iter()
            .copied()
            .chain(t.env.allow.iter().map(String::as_str))
        {
            if let Some(v) = std::env::var_os(name) {
                env.push((name.into(), v));
            }
        }
        for (k, v) in &t.env.set {
            env.push((k.into(), v.into()));
        }
        for (k, from) in &t.env.secrets {
            match std::env::var_os(from) {
                Some(v) => env.push((k.into(), v)),
                None => {
                    return Err(format!(
                        "{} cannot run: the secret {k} (from {from}) is no longer set in \
                         staunch's environment",
                        t.name
                    ));
                }
            }
        }
        env.push((sweep::MARK.into(), sweep::own_mark().into()));
        env.push(("STAUNCH_TOOL".into(), t.name.clone().into()));
        for (k, v) in extra {
            env.push(((*k).into(), v.into()));
        }
        Ok(Spawn {
            program: t.program.clone(),
            args: argv,
            cwd: t.cwd.clone(),
            env,
        })
    }

    /// Runs the command for validated `args` until it ends or `cancel` fires. Waits for a
    /// concurrency permit first (a cancel while waiting ends the wait).
    pub async fn execute(
        &self,
        args: &Map<String, Value>,
        extra: &[(&str, String)],
        cancel: CancellationToken,
        progress: ProgressSink,
    ) -> Verdict {
        let spec = match self.prepare(args, extra) {
            Ok(s) => s,
            Err(m) => return Verdict::Failed(m),
        };
        let _permit = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Verdict::Cancelled,
            p = self.permits.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => return Verdict::Failed("the tool is shutting down".into()),
            },
        };
        let t = &self.tool;
        let run = supervise::run(
            &spec,
            t.limits,
            t.grace,
            cancel,
            progress,
            t.elapsed_progress,
        )
        .await;
        match run {
            Ok(f) => {
                tracing::info!(
                    tool = %t.name, pid = f.pid, code = ?f.code, signal = ?f.signal,
                    ended_by = ?f.ended_by, elapsed_ms = f.elapsed.as_millis() as u64,
                    stdout_bytes = f.stdout.total, "command.end"
                );
                verdict::judge(t, &f, args)
            }
            Err(e) => Verdict::Failed(format!(
                "{} could not start {}: {e}",
                t.name,
                t.program.display()
            )),
        }
    }
}
