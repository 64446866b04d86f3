//! The request-lifecycle log: one JSON object per line, format in `docs/lifecycle-log.md`, the
//! events typed in `staunch-lifecycle` (shared with `staunch audit`, which reads them).
//!
//! The log is on by default and sits on every request's path, so it is built to cost little:
//! a line is formatted straight into one shared buffer (no per-line allocation, no channel
//! message; the timestamp's date part is formatted once per second), and one background thread
//! swaps that buffer out and writes it with one `write` per batch. A request task never waits
//! on the disk or the terminal.
//!
//! **Bounded.** When the writer falls [`DEFAULT_BUFFER_BYTES`] behind (a disk or a terminal
//! slower than the load), new lines are *dropped and counted* rather than queued without limit
//! or allowed to slow requests; once the writer catches up it writes a `log.dropped` line with
//! the count, so `staunch audit` knows the log is incomplete. [`LifecycleLog::dropped`] is
//! the running total.
//!
//! `flush` waits until everything appended so far is written (used before the process exits,
//! and by tests).

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use staunch_lifecycle::{Event, IdRef, TimestampCache, now_ms, write_dropped, write_line};
use staunch_protocol::RequestId;

/// How far the writer may fall behind before lines are dropped.
pub(crate) const DEFAULT_BUFFER_BYTES: usize = 4 << 20;

thread_local! {
    /// Where a request's thread formats its line before appending it (see
    /// [`LifecycleLog::event`]); its capacity is kept between lines.
    static LINE: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
    /// This thread's timestamp cache (a line's date part is formatted once per second).
    static TIMESTAMP: std::cell::RefCell<TimestampCache> =
        std::cell::RefCell::new(TimestampCache::default());
}

/// How long `flush` waits for the writer at most.
const FLUSH_LIMIT: Duration = Duration::from_secs(5);

/// Where lifecycle lines go. Cheap to clone; the writer thread ends when the last clone is
/// dropped (after writing what is left).
#[derive(Clone, Default)]
pub struct LifecycleLog {
    handle: Option<Arc<Handle>>,
}

impl std::fmt::Debug for LifecycleLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LifecycleLog")
            .field("enabled", &self.handle.is_some())
            .finish()
    }
}

/// What the request tasks and the writer thread share.
struct LogShared {
    state: Mutex<LogState>,
    /// The writer waits on it for lines (or for the end).
    has_lines: Condvar,
    /// `flush` waits on it for the writer's progress.
    progressed: Condvar,
    /// Lines dropped since the start (for metrics and tests).
    dropped_total: AtomicU64,
}

struct LogState {
    /// Lines appended and not yet taken by the writer.
    pending: String,
    clock: TimestampCache,
    /// Lines appended since the start; `written` catches up with it.
    appended: u64,
    written: u64,
    /// Lines dropped since the writer last reported it.
    dropped: u64,
    limit: usize,
    closed: bool,
    /// The writer is asleep on `has_lines` with nothing pending: the next line must wake it.
    /// Only then is it notified — a notify is a system call whether anyone waits or not, and a
    /// busy server appends two lines per request.
    writer_waiting: bool,
    /// `flush` is waiting: the writer does not let lines gather.
    flushing: bool,
}

/// The part whose drop ends the writer.
struct Handle {
    shared: Arc<LogShared>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        lock(&self.shared.state).closed = true;
        self.shared.has_lines.notify_one();
    }
}

fn lock(m: &Mutex<LogState>) -> MutexGuard<'_, LogState> {
    // A panic while holding the lock leaves a String that is at worst cut mid-line; keep going.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl LifecycleLog {
    /// No log at all.
    pub fn disabled() -> Self {
        Self { handle: None }
    }

    /// Lines to stderr.
    pub fn stderr() -> Self {
        Self::to_writer(Box::new(std::io::stderr()))
    }

    /// Lines appended to a file (created readable by its owner only: the log names tools and
    /// carries argument fingerprints).
    pub fn file(path: &std::path::Path) -> std::io::Result<Self> {
        let mut opts = std::fs::OpenOptions::new();
        opts.create(true).append(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
        Ok(Self::to_writer(Box::new(opts.open(path)?)))
    }

    /// Lines to any writer (tests use a shared buffer).
    pub fn to_writer(w: Box<dyn Write + Send>) -> Self {
        Self::with_limit(w, DEFAULT_BUFFER_BYTES)
    }

    /// Lines to `w`, dropping (and counting) lines while more than `limit` bytes wait.
    pub fn with_limit(w: Box<dyn Write + Send>, limit: usize) -> Self {
        let shared = Arc::new(LogShared {
            state: Mutex::new(LogState {
                pending: String::with_capacity(16 << 10),
                clock: TimestampCache::default(),
                appended: 0,
                written: 0,
                dropped: 0,
                limit,
                closed: false,
                writer_waiting: false,
                flushing: false,
            }),
            has_lines: Condvar::new(),
            progressed: Condvar::new(),
            dropped_total: AtomicU64::new(0),
        });
        let for_writer = shared.clone();
        std::thread::Builder::new()
            .name("staunch-lifecycle-log".into())
            .spawn(move || write_loop(&for_writer, w))
            .map(|_| Self {
                handle: Some(Arc::new(Handle { shared })),
            })
            .unwrap_or_default()
    }

    /// Whether lines are written at all (callers skip computing fields when not).
    pub fn enabled(&self) -> bool {
        self.handle.is_some()
    }

    /// Writes one event of request `id` on connection `label`.
    pub fn event(&self, label: &str, id: &RequestId, event: &Event<'_>) {
        let Some(h) = &self.handle else { return };
        let id = match id {
            RequestId::Number(n) => IdRef::Number(*n),
            RequestId::String(s) => IdRef::String(s),
        };
        let ms = now_ms();
        // The line is formatted into this thread's scratch buffer first, outside the lock:
        // the lock is then held for a copy, not for the formatting, so requests on other
        // worker threads rarely wait for it.
        LINE.with_borrow_mut(|line| {
            line.clear();
            write_line(
                line,
                |out| TIMESTAMP.with_borrow_mut(|c| c.write(out, ms)),
                label,
                id,
                event,
            );
            let mut st = lock(&h.shared.state);
            if st.pending.len() >= st.limit {
                st.dropped += 1;
                h.shared.dropped_total.fetch_add(1, Ordering::Relaxed);
                return;
            }
            st.pending.push_str(line);
            st.appended += 1;
            let wake = std::mem::take(&mut st.writer_waiting);
            drop(st);
            if wake {
                h.shared.has_lines.notify_one();
            }
        });
    }

    /// Lines dropped so far because the writer was too far behind.
    pub fn dropped(&self) -> u64 {
        self.handle
            .as_ref()
            .map_or(0, |h| h.shared.dropped_total.load(Ordering::Relaxed))
    }

    /// Blocks until every line appended so far is written and flushed (at most a few
    /// seconds: a stuck disk must not hang shutdown).
    pub fn flush(&self) {
        let Some(h) = &self.handle else { return };
        let deadline = Instant::now() + FLUSH_LIMIT;
        let mut st = lock(&h.shared.state);
        let target = st.appended;
        st.flushing = true;
        h.shared.has_lines.notify_one();
        while st.written < target {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            st = h
                .shared
                .progressed
                .wait_timeout(st, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

/// The writer thread: sleep until there is a line, let lines gather for [`GATHER`] if the
/// server is busy, take everything pending, write it in one go, report progress; until the
/// last handle is gone and nothing is left.
///
/// Only the first line after an idle spell wakes the writer; lines that come while it gathers
/// or writes wake nobody. So a busy server's lines go out in one `write` per interval with no
/// wake-up per request (a wake is a system call on the request's thread and a context switch
/// for a core the requests need). A quiet server — nothing written for [`QUIET`] — gets its
/// line written at once. `flush` (shutdown, tests) cuts the gathering short.
fn write_loop(shared: &LogShared, mut w: Box<dyn Write + Send>) {
    let mut batch = String::with_capacity(16 << 10);
    let mut last_write: Option<Instant> = None;
    loop {
        let mut st = lock(&shared.state);
        while st.pending.is_empty() && !st.closed && !st.flushing {
            st.writer_waiting = true;
            st = shared.has_lines.wait(st).unwrap_or_else(|p| p.into_inner());
        }
        st.writer_waiting = false;
        let busy = last_write.is_some_and(|t| t.elapsed() < QUIET);
        if busy && !st.closed && !st.flushing {
            let until = Instant::now() + GATHER;
            loop {
                let left = until.saturating_duration_since(Instant::now());
                if left.is_zero() || st.closed || st.flushing {
                    break;
                }
                st = shared
                    .has_lines
                    .wait_timeout(st, left)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
        }
        if st.pending.is_empty() && st.closed {
            return;
        }
        std::mem::swap(&mut st.pending, &mut batch);
        let upto = st.appended;
        let dropped = std::mem::take(&mut st.dropped);
        if dropped > 0 {
            // The dropped lines came after the ones in this batch (they were refused because
            // the batch was full), so the note goes at its end.
            let ms = now_ms();
            let LogState { clock, .. } = &mut *st;
            write_dropped(&mut batch, |out| clock.write(out, ms), dropped);
        }
        drop(st);
        // A failing writer (a closed stderr, a full disk) must not stop the server; the lines
        // are lost either way.
        if !batch.is_empty() {
            let _ = w.write_all(batch.as_bytes());
            let _ = w.flush();
            last_write = Some(Instant::now());
        }
        // Keep the capacity of a normal batch; give back what a burst grew.
        batch.clear();
        if batch.capacity() > 1 << 20 {
            batch.shrink_to(16 << 10);
        }
        let mut st = lock(&shared.state);
        st.written = upto;
        // A flush is answered once everything it asked for is written.
        st.flushing = false;
        drop(st);
        shared.progressed.notify_all();
    }
}

/// How long the writer of a busy server lets lines gather once one arrived (a line reaches
/// the log at most this much later; `flush` still waits for every line).
const GATHER: Duration = Duration::from_millis(2);

/// A server whose last batch is older than this is quiet: its next line is written at once.
const QUIET: Duration = Duration::from_millis(10);

#[cfg(test)]
mod tests {
    use super::*;
    use staunch_lifecycle::{Parsed, parse_line};
    use std::sync::mpsc;

    /// A writer that blocks until the test lets it go, and keeps what it was given.
    struct Gate {
        open: mpsc::Receiver<()>,
        out: Arc<Mutex<Vec<u8>>>,
        first: bool,
    }

    impl Write for Gate {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.first {
                // Hold the first batch until released: the writer is "a slow disk".
                let _ = self.open.recv();
                self.first = false;
            }
            self.out.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn start(i: i64) -> Event<'static> {
        Event::Start {
            method: Some("tools/call".into()),
            tool: Some(format!("t{i}").into()),
            args_fingerprint: None,
            shape: None,
            protocol_version: None,
        }
    }

    #[test]
    fn lines_arrive_whole_and_in_order() {
        let out = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = mpsc::channel();
        tx.send(()).unwrap();
        let log = LifecycleLog::to_writer(Box::new(Gate {
            open: rx,
            out: out.clone(),
            first: true,
        }));
        for i in 0..2_000 {
            log.event("s", &RequestId::Number(i), &start(i));
        }
        log.flush();
        let text = String::from_utf8(out.lock().unwrap().clone()).unwrap();
        let ids: Vec<i64> = text
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                v["request_id"].as_i64().unwrap()
            })
            .collect();
        assert_eq!(ids, (0..2_000).collect::<Vec<_>>());
        assert_eq!(log.dropped(), 0);
    }

    #[test]
    fn a_slow_writer_bounds_memory_drops_lines_and_says_how_many() {
        let out = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = mpsc::channel();
        let limit = 8 << 10;
        let log = LifecycleLog::with_limit(
            Box::new(Gate {
                open: rx,
                out: out.clone(),
                first: true,
            }),
            limit,
        );
        // The first line wakes the writer, which then blocks on the gate holding it.
        log.event("s", &RequestId::Number(0), &start(0));
        let held = Instant::now();
        while !lock(&log.handle.as_ref().unwrap().shared.state)
            .pending
            .is_empty()
        {
            assert!(
                held.elapsed() < Duration::from_secs(10),
                "writer never took the batch"
            );
            std::thread::yield_now();
        }
        // Far more than the limit while the writer is stuck: memory stays bounded.
        for i in 1..5_000 {
            log.event("s", &RequestId::Number(i), &start(i));
            let pending = lock(&log.handle.as_ref().unwrap().shared.state)
                .pending
                .len();
            assert!(pending < limit + 512, "pending grew to {pending}");
        }
        let dropped = log.dropped();
        assert!(dropped > 4_000, "dropped {dropped}");
        tx.send(()).unwrap();
        log.flush();
        let text = String::from_utf8(out.lock().unwrap().clone()).unwrap();
        let mut written = 0;
        let mut reported = 0;
        for l in text.lines() {
            match parse_line(l.as_bytes()).unwrap().unwrap() {
                Parsed::Known(_) => written += 1,
                Parsed::Dropped { count, .. } => reported += count,
                Parsed::Ignored { .. } => panic!("unexpected line {l}"),
            }
        }
        assert_eq!(reported, dropped, "the log says how many it lost");
        assert_eq!(written + reported, 5_000);
    }

    #[test]
    fn dropping_the_last_handle_writes_what_is_left() {
        let out = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = mpsc::channel();
        tx.send(()).unwrap();
        let log = LifecycleLog::to_writer(Box::new(Gate {
            open: rx,
            out: out.clone(),
            first: true,
        }));
        for i in 0..100 {
            log.event("s", &RequestId::Number(i), &start(i));
        }
        let shared = log.handle.as_ref().unwrap().shared.clone();
        drop(log);
        let t = Instant::now();
        while Arc::strong_count(&shared) > 1 {
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "writer thread kept running"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(
            String::from_utf8_lossy(&out.lock().unwrap())
                .lines()
                .count(),
            100
        );
    }
}
