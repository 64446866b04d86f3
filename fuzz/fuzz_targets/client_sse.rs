//! The client's SSE parser: never panics, and how the bytes are cut into chunks does not change
//! the events, the last event id or the retry (the first byte picks the cut points).
#![no_main]

use libfuzzer_sys::fuzz_target;
use staunch_client::sse::{SseEvent, SseParser};

fuzz_target!(|data: &[u8]| {
    let Some((&step, body)) = data.split_first() else {
        return;
    };
    let whole = run(body, &[body.len()]);
    let step = usize::from(step % 7) + 1;
    let cuts: Vec<usize> = (1..=body.len()).step_by(step).collect();
    let chunked = run(body, &cuts);
    assert_eq!(whole, chunked, "chunking changed what the parser saw");
    // Byte by byte is the hardest cut (a CRLF split across chunks).
    let bytes: Vec<usize> = (1..=body.len()).collect();
    assert_eq!(whole, run(body, &bytes));
});

type Seen = (
    Vec<SseEvent>,
    Option<String>,
    Option<std::time::Duration>,
    bool,
);

/// Feeds `body` cut before each offset in `cuts` (ascending); what came out.
fn run(body: &[u8], cuts: &[usize]) -> Seen {
    let mut p = SseParser::new();
    let mut events = Vec::new();
    let mut at = 0;
    let mut too_large = false;
    for &end in cuts {
        let end = end.min(body.len());
        if end < at {
            continue;
        }
        match p.feed(&body[at..end]) {
            Ok(mut e) => events.append(&mut e),
            Err(_) => {
                too_large = true;
                break;
            }
        }
        at = end;
    }
    if !too_large && at < body.len() {
        match p.feed(&body[at..]) {
            Ok(mut e) => events.append(&mut e),
            Err(_) => too_large = true,
        }
    }
    (
        events,
        p.last_event_id().map(str::to_owned),
        p.retry(),
        too_large,
    )
}
