//! What the kernel says about a server process: resident memory and CPU time.

use std::time::Duration;

/// `VmRSS` from `/proc/PID/status`, in bytes.
pub fn rss_bytes(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// CPU time the process has used so far, summed over its live threads.
///
/// `/proc/PID/task/*/schedstat` counts nanoseconds, where `utime + stime` in
/// `/proc/PID/stat` counts 10 ms ticks — too coarse for a flood that costs staunch a few
/// milliseconds. Threads that already exited are missing from the sum, so the stat ticks are
/// the fallback when they say more.
pub fn cpu_time(pid: u32) -> Option<Duration> {
    let mut ns: u64 = 0;
    if let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for t in dir.flatten() {
            if let Ok(s) = std::fs::read_to_string(t.path().join("schedstat"))
                && let Some(v) = s
                    .split_whitespace()
                    .next()
                    .and_then(|v| v.parse::<u64>().ok())
            {
                ns += v;
            }
        }
    }
    let ticks = stat_ticks(pid).map(|t| t * 10_000_000).unwrap_or(0);
    let best = ns.max(ticks);
    (best > 0).then(|| Duration::from_nanos(best))
}

/// `utime + stime` of `/proc/PID/stat`, in clock ticks (100 Hz on Linux).
fn stat_ticks(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may contain spaces; fields resume after the last ')'.
    let rest = &s[s.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After ')': state is field 3 of the full line, so utime (14) and stime (15) are 11, 12.
    let utime: u64 = f.get(11)?.parse().ok()?;
    let stime: u64 = f.get(12)?.parse().ok()?;
    Some(utime + stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_own_process() {
        let pid = std::process::id();
        assert!(rss_bytes(pid).unwrap() > 0);
        assert!(cpu_time(pid).is_some());
    }
}
