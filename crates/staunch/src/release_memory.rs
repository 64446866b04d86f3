//! Gives a burst's memory back to the operating system once the burst is over.
//!
//! Allocators keep what a load peak freed for reuse: a thousand connections' buffers and
//! requests, freed when the calls end, stay in the process's resident set — jemalloc's (the
//! binary's allocator) until its decay returns them over the following seconds, glibc's (which
//! SQLite's allocations use) for good, and the next peak does not reuse all of it in place, so
//! the resident set crept up by megabytes from one load/cancel cycle to the next while the live
//! heap grew by a fraction of that. After a peak of in-flight requests has fallen away,
//! [`watch`] asks both to return their free pages now (jemalloc's purge of every arena, glibc's
//! `malloc_trim`), at most once a second and never while the load is still high.

use std::time::Duration;

use staunch_server::Server;

/// How often the in-flight count is looked at.
const TICK: Duration = Duration::from_millis(250);
/// A peak smaller than this is not worth a trim.
const MIN_PEAK: usize = 64;
/// The peak is over when the in-flight count fell to this fraction of it.
const FALLEN_TO: usize = 4;
/// Trims at most this often.
const MIN_INTERVAL: Duration = Duration::from_secs(1);

/// Watches `server`'s in-flight requests until it shuts down, trimming after each peak.
pub fn watch(server: &Server) {
    let server = server.clone();
    let shutdown = server.shutdown_token();
    tokio::spawn(async move {
        let mut peaks = Peaks::default();
        let mut tick = tokio::time::interval(TICK);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            let now = server.in_flight();
            let Some(peak) = peaks.over(now, tokio::time::Instant::now()) else {
                continue;
            };
            // Walks the allocator's arenas: off the runtime's threads.
            let released = tokio::task::spawn_blocking(trim).await.unwrap_or(false);
            tracing::debug!(
                peak,
                in_flight = now,
                released,
                "load peak over: free memory trimmed"
            );
        }
    });
}

/// The in-flight peak since the last trim, and when that was.
#[derive(Debug, Default)]
struct Peaks {
    peak: usize,
    last: Option<tokio::time::Instant>,
}

impl Peaks {
    /// Takes the in-flight count at `at`; `Some(peak)` when a peak worth a trim is over (and
    /// then starts watching for the next one).
    fn over(&mut self, now: usize, at: tokio::time::Instant) -> Option<usize> {
        self.peak = self.peak.max(now);
        let recent = self
            .last
            .is_some_and(|l| at.duration_since(l) < MIN_INTERVAL);
        if self.peak < MIN_PEAK || now > self.peak / FALLEN_TO || recent {
            return None;
        }
        let peak = std::mem::replace(&mut self.peak, now);
        self.last = Some(at);
        Some(peak)
    }
}

/// Returns free memory to the system: whether jemalloc's purge ran or glibc returned memory.
fn trim() -> bool {
    // Both are asked: `|`, not `||`.
    purge_jemalloc() | trim_glibc()
}

/// Purges the dirty pages of every jemalloc arena (`arena.<MALLCTL_ARENAS_ALL>.purge`):
/// whether jemalloc accepted the request.
#[allow(unsafe_code)]
fn purge_jemalloc() -> bool {
    /// jemalloc's `MALLCTL_ARENAS_ALL`: the pseudo-arena that names them all.
    const EVERY_ARENA_PURGE: &std::ffi::CStr = c"arena.4096.purge";
    let none = std::ptr::null_mut();
    // SAFETY: the name is a NUL-terminated string that outlives the call; a purge reads and
    // writes no value, so the old and new pointers are null with zero lengths, as jemalloc's
    // mallctl(3) documents for it; mallctl may be called from any thread (each arena is purged
    // under its own lock).
    unsafe {
        tikv_jemalloc_sys::mallctl(EVERY_ARENA_PURGE.as_ptr(), none, none.cast(), none, 0) == 0
    }
}

/// `malloc_trim(0)`: whether glibc returned any memory.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn trim_glibc() -> bool {
    unsafe extern "C" {
        fn malloc_trim(pad: usize) -> std::ffi::c_int;
    }
    // SAFETY: malloc_trim takes no pointers and only walks glibc's own arenas under their
    // locks; any thread may call it at any time (glibc's malloc(3) documents it as MT-Safe).
    unsafe { malloc_trim(0) == 1 }
}

/// Other C libraries (musl, macOS) have nothing to call.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim_glibc() -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trim_follows_a_peak_once_it_has_fallen_away_and_not_more_than_once_a_second() {
        let t0 = tokio::time::Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut p = Peaks::default();
        // Small loads never trim.
        assert_eq!(p.over(10, at(0)), None);
        assert_eq!(p.over(0, at(250)), None);
        // A peak of 1,000: nothing while it is high or only half gone.
        assert_eq!(p.over(1000, at(500)), None);
        assert_eq!(p.over(500, at(750)), None);
        assert_eq!(p.over(250, at(1000)), Some(1000));
        // Over: the next trim needs a new peak.
        assert_eq!(p.over(0, at(1250)), None);
        // A new peak that falls within a second of the last trim waits for the second.
        assert_eq!(p.over(800, at(1500)), None);
        assert_eq!(p.over(0, at(1750)), None);
        assert_eq!(p.over(0, at(2000)), Some(800));
        assert_eq!(p.over(0, at(4000)), None);
    }
}
