//! An incremental Server-Sent Events parser (the WHATWG event-stream format).
//!
//! Bytes go in as they arrive, whole events come out. It keeps what a resuming client needs:
//! the last event id (sent back as `Last-Event-ID`) and the last `retry` (how long the server
//! asked us to wait before reconnecting). Lines may end in LF, CR or CRLF, and a CRLF split
//! across two chunks is one line end.

use std::time::Duration;

/// A buffered line or event larger than this is an error rather than unbounded memory.
pub const MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `id:` field of this event, if it had one.
    pub id: Option<String>,
    /// The `event:` type, if given (`message` is the default).
    pub event: Option<String>,
    /// The data lines joined with `\n`; empty for a priming event.
    pub data: String,
    /// The `retry:` value carried by this event, in milliseconds.
    pub retry: Option<u64>,
}

/// The stream is unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("SSE event larger than {MAX_EVENT_BYTES} bytes")]
pub struct SseTooLarge;

/// The parser state; feed it chunks with [`SseParser::feed`].
#[derive(Debug, Default)]
pub struct SseParser {
    line: Vec<u8>,
    /// The previous chunk ended in CR: a leading LF in the next one belongs to it.
    after_cr: bool,
    data: String,
    has_data: bool,
    event: Option<String>,
    id: Option<String>,
    retry: Option<u64>,
    seen_field: bool,
    last_event_id: Option<String>,
    last_retry: Option<u64>,
}

impl SseParser {
    /// A fresh parser.
    pub fn new() -> Self {
        Self::default()
    }

    /// The id to resume from: the last `id:` seen on this stream (kept across events).
    pub fn last_event_id(&self) -> Option<&str> {
        self.last_event_id.as_deref().filter(|s| !s.is_empty())
    }

    /// The last reconnection delay the server asked for.
    pub fn retry(&self) -> Option<Duration> {
        self.last_retry.map(Duration::from_millis)
    }

    /// A parser for the next connection of the same stream: the last id and `retry` are kept,
    /// a half-received event is dropped (the server replays it whole after the last id).
    pub fn continue_after(self) -> Self {
        Self {
            last_event_id: self.last_event_id,
            last_retry: self.last_retry,
            ..Self::default()
        }
    }

    /// Feeds a chunk; returns the events it completed.
    pub fn feed(&mut self, chunk: &[u8]) -> Result<Vec<SseEvent>, SseTooLarge> {
        let mut out = Vec::new();
        self.feed_into(chunk, &mut out)?;
        Ok(out)
    }

    /// Feeds a chunk; the events it completed go to `out` (a reader's queue: no list is made
    /// per chunk).
    pub fn feed_into(
        &mut self,
        chunk: &[u8],
        out: &mut impl Extend<SseEvent>,
    ) -> Result<(), SseTooLarge> {
        let mut rest = chunk;
        if self.after_cr {
            self.after_cr = false;
            if let Some(b'\n') = rest.first() {
                rest = &rest[1..];
            }
        }
        while let Some(pos) = memchr::memchr2(b'\n', b'\r', rest) {
            let (head, tail) = rest.split_at(pos);
            let was_cr = tail[0] == b'\r';
            rest = &tail[1..];
            if was_cr {
                match rest.first() {
                    Some(b'\n') => rest = &rest[1..],
                    None => self.after_cr = true,
                    Some(_) => {}
                }
            }
            // A line that arrived whole is read where it is; only one split across chunks
            // goes through the buffer (which keeps its capacity).
            let ev = if self.line.is_empty() {
                self.on_line(head)
            } else {
                let mut line = std::mem::take(&mut self.line);
                line.extend_from_slice(head);
                let ev = self.on_line(&line);
                line.clear();
                self.line = line;
                ev
            };
            if let Some(ev) = ev {
                out.extend([ev]);
            }
        }
        self.line.extend_from_slice(rest);
        if self.line.len() + self.data.len() > MAX_EVENT_BYTES {
            return Err(SseTooLarge);
        }
        Ok(())
    }

    fn on_line(&mut self, line: &[u8]) -> Option<SseEvent> {
        if line.is_empty() {
            return self.dispatch();
        }
        if line[0] == b':' {
            return None; // a comment (keep-alive)
        }
        // The field name is compared as bytes; only a value that is kept is read as text.
        let (field, value) = match memchr::memchr(b':', line) {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        match field {
            b"data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(&text(value));
                self.has_data = true;
                self.seen_field = true;
            }
            b"event" => {
                self.event = Some(text(value).into_owned());
                self.seen_field = true;
            }
            b"id" if !value.contains(&0) => {
                let id = text(value).into_owned();
                self.last_event_id = Some(id.clone());
                self.id = Some(id);
                self.seen_field = true;
            }
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                // Digits only: valid text, and a number unless it overflows.
                let ms = std::str::from_utf8(value).ok().and_then(|v| v.parse().ok());
                self.retry = ms;
                self.last_retry = ms.or(self.last_retry);
                self.seen_field = true;
            }
            _ => {}
        }
        None
    }

    /// A blank line ends an event. Unlike a browser we also hand out events without data (an
    /// id-only priming event or a bare `retry:`), because a resuming client needs to see them.
    fn dispatch(&mut self) -> Option<SseEvent> {
        if !self.seen_field {
            return None;
        }
        self.seen_field = false;
        self.has_data = false;
        Some(SseEvent {
            id: self.id.take(),
            event: self.event.take(),
            data: std::mem::take(&mut self.data),
            retry: self.retry.take(),
        })
    }
}

/// A value as text: as it is when it is UTF-8 (`str::from_utf8` checks a valid value far faster
/// than the lossy decoder walks it), else with each bad sequence replaced.
fn text(value: &[u8]) -> std::borrow::Cow<'_, str> {
    match std::str::from_utf8(value) {
        Ok(s) => std::borrow::Cow::Borrowed(s),
        Err(_) => String::from_utf8_lossy(value),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(p: &mut SseParser, chunks: &[&str]) -> Vec<SseEvent> {
        chunks
            .iter()
            .flat_map(|c| p.feed(c.as_bytes()).unwrap())
            .collect()
    }

    #[test]
    fn priming_event_then_message() {
        let mut p = SseParser::new();
        let evs = all(
            &mut p,
            &[
                "id: s1_1\nretry: 500\ndata:\n\n",
                "event: message\nid: s1_2\ndata: {\"a\":1}\n\n",
            ],
        );
        assert_eq!(evs.len(), 2);
        assert_eq!(evs[0].id.as_deref(), Some("s1_1"));
        assert_eq!(evs[0].data, "");
        assert_eq!(evs[0].retry, Some(500));
        assert_eq!(evs[1].data, "{\"a\":1}");
        assert_eq!(p.last_event_id(), Some("s1_2"));
        assert_eq!(p.retry(), Some(Duration::from_millis(500)));
    }

    #[test]
    fn line_endings_and_split_chunks() {
        let mut p = SseParser::new();
        let evs = all(
            &mut p,
            &["data: a\r", "\ndata: b\r\r", "\n", "data: c\n", "\n"],
        );
        assert_eq!(
            evs.iter().map(|e| e.data.as_str()).collect::<Vec<_>>(),
            ["a\nb", "c"]
        );
    }

    #[test]
    fn byte_by_byte_equals_whole() {
        let text = "id: 1\ndata: x\ndata: y\n\n: keep-alive\n\nid: 2\ndata: z\n\n";
        let mut whole = SseParser::new();
        let a = whole.feed(text.as_bytes()).unwrap();
        let mut bytes = SseParser::new();
        let b: Vec<_> = text
            .as_bytes()
            .iter()
            .flat_map(|c| bytes.feed(std::slice::from_ref(c)).unwrap())
            .collect();
        assert_eq!(a, b);
        assert_eq!(a.len(), 2);
        assert_eq!(a[0].data, "x\ny");
        assert_eq!(bytes.last_event_id(), Some("2"));
    }

    #[test]
    fn comments_alone_dispatch_nothing_and_bad_retry_is_ignored() {
        let mut p = SseParser::new();
        assert!(all(&mut p, &[": ping\n\n", "retry: soon\n\n"]).is_empty());
        assert_eq!(p.retry(), None);
    }

    #[test]
    fn a_field_without_a_colon_or_with_bad_bytes_is_read_as_the_format_says() {
        let mut p = SseParser::new();
        // `data` alone is a data line with an empty value; invalid UTF-8 in a value is
        // replaced, not an error; an unknown field is ignored; an id with NUL is ignored.
        let evs = p
            .feed(b"data\ndata: a\xffb\nfoo: bar\nid: x\0y\nevent:tick\n\n")
            .unwrap();
        assert_eq!(evs.len(), 1);
        assert_eq!(evs[0].data, "\na\u{fffd}b");
        assert_eq!(evs[0].event.as_deref(), Some("tick"));
        assert_eq!(evs[0].id, None);
        assert_eq!(p.last_event_id(), None);
        // A field name with bad bytes is no known field.
        assert!(p.feed(b"d\xffta: x\n\n").unwrap().is_empty());
    }

    #[test]
    fn oversized_event_is_an_error() {
        let mut p = SseParser::new();
        let big = vec![b'x'; MAX_EVENT_BYTES + 1];
        assert_eq!(p.feed(&big), Err(SseTooLarge));
    }
}
