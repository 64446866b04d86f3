//! Marking commands, and ending those a dead staunch left behind.
//!
//! Every command gets `STAUNCH_SUPERVISOR=<pid>:<start time>` in its environment, naming the
//! staunch process that supervises it (the start time, from `/proc/<pid>/stat`, tells a live
//! supervisor from a recycled pid). Children inherit it. The parent-death signal ends a
//! command's first process when staunch dies; [`sweep_orphans`], run when `staunch serve`
//! starts and then periodically, SIGKILLs any process still carrying the mark of a supervisor
//! that no longer exists — the grandchildren. A process that clears its environment escapes
//! the sweep (not the process-group kill of a live supervisor).

use std::sync::OnceLock;

use rustix::process::{Pid, Signal, kill_process};

/// The environment variable that marks a command.
pub const MARK: &str = "STAUNCH_SUPERVISOR";

/// This process's mark: `<pid>:<start time in clock ticks since boot>`.
pub fn own_mark() -> &'static str {
    static MARK_VALUE: OnceLock<String> = OnceLock::new();
    MARK_VALUE.get_or_init(|| {
        let pid = std::process::id();
        format!("{pid}:{}", start_time(pid).unwrap_or(0))
    })
}

/// Field 22 of `/proc/<pid>/stat`: when the process started.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: count from the last ')'.
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(19)?.parse().ok()
}

/// Whether the supervisor a mark names is alive.
fn supervisor_alive(mark: &str) -> bool {
    let Some((pid, start)) = mark.split_once(':') else {
        return true; // not ours to judge
    };
    let (Ok(pid), Ok(start)) = (pid.parse::<u32>(), start.parse::<u64>()) else {
        return true;
    };
    start_time(pid) == Some(start)
}

/// The mark in process `pid`'s environment, if readable and present.
pub fn mark_of(pid: u32) -> Option<String> {
    let env = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let key = format!("{MARK}=");
    env.split(|b| *b == 0)
        .find_map(|kv| kv.strip_prefix(key.as_bytes()))
        .map(|v| String::from_utf8_lossy(v).into_owned())
}

/// Processes (readable by this user) marked by a supervisor that is gone.
pub fn orphans() -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let me = std::process::id();
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid != me)
        .filter(|pid| mark_of(*pid).is_some_and(|m| m != own_mark() && !supervisor_alive(&m)))
        .collect()
}

/// SIGKILLs every orphan; returns their pids.
pub fn sweep_orphans() -> Vec<u32> {
    let found = orphans();
    for pid in &found {
        if let Some(p) = Pid::from_raw(*pid as i32) {
            let _ = kill_process(p, Signal::KILL);
        }
    }
    if !found.is_empty() {
        tracing::warn!(pids = ?found, "command.orphans_killed: processes left by a dead staunch");
    }
    found
}

/// How often the orphan sweep runs while serving.
const SWEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(30);

/// Ends processes a dead staunch left behind, now and every 30 s.
pub fn sweep_orphans_periodically() {
    let found = sweep_orphans();
    if !found.is_empty() {
        eprintln!(
            "staunch: killed {} process(es) left behind by a staunch that died: {found:?}",
            found.len()
        );
    }
    tokio::spawn(async {
        let mut tick = tokio::time::interval(SWEEP_EVERY);
        tick.tick().await;
        loop {
            tick.tick().await;
            sweep_orphans();
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_mark_names_a_live_supervisor_and_a_fake_one_is_dead() {
        let m = own_mark();
        assert!(m.starts_with(&format!("{}:", std::process::id())));
        assert!(supervisor_alive(m));
        let (pid, start) = m.split_once(':').unwrap();
        assert!(!supervisor_alive(&format!(
            "{pid}:{}",
            start.parse::<u64>().unwrap() + 1
        )));
    }
}
