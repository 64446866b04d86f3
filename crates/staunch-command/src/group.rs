//! Signals to a command's process group, and [`GroupGuard`], which makes sure a group never
//! outlives the call that started it: if the supervising future is dropped (the request core
//! aborted it after its own grace, the job runtime gave up on it), the guard sends SIGTERM and
//! SIGKILLs the group after the grace period.

use std::time::Duration;

use rustix::process::{Pid, Signal, kill_process_group, test_kill_process_group};

/// Sends `sig` to the group `pgid`; false when no process of it is left.
pub fn signal_group(pgid: u32, sig: Signal) -> bool {
    match Pid::from_raw(pgid as i32) {
        Some(p) => kill_process_group(p, sig).is_ok(),
        None => false,
    }
}

/// Whether any process of group `pgid` is alive (zombies included).
pub fn group_alive(pgid: u32) -> bool {
    Pid::from_raw(pgid as i32).is_some_and(|p| test_kill_process_group(p).is_ok())
}

/// Ends a group when dropped while armed.
#[derive(Debug)]
pub struct GroupGuard {
    pgid: u32,
    grace: Duration,
    armed: bool,
}

impl GroupGuard {
    /// Guards group `pgid`: dropped while armed, it sends SIGTERM, then SIGKILL after `grace`.
    pub fn new(pgid: u32, grace: Duration) -> Self {
        Self {
            pgid,
            grace,
            armed: true,
        }
    }

    /// The group was ended by the supervisor itself.
    pub fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let (pgid, grace) = (self.pgid, self.grace);
        tracing::warn!(
            pgid,
            "command.abandoned: its call ended first; stopping its process group"
        );
        if !signal_group(pgid, Signal::TERM) {
            return;
        }
        match tokio::runtime::Handle::try_current() {
            Ok(h) => {
                h.spawn(async move {
                    let until = tokio::time::Instant::now() + grace;
                    while tokio::time::Instant::now() < until && group_alive(pgid) {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    signal_group(pgid, Signal::KILL);
                });
            }
            Err(_) => {
                signal_group(pgid, Signal::KILL);
            }
        }
    }
}
