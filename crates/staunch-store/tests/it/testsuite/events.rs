//! [`staunch_store::EventStore`] cases.

use std::collections::HashMap;

use super::{Harness, T0};
use staunch_store::{BatchOutcome, EventWrite, Replay, StoreError, StoredEvent};

fn events(r: Replay) -> Vec<StoredEvent> {
    match r {
        Replay::Events(e) => e,
        other => panic!("expected events, got {other:?}"),
    }
}

fn seqs(r: Replay) -> Vec<u64> {
    events(r).iter().map(|e| e.seq).collect()
}

pub async fn events_seq_is_per_stream_and_replay_is_exact(h: Harness) {
    let ev = &h.a.events;
    ev.create_stream("s1", "st1", T0).await.unwrap();
    // Creating again for the same session is a no-op.
    ev.create_stream("s1", "st1", T0).await.unwrap();
    for i in 1..=5u64 {
        let seq = ev
            .append("s1", "st1", format!(r#"{{"n":{i}}}"#), T0 + i as i64)
            .await
            .unwrap();
        assert_eq!(seq, i, "seq starts at 1 and grows by 1");
    }
    let after2 = events(ev.replay_after("s1", "st1", 2, 100).await.unwrap());
    assert_eq!(
        after2.iter().map(|e| e.seq).collect::<Vec<_>>(),
        vec![3, 4, 5]
    );
    assert_eq!(
        after2[0],
        StoredEvent {
            stream_id: "st1".into(),
            seq: 3,
            payload: r#"{"n":3}"#.into(),
            created_ms: T0 + 3
        }
    );
    assert_eq!(
        seqs(ev.replay_after("s1", "st1", 0, 2).await.unwrap()),
        vec![1, 2]
    );
    assert_eq!(
        seqs(ev.replay_after("s1", "st1", 5, 100).await.unwrap()),
        Vec::<u64>::new()
    );
    assert_eq!(
        seqs(ev.replay_after("s1", "st1", 99, 100).await.unwrap()),
        Vec::<u64>::new()
    );
    // Another handle on the same database sees the same events.
    assert_eq!(
        seqs(h.b.events.replay_after("s1", "st1", 3, 100).await.unwrap()),
        vec![4, 5]
    );
    // A second stream numbers its own events from 1.
    ev.create_stream("s1", "st2", T0).await.unwrap();
    assert_eq!(ev.append("s1", "st2", "{}".into(), T0).await.unwrap(), 1);
}

pub async fn events_never_cross_streams_or_sessions(h: Harness) {
    let ev = &h.a.events;
    ev.create_stream("s1", "a", T0).await.unwrap();
    ev.create_stream("s1", "b", T0).await.unwrap();
    ev.create_stream("s2", "c", T0).await.unwrap();
    ev.append("s1", "a", r#""a1""#.into(), T0).await.unwrap();
    ev.append("s1", "a", r#""a2""#.into(), T0).await.unwrap();
    ev.append("s1", "b", r#""b1""#.into(), T0).await.unwrap();
    ev.append("s2", "c", r#""c1""#.into(), T0).await.unwrap();

    let b = events(ev.replay_after("s1", "b", 0, 100).await.unwrap());
    assert_eq!(b.len(), 1);
    assert_eq!(
        (b[0].stream_id.as_str(), b[0].seq, b[0].payload.as_str()),
        ("b", 1, r#""b1""#)
    );

    // Another session's stream is unknown, whatever its id.
    assert_eq!(
        ev.replay_after("s2", "a", 0, 100).await.unwrap(),
        Replay::UnknownStream
    );
    assert_eq!(
        ev.replay_after("s1", "c", 0, 100).await.unwrap(),
        Replay::UnknownStream
    );
    assert_eq!(
        ev.replay_after("s1", "nope", 0, 100).await.unwrap(),
        Replay::UnknownStream
    );
    assert!(matches!(
        ev.append("s2", "a", "{}".into(), T0).await,
        Err(StoreError::UnknownStream(_))
    ));
    assert!(matches!(
        ev.create_stream("s2", "a", T0).await,
        Err(StoreError::AlreadyExists { .. })
    ));
    assert!(!ev.mark_closed("s2", "a", T0).await.unwrap());

    // Deleting a session removes exactly its streams.
    assert_eq!(ev.delete_session("s2").await.unwrap(), 1);
    assert_eq!(
        h.b.events.replay_after("s2", "c", 0, 100).await.unwrap(),
        Replay::UnknownStream
    );
    assert_eq!(
        seqs(ev.replay_after("s1", "a", 0, 100).await.unwrap()),
        vec![1, 2]
    );
    assert_eq!(ev.delete_session("s1").await.unwrap(), 2);
    assert_eq!(
        ev.replay_after("s1", "a", 0, 100).await.unwrap(),
        Replay::UnknownStream
    );
}

pub async fn events_gone_after_retention_by_count(h: Harness) {
    let ev = &h.a.events;
    ev.create_stream("s", "st", T0).await.unwrap();
    ev.create_stream("s", "other", T0).await.unwrap();
    for _ in 0..10 {
        ev.append("s", "st", "{}".into(), T0).await.unwrap();
    }
    ev.append("s", "other", "{}".into(), T0).await.unwrap();
    // Keep the newest 3 of each stream; nothing is old enough to go by age.
    assert_eq!(ev.purge(T0, 3_600_000, 3).await.unwrap(), 7);
    assert_eq!(
        ev.replay_after("s", "st", 0, 100).await.unwrap(),
        Replay::Gone { oldest_retained: 8 }
    );
    assert_eq!(
        h.b.events.replay_after("s", "st", 6, 100).await.unwrap(),
        Replay::Gone { oldest_retained: 8 }
    );
    assert_eq!(
        seqs(ev.replay_after("s", "st", 7, 100).await.unwrap()),
        vec![8, 9, 10]
    );
    assert_eq!(
        seqs(ev.replay_after("s", "other", 0, 100).await.unwrap()),
        vec![1]
    );
    // Purging again changes nothing; the horizon moves only with new events.
    assert_eq!(ev.purge(T0, 3_600_000, 3).await.unwrap(), 0);
    assert_eq!(ev.append("s", "st", "{}".into(), T0).await.unwrap(), 11);
    assert_eq!(ev.purge(T0, 3_600_000, 3).await.unwrap(), 1);
    assert_eq!(
        ev.replay_after("s", "st", 7, 100).await.unwrap(),
        Replay::Gone { oldest_retained: 9 }
    );
    assert_eq!(
        seqs(ev.replay_after("s", "st", 8, 100).await.unwrap()),
        vec![9, 10, 11]
    );
}

pub async fn events_gone_after_retention_by_age(h: Harness) {
    let ev = &h.a.events;
    ev.create_stream("s", "st", T0).await.unwrap();
    for _ in 0..3 {
        ev.append("s", "st", "{}".into(), T0).await.unwrap();
    }
    for _ in 0..2 {
        ev.append("s", "st", "{}".into(), T0 + 10_000)
            .await
            .unwrap();
    }
    // Cutoff T0 + 7 000: the first three are older.
    assert_eq!(ev.purge(T0 + 12_000, 5_000, 1_000).await.unwrap(), 3);
    assert_eq!(
        ev.replay_after("s", "st", 2, 100).await.unwrap(),
        Replay::Gone { oldest_retained: 4 }
    );
    assert_eq!(
        seqs(h.b.events.replay_after("s", "st", 3, 100).await.unwrap()),
        vec![4, 5]
    );
    assert_eq!(ev.purge(T0 + 12_000, 5_000, 1_000).await.unwrap(), 0);
    // An open stream whose events all aged out stays, and says so.
    assert_eq!(ev.purge(T0 + 100_000, 5_000, 1_000).await.unwrap(), 2);
    assert_eq!(
        ev.replay_after("s", "st", 0, 100).await.unwrap(),
        Replay::Gone { oldest_retained: 6 }
    );
    assert_eq!(
        seqs(ev.replay_after("s", "st", 5, 100).await.unwrap()),
        Vec::<u64>::new()
    );
    assert_eq!(
        ev.append("s", "st", "{}".into(), T0 + 100_000)
            .await
            .unwrap(),
        6
    );
}

pub async fn events_closed_streams_keep_events_then_go(h: Harness) {
    let ev = &h.a.events;
    ev.create_stream("s", "st", T0).await.unwrap();
    ev.append("s", "st", "1".into(), T0).await.unwrap();
    ev.append("s", "st", "2".into(), T0).await.unwrap();
    assert!(ev.mark_closed("s", "st", T0 + 100).await.unwrap());
    assert!(
        ev.mark_closed("s", "st", T0 + 200).await.unwrap(),
        "idempotent"
    );
    assert!(matches!(
        ev.append("s", "st", "3".into(), T0 + 300).await,
        Err(StoreError::StreamClosed(_))
    ));
    // Closed is not gone: the client may still come back for the response.
    assert_eq!(
        seqs(h.b.events.replay_after("s", "st", 0, 100).await.unwrap()),
        vec![1, 2]
    );
    assert_eq!(ev.purge(T0 + 150, 3_600_000, 100).await.unwrap(), 0);
    assert_eq!(
        seqs(ev.replay_after("s", "st", 1, 100).await.unwrap()),
        vec![2]
    );
    // Once its events aged out and it was closed long enough ago, the stream itself goes.
    assert_eq!(ev.purge(T0 + 10_000_000, 1_000, 100).await.unwrap(), 2);
    assert_eq!(
        ev.replay_after("s", "st", 0, 100).await.unwrap(),
        Replay::UnknownStream
    );
}

pub async fn events_concurrent_appends_are_gap_free(h: Harness) {
    const TASKS: usize = 8;
    const PER_TASK: usize = 25;
    h.a.events.create_stream("s", "st", T0).await.unwrap();
    let mut handles = Vec::new();
    for t in 0..TASKS {
        // Alternate handles: two connections (two "instances") append to one stream.
        let ev = if t % 2 == 0 {
            h.a.events.clone()
        } else {
            h.b.events.clone()
        };
        handles.push(tokio::spawn(async move {
            let mut got = Vec::new();
            for i in 0..PER_TASK {
                let payload = format!(r#""{t}-{i}""#);
                let seq = ev.append("s", "st", payload.clone(), T0).await.unwrap();
                got.push((seq, payload));
            }
            got
        }));
    }
    let mut by_seq = HashMap::new();
    for handle in handles {
        for (seq, payload) in handle.await.unwrap() {
            assert!(
                by_seq.insert(seq, payload).is_none(),
                "seq {seq} handed out twice"
            );
        }
    }
    let total = (TASKS * PER_TASK) as u64;
    let mut all: Vec<u64> = by_seq.keys().copied().collect();
    all.sort_unstable();
    assert_eq!(
        all,
        (1..=total).collect::<Vec<_>>(),
        "sequence must be gap-free"
    );
    let replay = events(h.a.events.replay_after("s", "st", 0, 10_000).await.unwrap());
    assert_eq!(replay.len() as u64, total);
    for (i, e) in replay.iter().enumerate() {
        assert_eq!(e.seq, i as u64 + 1);
        assert_eq!(
            Some(&e.payload),
            by_seq.get(&e.seq),
            "payload stored under its seq"
        );
    }
}

pub async fn events_batches_apply_in_order_and_skip_what_cannot_apply(h: Harness) {
    let ev = &h.a.events;
    ev.create_stream("other", "foreign", T0).await.unwrap();
    let w = |s: &str, st: &str, p: &str| EventWrite::Append {
        session_id: s.into(),
        stream_id: st.into(),
        payload: p.into(),
    };
    let batch = vec![
        EventWrite::Create {
            session_id: "s1".into(),
            stream_id: "b1".into(),
        },
        w("s1", "b1", "1"),
        w("s1", "b1", "2"),
        // Skipped, the rest still applies: another session's stream, an unknown one.
        w("s1", "foreign", "x"),
        w("s1", "nope", "x"),
        EventWrite::Create {
            session_id: "s1".into(),
            stream_id: "foreign".into(),
        },
        w("s1", "b1", "3"),
        EventWrite::Close {
            session_id: "s1".into(),
            stream_id: "b1".into(),
        },
        // After the close nothing more is appended.
        w("s1", "b1", "4"),
    ];
    let out = ev.write_batch(batch, T0).await.unwrap();
    assert_eq!(
        out,
        BatchOutcome {
            applied: 5,
            skipped: 4
        }
    );
    let got = events(ev.replay_after("s1", "b1", 0, 100).await.unwrap());
    assert_eq!(
        got.iter().map(|e| e.payload.as_str()).collect::<Vec<_>>(),
        ["1", "2", "3"]
    );
    assert_eq!(got.iter().map(|e| e.seq).collect::<Vec<_>>(), [1, 2, 3]);
    assert!(matches!(
        ev.replay_after("s1", "foreign", 0, 10).await.unwrap(),
        Replay::UnknownStream
    ));
    assert!(events(ev.replay_after("other", "foreign", 0, 10).await.unwrap()).is_empty());
}

/// A batch carries whole streams (create, appends, close), appends to streams created
/// earlier, and streams whose writes take other shapes; each must end exactly as if the
/// writes had been applied one at a time.
pub async fn events_batched_stream_runs_match_single_writes(h: Harness) {
    let ev = &h.a.events;
    let create = |s: &str, st: &str| EventWrite::Create {
        session_id: s.into(),
        stream_id: st.into(),
    };
    let append = |s: &str, st: &str, p: &str| EventWrite::Append {
        session_id: s.into(),
        stream_id: st.into(),
        payload: p.into(),
    };
    let close = |s: &str, st: &str| EventWrite::Close {
        session_id: s.into(),
        stream_id: st.into(),
    };
    // Streams that exist before the batch: one open with two events, one closed, one of
    // another session.
    ev.create_stream("s1", "open", T0).await.unwrap();
    ev.append("s1", "open", "o1".into(), T0).await.unwrap();
    ev.append("s1", "open", "o2".into(), T0).await.unwrap();
    ev.create_stream("s1", "shut", T0).await.unwrap();
    ev.mark_closed("s1", "shut", T0).await.unwrap();
    ev.create_stream("s2", "theirs", T0).await.unwrap();

    let batch = vec![
        // A quick call whole: created, answered, closed.
        create("s1", "quick"),
        append("s1", "quick", "q1"),
        // Interleaved with other streams (order across streams does not matter).
        append("s1", "open", "o3"),
        append("s1", "quick", "q2"),
        close("s1", "quick"),
        // A stream created and left open.
        create("s1", "live"),
        append("s1", "live", "l1"),
        append("s1", "open", "o4"),
        // Created and closed with nothing in it.
        create("s1", "empty"),
        close("s1", "empty"),
        // Appends to a closed stream are skipped; its close is idempotent.
        append("s1", "shut", "x"),
        close("s1", "shut"),
        // Another session's stream: its create is skipped and so are the appends.
        create("s1", "theirs"),
        append("s1", "theirs", "x"),
        close("s1", "theirs"),
        // Not a run (an append after the close): each write applies on its own.
        create("s1", "twice"),
        close("s1", "twice"),
        append("s1", "twice", "x"),
    ];
    let out = ev.write_batch(batch, T0 + 5).await.unwrap();
    assert_eq!(
        out,
        BatchOutcome {
            applied: 4 + 2 + 2 + 2 + 1 + 2,
            skipped: 1 + 3 + 1
        }
    );

    let payloads = |r: Replay| -> Vec<(u64, String)> {
        events(r).into_iter().map(|e| (e.seq, e.payload)).collect()
    };
    assert_eq!(
        payloads(ev.replay_after("s1", "quick", 0, 10).await.unwrap()),
        [(1, "q1".into()), (2, "q2".into())]
    );
    assert_eq!(
        payloads(ev.replay_after("s1", "open", 0, 10).await.unwrap()),
        [
            (1, "o1".into()),
            (2, "o2".into()),
            (3, "o3".into()),
            (4, "o4".into())
        ]
    );
    assert_eq!(
        payloads(ev.replay_after("s1", "live", 0, 10).await.unwrap()),
        [(1, "l1".into())]
    );
    assert!(events(ev.replay_after("s1", "empty", 0, 10).await.unwrap()).is_empty());
    assert!(events(ev.replay_after("s1", "twice", 0, 10).await.unwrap()).is_empty());
    assert!(events(ev.replay_after("s1", "shut", 0, 10).await.unwrap()).is_empty());
    assert!(events(ev.replay_after("s2", "theirs", 0, 10).await.unwrap()).is_empty());
    assert!(matches!(
        ev.replay_after("s1", "theirs", 0, 10).await.unwrap(),
        Replay::UnknownStream
    ));

    // Closed by the batch: no more appends. Left open: the next seq follows the batch's.
    assert!(matches!(
        ev.append("s1", "quick", "late".into(), T0 + 6).await,
        Err(StoreError::StreamClosed(_))
    ));
    assert!(matches!(
        ev.append("s1", "empty", "late".into(), T0 + 6).await,
        Err(StoreError::StreamClosed(_))
    ));
    assert_eq!(
        ev.append("s1", "live", "l2".into(), T0 + 6).await.unwrap(),
        2
    );
    assert_eq!(
        ev.append("s1", "open", "o5".into(), T0 + 6).await.unwrap(),
        5
    );

    // The batch's close time is the stream's: retention drops the closed, drained streams
    // once they are older than the cutoff, and keeps the open ones.
    ev.purge(T0 + 5 + 1_000, 500, 1_000).await.unwrap();
    for gone in ["quick", "empty", "twice"] {
        assert!(
            matches!(
                ev.replay_after("s1", gone, 0, 10).await.unwrap(),
                Replay::UnknownStream
            ),
            "{gone} should be purged"
        );
    }
    assert!(matches!(
        ev.replay_after("s1", "live", 0, 10).await.unwrap(),
        Replay::Gone { .. } | Replay::Events(_)
    ));
}
