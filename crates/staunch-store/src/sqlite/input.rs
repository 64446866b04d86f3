//! The questions a running job asks its client, and their answers, on SQLite (see
//! [`crate::JobStore::ask_inputs`]). Each operation is one `BEGIN IMMEDIATE` transaction.

use rusqlite::{OptionalExtension, params};

use super::{Db, to_i64, write_tx};
use crate::{JobInput, StoreError};

pub(super) async fn ask(
    db: &Db,
    id: &str,
    owner: &str,
    token: u64,
    questions: Vec<(String, String)>,
    now_ms: i64,
) -> Result<bool, StoreError> {
    let (id, owner) = (id.to_owned(), owner.to_owned());
    db.call(move |conn| {
        write_tx(conn, |tx| {
            // The fence: only the lease holder of a running job may ask.
            let held: Option<i64> = tx
                .prepare_cached(
                    "UPDATE staunch_jobs SET updated_ms = ?4 WHERE id = ?1 AND state = 'running' \
                     AND lease_owner = ?2 AND lease_token = ?3 RETURNING 1",
                )?
                .query_row(params![id, owner, to_i64(token), now_ms], |r| r.get(0))
                .optional()?;
            if held.is_none() {
                return Ok(false);
            }
            let mut insert = tx.prepare_cached(
                "INSERT INTO staunch_job_inputs (job_id, input_key, request_json, asked_ms) \
                 VALUES (?1, ?2, ?3, ?4) ON CONFLICT (job_id, input_key) DO NOTHING",
            )?;
            for (key, request) in &questions {
                insert.execute(params![id, key, request, now_ms])?;
            }
            Ok(true)
        })
    })
    .await
}

pub(super) async fn answer(
    db: &Db,
    id: &str,
    answers: Vec<(String, String)>,
    now_ms: i64,
) -> Result<Vec<String>, StoreError> {
    let id = id.to_owned();
    db.call(move |conn| {
        write_tx(conn, |tx| {
            let mut update = tx.prepare_cached(
                "UPDATE staunch_job_inputs SET response_json = ?3, answered_ms = ?4 \
                 WHERE job_id = ?1 AND input_key = ?2 AND response_json IS NULL",
            )?;
            let mut done = Vec::new();
            for (key, response) in &answers {
                if update.execute(params![id, key, response, now_ms])? == 1 {
                    done.push(key.clone());
                }
            }
            if !done.is_empty() {
                tx.execute(
                    "UPDATE staunch_jobs SET updated_ms = ?2 WHERE id = ?1",
                    params![id, now_ms],
                )?;
            }
            Ok(done)
        })
    })
    .await
}

pub(super) async fn list(db: &Db, id: &str) -> Result<Vec<JobInput>, StoreError> {
    let id = id.to_owned();
    db.call(move |conn| {
        let mut stmt = conn.prepare_cached(
            "SELECT input_key, request_json, response_json, asked_ms, answered_ms \
             FROM staunch_job_inputs WHERE job_id = ?1 ORDER BY asked_ms, input_key",
        )?;
        let rows = stmt.query_map([&id], |r| {
            Ok(JobInput {
                key: r.get(0)?,
                request_json: r.get(1)?,
                response_json: r.get(2)?,
                asked_ms: r.get(3)?,
                answered_ms: r.get(4)?,
            })
        })?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    })
    .await
}
