//! [`staunch_store::SessionStore`] cases.

use super::{Harness, T0};
use staunch_store::{SessionRecord, StoreError};

fn record(id: &str, now: i64) -> SessionRecord {
    SessionRecord {
        id: id.into(),
        protocol_version: "2025-11-25".into(),
        client_info_json: r#"{"name":"test-client","version":"1.0"}"#.into(),
        client_capabilities_json: "{}".into(),
        principal: Some("alice".into()),
        log_level: None,
        created_ms: now,
        last_seen_ms: now,
    }
}

pub async fn sessions_crud(h: Harness) {
    let s = &h.a.sessions;
    let r = record("sess-1", T0);
    s.create(r.clone()).await.unwrap();
    assert_eq!(h.b.sessions.get("sess-1").await.unwrap(), Some(r.clone()));
    assert!(matches!(
        s.create(r.clone()).await,
        Err(StoreError::AlreadyExists { .. })
    ));

    assert!(s.touch("sess-1", T0 + 5).await.unwrap());
    assert!(s.touch("sess-1", T0 + 1).await.unwrap());
    assert_eq!(
        s.get("sess-1").await.unwrap().unwrap().last_seen_ms,
        T0 + 5,
        "never backwards"
    );

    assert!(s.update_log_level("sess-1", Some("debug")).await.unwrap());
    assert_eq!(
        s.get("sess-1").await.unwrap().unwrap().log_level.as_deref(),
        Some("debug")
    );
    assert!(s.update_log_level("sess-1", None).await.unwrap());
    assert_eq!(s.get("sess-1").await.unwrap().unwrap().log_level, None);

    assert!(!s.touch("nope", T0).await.unwrap());
    assert!(!s.update_log_level("nope", Some("info")).await.unwrap());

    let anonymous = SessionRecord {
        principal: None,
        ..record("sess-2", T0)
    };
    s.create(anonymous.clone()).await.unwrap();
    assert_eq!(s.get("sess-2").await.unwrap(), Some(anonymous));

    assert!(s.delete("sess-1").await.unwrap());
    assert!(!h.b.sessions.delete("sess-1").await.unwrap());
    assert_eq!(s.get("sess-1").await.unwrap(), None);
    assert!(s.get("sess-2").await.unwrap().is_some());
}

pub async fn sessions_expire_idle(h: Harness) {
    let s = &h.a.sessions;
    s.create(record("old", T0)).await.unwrap();
    s.create(record("fresh", T0)).await.unwrap();
    assert!(s.touch("fresh", T0 + 1_000).await.unwrap());
    // Idle for more than 1 000 ms at T0 + 1 500: only "old" (idle 1 500) goes.
    assert_eq!(
        s.expire_idle(T0 + 1_500, 1_000).await.unwrap(),
        vec!["old".to_owned()]
    );
    assert_eq!(s.get("old").await.unwrap(), None);
    assert!(h.b.sessions.get("fresh").await.unwrap().is_some());
    assert_eq!(
        s.expire_idle(T0 + 1_500, 1_000).await.unwrap(),
        Vec::<String>::new()
    );
    let mut gone = h.b.sessions.expire_idle(T0 + 10_000, 1_000).await.unwrap();
    gone.sort();
    assert_eq!(gone, vec!["fresh".to_owned()]);
}

/// Both instances end up with the secret the first one stored, whatever they proposed.
pub async fn shared_secret_first_writer_wins(h: Harness) {
    let a =
        h.a.sessions
            .shared_secret("state-key", "aaaa", T0)
            .await
            .unwrap();
    assert_eq!(a, "aaaa");
    let b =
        h.b.sessions
            .shared_secret("state-key", "bbbb", T0 + 1)
            .await
            .unwrap();
    assert_eq!(
        b, "aaaa",
        "the second instance must adopt the stored secret"
    );
    let other =
        h.b.sessions
            .shared_secret("other", "cccc", T0)
            .await
            .unwrap();
    assert_eq!(other, "cccc", "names are independent");
}

/// A session deleted through one handle is reported missing through another; held ones and
/// an empty list are not.
pub async fn sessions_missing_after_a_delete_elsewhere(h: Harness) {
    for id in ["keep", "gone"] {
        h.a.sessions.create(record(id, T0)).await.unwrap();
    }
    let ids = vec!["keep".to_string(), "gone".to_string(), "never".to_string()];
    assert_eq!(
        h.b.sessions.missing(&ids).await.unwrap(),
        vec!["never".to_string()]
    );
    assert!(h.a.sessions.delete("gone").await.unwrap());
    assert_eq!(
        h.b.sessions.missing(&ids).await.unwrap(),
        vec!["gone".to_string(), "never".to_string()]
    );
    assert!(h.b.sessions.missing(&[]).await.unwrap().is_empty());
}

/// A client's answer received by one instance is taken, once, by the other; each session
/// keeps at most [`staunch_store::MAX_ANSWERS_PER_SESSION`] waiting; old ones and a deleted or
/// expired session's go.
pub async fn sessions_answers_wait_for_the_instance_that_asked(h: Harness) {
    let (a, b) = (&h.a.sessions, &h.b.sessions);
    a.create(record("sess-a", T0)).await.unwrap();
    a.create(record("sess-b", T0)).await.unwrap();
    assert!(
        b.put_answer("sess-a", r#""staunch-x-1""#, r#"{"result":{}}"#, T0)
            .await
            .unwrap()
    );
    // A second answer to the same request does not replace the first.
    assert!(
        b.put_answer("sess-a", r#""staunch-x-1""#, r#"{"result":2}"#, T0)
            .await
            .unwrap()
    );
    // Not another session's.
    assert_eq!(
        a.take_answer("sess-b", r#""staunch-x-1""#).await.unwrap(),
        None
    );
    assert_eq!(
        a.take_answer("sess-a", r#""staunch-x-1""#)
            .await
            .unwrap()
            .as_deref(),
        Some(r#"{"result":{}}"#)
    );
    assert_eq!(
        a.take_answer("sess-a", r#""staunch-x-1""#).await.unwrap(),
        None,
        "taken once"
    );

    // The cap: the next one is refused, another session is not affected.
    for i in 0..staunch_store::MAX_ANSWERS_PER_SESSION {
        assert!(
            b.put_answer("sess-a", &format!("{i}"), "{}", T0)
                .await
                .unwrap()
        );
    }
    assert!(!b.put_answer("sess-a", "one-more", "{}", T0).await.unwrap());
    assert!(b.put_answer("sess-b", "1", "{}", T0).await.unwrap());
    assert!(b.put_answer("sess-b", "old", "{}", T0).await.unwrap());

    // A deleted session's answers go with it.
    assert!(a.delete("sess-a").await.unwrap());
    assert_eq!(b.take_answer("sess-a", "0").await.unwrap(), None);
    assert!(
        b.put_answer("sess-a", "0", "{}", T0).await.unwrap(),
        "room again"
    );

    // Answers nobody took within the TTL go.
    let later = T0 + staunch_store::ANSWER_TTL_MS + 1;
    a.create(record("sess-c", later)).await.unwrap();
    assert!(b.put_answer("sess-c", "new", "{}", later).await.unwrap());
    assert_eq!(a.take_answer("sess-b", "1").await.unwrap(), None, "too old");
    assert!(a.take_answer("sess-c", "new").await.unwrap().is_some());

    // An expired session's answers go with it.
    assert!(b.put_answer("sess-c", "x", "{}", later).await.unwrap());
    a.touch("sess-c", later).await.unwrap();
    let expired = a.expire_idle(later + 10_000, 5_000).await.unwrap();
    assert!(expired.contains(&"sess-c".to_string()), "{expired:?}");
    assert_eq!(b.take_answer("sess-c", "x").await.unwrap(), None);
}

/// A writer's beat is seen by every handle, never moves back, and a day's silence forgets it.
pub async fn sessions_stream_writers_beat(h: Harness) {
    let (a, b) = (&h.a.sessions, &h.b.sessions);
    assert_eq!(b.writer_seen("w1").await.unwrap(), None);
    a.beat_writer("w1", T0).await.unwrap();
    assert_eq!(b.writer_seen("w1").await.unwrap(), Some(T0));
    a.beat_writer("w1", T0 + 2_000).await.unwrap();
    a.beat_writer("w1", T0 + 1_000).await.unwrap();
    assert_eq!(
        b.writer_seen("w1").await.unwrap(),
        Some(T0 + 2_000),
        "never backwards"
    );
    let tomorrow = T0 + 2_000 + staunch_store::WRITER_ROW_TTL_MS + 1;
    b.beat_writer("w2", tomorrow).await.unwrap();
    assert_eq!(
        a.writer_seen("w1").await.unwrap(),
        None,
        "forgotten after a day"
    );
    assert_eq!(a.writer_seen("w2").await.unwrap(), Some(tomorrow));
}
