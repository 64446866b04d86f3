//! A minimal incremental `text/event-stream` parser: enough for MCP (ids, data, retry).

/// One dispatched event.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SseEvent {
    pub id: Option<String>,
    pub data: String,
    pub retry: Option<u64>,
}

#[derive(Default)]
pub struct SseParser {
    buf: Vec<u8>,
    ready: Vec<SseEvent>,
}

impl SseParser {
    /// Adds bytes; complete events become available from [`SseParser::drain`].
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
        while let Some((end, sep)) = find_blank_line(&self.buf) {
            let block: Vec<u8> = self.buf.drain(..end + sep).collect();
            if let Some(e) = parse_block(&block[..end]) {
                self.ready.push(e);
            }
        }
    }

    pub fn drain(&mut self) -> std::vec::Drain<'_, SseEvent> {
        self.ready.drain(..)
    }
}

/// Position and length of the first blank line (`\n\n` or `\r\n\r\n`).
fn find_blank_line(b: &[u8]) -> Option<(usize, usize)> {
    let lf = b.windows(2).position(|w| w == b"\n\n").map(|p| (p, 2));
    let crlf = b.windows(4).position(|w| w == b"\r\n\r\n").map(|p| (p, 4));
    match (lf, crlf) {
        (Some(a), Some(c)) => Some(if a.0 <= c.0 { a } else { c }),
        (a, c) => a.or(c),
    }
}

fn parse_block(block: &[u8]) -> Option<SseEvent> {
    let text = String::from_utf8_lossy(block);
    let mut e = SseEvent::default();
    let mut any = false;
    let mut data_lines: Vec<&str> = Vec::new();
    for line in text.lines() {
        if line.starts_with(':') {
            continue; // a comment (keep-alive)
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "id" => {
                e.id = Some(value.to_string());
                any = true;
            }
            "data" => {
                data_lines.push(value);
                any = true;
            }
            "retry" => {
                e.retry = value.trim().parse().ok();
                any = true;
            }
            _ => {}
        }
    }
    e.data = data_lines.join("\n");
    any.then_some(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_split_events() {
        let mut p = SseParser::default();
        p.push(b"id: 1\nretry: 3000\ndata:\n\nid: 2\ndata: {\"a\"");
        let got: Vec<_> = p.drain().collect();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].id.as_deref(), Some("1"));
        assert_eq!(got[0].retry, Some(3000));
        p.push(b":1}\r\n\r\n: keep-alive\n\n");
        let got: Vec<_> = p.drain().collect();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].data, "{\"a\":1}");
    }
}
