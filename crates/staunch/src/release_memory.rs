//! Gives a burst's memory back to the operating system once the burst is over.
//!
//! glibc's allocator keeps what a load peak freed for reuse: a thousand connections' buffers
//! and requests, freed when the calls end, stay in the process's resident set, and the next
//! peak does not reuse all of it in place, so the resident set crept up by megabytes from one
//! load/cancel cycle to the next while the live heap grew by a fraction of that. After a peak
//! of in-flight requests has fallen away, [`watch`] asks glibc to return its free pages
//! (`malloc_trim`), at most once a second and never while the load is still high. Other
//! targets (musl, macOS) have nothing to call and do nothing.

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
    if !SUPPORTED {
        return;
    }
    let server = server.clone();
    let shutdown = server.shutdown_token();
    tokio::spawn(async move {
        let mut peak = 0usize;
        let mut last = tokio::time::Instant::now();
        let mut tick = tokio::time::interval(TICK);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            let now = server.in_flight();
            peak = peak.max(now);
            if peak < MIN_PEAK || now > peak / FALLEN_TO || last.elapsed() < MIN_INTERVAL {
                continue;
            }
            // Walks the allocator's arenas: off the runtime's threads.
            let released = tokio::task::spawn_blocking(trim).await.unwrap_or(false);
            tracing::debug!(
                peak,
                in_flight = now,
                released,
                "load peak over: free memory trimmed"
            );
            peak = now;
            last = tokio::time::Instant::now();
        }
    });
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
const SUPPORTED: bool = true;
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
const SUPPORTED: bool = false;

/// `malloc_trim(0)`: whether glibc returned any memory.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn trim() -> bool {
    unsafe extern "C" {
        fn malloc_trim(pad: usize) -> std::ffi::c_int;
    }
    // SAFETY: malloc_trim takes no pointers and only walks glibc's own arenas under their
    // locks; any thread may call it at any time (glibc's malloc(3) documents it as MT-Safe).
    unsafe { malloc_trim(0) == 1 }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() -> bool {
    false
}
