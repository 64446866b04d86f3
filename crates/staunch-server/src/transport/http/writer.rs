//! Which process writes a stream, and whether it is still alive.
//!
//! A stream id starts with the prefix of the process that writes it (`{prefix}-{n}`). Every
//! process serving HTTP says it is alive in the session store every [`BEAT`]. An instance that
//! follows a stream another one writes (a client resumed there) checks that writer while the
//! stream is quiet: silent for more than [`STALE`], it is taken for dead (killed, or its host
//! gone), and the follower stops waiting for a response that will never come — so a resumed
//! stream ends within a bound instead of staying open and silent.

use std::sync::Arc;
use std::time::Duration;

use super::HttpState;
use super::stream_id::stream_prefix;

/// How often this process says it is alive.
pub(super) const BEAT: Duration = Duration::from_secs(2);

/// How long a writer may be silent before a follower takes it for dead: several beats, and
/// room for clocks that differ a little between hosts.
pub(super) const STALE: Duration = Duration::from_secs(10);

/// The writer prefix of a stream id (`None` for an id of another form).
fn writer_of(stream_id: &str) -> Option<&str> {
    stream_id
        .rsplit_once('-')
        .map(|(w, _)| w)
        .filter(|w| !w.is_empty())
}

/// Says every [`BEAT`] that this process is alive, until the task is dropped.
pub(super) async fn beat(state: Arc<HttpState>) {
    let mut tick = tokio::time::interval(BEAT);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let now = staunch_store::now_ms();
        if let Err(e) = state.sessions_store.beat_writer(stream_prefix(), now).await {
            tracing::warn!(error = %e, "could not record that this instance is alive");
        }
    }
}

/// Whether the process writing `stream_id` is known to be dead: it said it was alive once,
/// and not for [`STALE`]. A writer that never said so (an older version), this process, or a
/// store that cannot answer: not known dead, keep following.
pub(super) async fn writer_gone(state: &HttpState, stream_id: &str) -> bool {
    let Some(writer) = writer_of(stream_id) else {
        return false;
    };
    if writer == stream_prefix() {
        return false;
    }
    match state.sessions_store.writer_seen(writer).await {
        Ok(Some(seen)) => is_stale(seen, staunch_store::now_ms()),
        Ok(None) => false,
        Err(e) => {
            tracing::debug!(error = %e, "could not read a stream writer's liveness");
            false
        }
    }
}

fn is_stale(seen_ms: i64, now_ms: i64) -> bool {
    now_ms.saturating_sub(seen_ms) > i64::try_from(STALE.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_writer_is_the_stream_id_before_its_counter() {
        assert_eq!(writer_of("0a1b2c3d4e5f6071-1f"), Some("0a1b2c3d4e5f6071"));
        assert_eq!(writer_of("no-counter-here-7"), Some("no-counter-here"));
        assert_eq!(writer_of("plain"), None);
        assert_eq!(writer_of("-7"), None);
    }

    #[test]
    fn a_writer_is_dead_only_after_it_was_silent_for_longer_than_stale() {
        let stale = i64::try_from(STALE.as_millis()).unwrap();
        assert!(!is_stale(1_000, 1_000 + stale));
        assert!(is_stale(1_000, 1_000 + stale + 1));
        // A clock a little behind the writer's is not a death.
        assert!(!is_stale(2_000, 1_000));
    }
}
