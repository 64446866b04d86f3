//! Bounded capture of a command's output. Standard output keeps at most `max_stdout` bytes and
//! drains the rest (or stops the command, as configured); standard error keeps only its last
//! `stderr_tail` bytes and hands progress lines to the caller. Memory stays bounded whatever
//! the command prints: one read buffer per stream plus the two limits.

use std::sync::{Arc, Mutex};

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio_util::sync::CancellationToken;

use crate::config::Overflow;
use crate::progress_line::{self, Line, Report};

const READ_BUF: usize = 64 * 1024;
/// A stderr line longer than this is cut (and never read as progress).
pub const MAX_LINE: usize = 16 * 1024;

/// What was kept of standard output.
#[derive(Debug, Default)]
pub struct Captured {
    /// The first `max_stdout` bytes.
    pub bytes: Vec<u8>,
    /// Bytes the command wrote in all.
    pub total: u64,
    /// The command wrote more than the limit: `bytes` is not all of it.
    pub truncated: bool,
}

/// Reads `r` to its end, keeping the first `max` bytes. With [`Overflow::Fail`], fires
/// `overflowed` once past the limit (the supervisor then stops the command) and stops reading.
pub async fn read_stdout<R: AsyncRead + Unpin>(
    mut r: R,
    max: u64,
    overflow: Overflow,
    overflowed: CancellationToken,
    into: Arc<Mutex<Captured>>,
) {
    let mut buf = vec![0u8; READ_BUF];
    loop {
        let n = match r.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let mut c = into.lock().unwrap_or_else(|p| p.into_inner());
        c.total += n as u64;
        let room = max.saturating_sub(c.bytes.len() as u64) as usize;
        let keep = room.min(n);
        c.bytes.extend_from_slice(&buf[..keep]);
        if keep < n {
            c.truncated = true;
            if overflow == Overflow::Fail {
                overflowed.cancel();
                return;
            }
        }
    }
}

/// The tail of standard error, without progress lines.
#[derive(Debug, Default)]
pub struct Tail {
    buf: Vec<u8>,
    cap: usize,
    /// Progress lines seen.
    pub progress_lines: u64,
}

impl Tail {
    /// Keeps the last `cap` bytes.
    pub fn new(cap: u64) -> Self {
        Self {
            buf: Vec::new(),
            cap: cap as usize,
            progress_lines: 0,
        }
    }

    fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
        // Trim in amortised steps: the buffer is at most twice the tail.
        if self.buf.len() > self.cap.saturating_mul(2).max(MAX_LINE) {
            let cut = self.buf.len() - self.cap;
            self.buf.drain(..cut);
        }
    }

    /// The last `cap` bytes, as text (a character cut in half becomes U+FFFD).
    pub fn text(&self) -> String {
        let start = self.buf.len().saturating_sub(self.cap);
        String::from_utf8_lossy(&self.buf[start..])
            .trim_end()
            .to_string()
    }
}

/// Reads standard error line by line: progress lines go to `on_progress`, the rest to the tail.
pub async fn read_stderr<R: AsyncRead + Unpin>(
    mut r: R,
    tail: Arc<Mutex<Tail>>,
    on_progress: impl Fn(Report),
) {
    let mut buf = vec![0u8; READ_BUF];
    let mut line: Vec<u8> = Vec::new();
    let mut cut = false;
    loop {
        let n = match r.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let mut rest = &buf[..n];
        while !rest.is_empty() {
            match rest.iter().position(|b| *b == b'\n') {
                Some(i) => {
                    take(&mut line, &rest[..i], &mut cut);
                    finish_line(&line, cut, &tail, &on_progress);
                    line.clear();
                    cut = false;
                    rest = &rest[i + 1..];
                }
                None => {
                    take(&mut line, rest, &mut cut);
                    rest = &[];
                }
            }
        }
    }
    if !line.is_empty() {
        finish_line(&line, cut, &tail, &on_progress);
    }
}

fn take(line: &mut Vec<u8>, bytes: &[u8], cut: &mut bool) {
    let room = MAX_LINE.saturating_sub(line.len());
    if bytes.len() > room {
        *cut = true;
    }
    line.extend_from_slice(&bytes[..room.min(bytes.len())]);
}

fn finish_line(line: &[u8], cut: bool, tail: &Mutex<Tail>, on_progress: &impl Fn(Report)) {
    if !cut && let Line::Progress(r) = progress_line::classify(line) {
        tail.lock()
            .unwrap_or_else(|p| p.into_inner())
            .progress_lines += 1;
        on_progress(r);
        return;
    }
    let mut t = tail.lock().unwrap_or_else(|p| p.into_inner());
    t.push(line);
    t.push(if cut { b"[line cut]\n" } else { b"\n" });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn stdout_keeps_the_head_and_counts_the_rest() {
        let data = vec![b'x'; 300_000];
        let c = Arc::new(Mutex::new(Captured::default()));
        read_stdout(
            &data[..],
            1000,
            Overflow::Truncate,
            CancellationToken::new(),
            c.clone(),
        )
        .await;
        let c = c.lock().unwrap();
        assert_eq!(c.bytes.len(), 1000);
        assert_eq!(c.total, 300_000);
        assert!(c.truncated);
    }

    #[tokio::test]
    async fn stderr_splits_progress_from_the_tail() {
        let input = b"one\nstaunch-progress: {\"progress\":1}\ntwo\nthree".to_vec();
        let tail = Arc::new(Mutex::new(Tail::new(8)));
        let seen = Mutex::new(Vec::new());
        read_stderr(&input[..], tail.clone(), |r| {
            seen.lock().unwrap().push(r.progress)
        })
        .await;
        assert_eq!(*seen.lock().unwrap(), vec![1.0]);
        let t = tail.lock().unwrap();
        assert_eq!(t.text(), "o\nthree", "only the last 8 bytes");
        assert_eq!(t.progress_lines, 1);
    }
}
