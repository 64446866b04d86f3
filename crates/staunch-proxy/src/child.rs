//! The stdio upstream: a child process in its own process group, with the parent-death signal
//! (so it dies with the proxy even when the proxy is SIGKILLed), reaped as soon as it exits
//! (no zombie), and ended the MCP specification's way: stdin closed, a bounded wait, SIGTERM
//! to the whole group, a bounded wait, SIGKILL to the group.

use std::ffi::OsString;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use rustix::process::Signal;
use staunch_client::{Client, ConnectOptions};
use staunch_command::group::{group_alive, signal_group};
use tokio::sync::watch;

use crate::ProxyError;

/// How long an upstream gets to exit after its stdin closes.
pub const EXIT_GRACE: Duration = Duration::from_secs(2);
/// How long after SIGTERM before SIGKILL.
pub const TERM_GRACE: Duration = Duration::from_secs(3);

/// A running upstream process.
#[derive(Debug)]
pub struct UpstreamChild {
    pgid: u32,
    /// `Some(description)` once the process has exited.
    exited: watch::Receiver<Option<String>>,
}

impl UpstreamChild {
    /// Its process id (also its process group id).
    pub fn pid(&self) -> u32 {
        self.pgid
    }

    async fn wait_exit(&self, limit: Duration) -> bool {
        let mut rx = self.exited.clone();
        tokio::time::timeout(limit, rx.wait_for(Option::is_some))
            .await
            .is_ok()
    }

    /// Ends it: `client` is closed first (stdin EOF, the spec's signal), then SIGTERM and
    /// SIGKILL to the group after bounded waits. Anything left in the group is killed.
    pub async fn shut_down(&self, client: &Client) {
        // For a connection over pipes, closing drops the writer: the child reads EOF.
        client.close().await;
        if !self.wait_exit(EXIT_GRACE).await {
            signal_group(self.pgid, Signal::TERM);
            if !self.wait_exit(TERM_GRACE).await {
                signal_group(self.pgid, Signal::KILL);
                self.wait_exit(TERM_GRACE).await;
            }
        }
        // Grandchildren that outlived the leader must not linger either.
        if group_alive(self.pgid) {
            signal_group(self.pgid, Signal::KILL);
        }
    }
}

impl UpstreamChild {
    /// The stop policy's end of a process whose only call was cancelled: `client` is closed
    /// (stdin EOF), the process gets `grace` to exit, and if it is still running its whole
    /// group is killed. Returns whether it had to be killed.
    pub async fn stop(&self, client: &Client, grace: Duration) -> bool {
        client.close().await;
        let exited = self.wait_exit(grace).await;
        if !exited {
            signal_group(self.pgid, Signal::KILL);
            self.wait_exit(TERM_GRACE).await;
        }
        if group_alive(self.pgid) {
            signal_group(self.pgid, Signal::KILL);
        }
        !exited
    }
}

/// A stdio upstream's command: what [`start`] runs.
#[derive(Clone, Copy, Debug)]
pub struct Command<'a> {
    /// The program.
    pub program: &'a OsString,
    /// Its arguments.
    pub args: &'a [OsString],
    /// Variables added to its environment.
    pub env: &'a [(OsString, OsString)],
    /// Its working directory (the proxy's when `None`).
    pub cwd: Option<&'a Path>,
    /// The command line as errors show it ([`crate::Target::display`]).
    pub display: &'a str,
}

/// Starts the stdio upstream `cmd` and does the MCP handshake over its pipes.
pub async fn start(
    upstream: &str,
    cmd: Command<'_>,
    opts: &ConnectOptions,
) -> Result<(Client, UpstreamChild), ProxyError> {
    let Command {
        program,
        args,
        env,
        cwd,
        display,
    } = cmd;
    let mut child = staunch_command::spawn::start_server(
        program,
        args,
        cwd,
        env,
        // The upstream's own logs stay visible to whoever runs the proxy.
        Stdio::inherit(),
    )
    .map_err(|e| ProxyError::Spawn {
        upstream: upstream.to_string(),
        command: display.to_string(),
        message: e.to_string(),
    })?;
    let pgid = child.id().unwrap_or_default();
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(ProxyError::Spawn {
            upstream: upstream.to_string(),
            command: display.to_string(),
            message: "no stdio pipes".into(),
        });
    };
    let (tx, rx) = watch::channel(None);
    let name = upstream.to_string();
    tokio::spawn(async move {
        let status = match child.wait().await {
            Ok(s) => s.to_string(),
            Err(e) => format!("unknown ({e})"),
        };
        tracing::warn!(upstream = %name, pid = pgid, %status, "upstream.exited");
        // What the leader started must not outlive it.
        signal_group(pgid, Signal::KILL);
        let _ = tx.send(Some(status));
    });
    let handle = UpstreamChild { pgid, exited: rx };
    match Client::connect_io(stdout, stdin, opts).await {
        Ok(c) => Ok((c, handle)),
        Err(source) => {
            signal_group(pgid, Signal::KILL);
            Err(ProxyError::Connect {
                upstream: upstream.to_string(),
                source,
            })
        }
    }
}
