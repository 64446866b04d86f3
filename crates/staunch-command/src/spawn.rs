//! Starting a command: its own process group (so a signal reaches every process it starts),
//! an environment built from scratch, no stdin, piped stdout and stderr, and the parent-death
//! signal, so the command dies with staunch even when staunch is SIGKILLed.
//!
//! The parent-death signal is the one place this crate uses `unsafe`: it must be set in the
//! child between fork and exec, which only `CommandExt::pre_exec` (unsafe by signature: the
//! closure runs in a forked copy of a multithreaded process) allows. The closure makes two
//! raw system calls through rustix (`prctl`, `getppid`) and allocates nothing, so it is
//! async-signal-safe. The signal is tied to the *thread* that spawned the child: tokio's worker
//! threads live as long as the runtime, so it fires when the process dies, not before.
//! Grandchildren are not covered by it (it is per process); what they leave behind is ended
//! by the orphan sweep (`sweep.rs`) at the next start of staunch.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Stdio;

use tokio::process::{Child, Command};

/// Everything needed to start one command.
#[derive(Debug, Clone)]
pub struct Spawn {
    /// Absolute path of the program.
    pub program: PathBuf,
    /// Its arguments, after the program name.
    pub args: Vec<OsString>,
    /// Working directory.
    pub cwd: PathBuf,
    /// The whole environment (nothing else is inherited).
    pub env: Vec<(OsString, OsString)>,
}

/// Starts `s` in a new process group whose id is the child's pid.
pub fn start(s: &Spawn) -> std::io::Result<Child> {
    let mut cmd = Command::new(&s.program);
    cmd.args(&s.args)
        .current_dir(&s.cwd)
        .env_clear()
        .envs(s.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        // The supervisor kills the whole group itself; dropping the handle must not race it.
        .kill_on_drop(false);
    die_with_parent(&mut cmd);
    cmd.spawn()
}

/// A long-lived child that speaks on its stdio (an upstream MCP server of `staunch proxy`):
/// its own process group and the parent-death signal as for a command tool, but stdin and
/// stdout piped, stderr as given, and the environment inherited plus `env`.
pub fn start_server(
    program: &std::ffi::OsStr,
    args: &[OsString],
    cwd: Option<&std::path::Path>,
    env: &[(OsString, OsString)],
    stderr: Stdio,
) -> std::io::Result<Child> {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .process_group(0)
        .kill_on_drop(false);
    if let Some(dir) = cwd {
        cmd.current_dir(dir);
    }
    die_with_parent(&mut cmd);
    cmd.spawn()
}

#[allow(unsafe_code)]
fn die_with_parent(cmd: &mut Command) {
    let parent = rustix::process::getpid();
    // SAFETY: the closure only calls `prctl(PR_SET_PDEATHSIG)` and `getppid` (raw syscalls via
    // rustix, no allocation, no locks), which are async-signal-safe after fork.
    unsafe {
        cmd.pre_exec(move || {
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
            // The parent may have died between fork and prctl: then no signal would come.
            if rustix::process::getppid() != Some(parent) {
                return Err(rustix::io::Errno::SRCH.into());
            }
            Ok(())
        });
    }
}
