//! The questions a running job asks its client, and their answers, on PostgreSQL (see
//! [`crate::JobStore::ask_inputs`]). The fence and the inserts share one transaction; an answer
//! is a guarded UPDATE, so two instances answering one key store exactly one answer.

use super::{Pg, execute, query_opt, to_i64};
use crate::{JobInput, StoreError};

pub(super) async fn ask(
    pg: &Pg,
    id: &str,
    owner: &str,
    token: u64,
    questions: Vec<(String, String)>,
    now_ms: i64,
) -> Result<bool, StoreError> {
    let mut c = pg.client().await?;
    let tx = c.transaction().await?;
    let held = query_opt(
        &tx,
        "UPDATE staunch_jobs SET updated_ms = $4 WHERE id = $1 AND state = 'running' \
         AND lease_owner = $2 AND lease_token = $3 RETURNING 1",
        &[&id, &owner, &to_i64(token), &now_ms],
    )
    .await?;
    if held.is_none() {
        return Ok(false);
    }
    for (key, request) in &questions {
        execute(
            &tx,
            "INSERT INTO staunch_job_inputs (job_id, input_key, request_json, asked_ms) \
             VALUES ($1, $2, $3, $4) ON CONFLICT (job_id, input_key) DO NOTHING",
            &[&id, key, request, &now_ms],
        )
        .await?;
    }
    tx.commit().await?;
    Ok(true)
}

pub(super) async fn answer(
    pg: &Pg,
    id: &str,
    answers: Vec<(String, String)>,
    now_ms: i64,
) -> Result<Vec<String>, StoreError> {
    let mut c = pg.client().await?;
    let tx = c.transaction().await?;
    let mut done = Vec::new();
    for (key, response) in &answers {
        let n = execute(
            &tx,
            "UPDATE staunch_job_inputs SET response_json = $3, answered_ms = $4 \
             WHERE job_id = $1 AND input_key = $2 AND response_json IS NULL",
            &[&id, key, response, &now_ms],
        )
        .await?;
        if n == 1 {
            done.push(key.clone());
        }
    }
    if !done.is_empty() {
        execute(
            &tx,
            "UPDATE staunch_jobs SET updated_ms = $2 WHERE id = $1",
            &[&id, &now_ms],
        )
        .await?;
    }
    tx.commit().await?;
    Ok(done)
}

pub(super) async fn list(pg: &Pg, id: &str) -> Result<Vec<JobInput>, StoreError> {
    let rows = pg
        .read(
            "SELECT input_key, request_json, response_json, asked_ms, answered_ms \
             FROM staunch_job_inputs WHERE job_id = $1 ORDER BY asked_ms, input_key",
            &[&id],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| JobInput {
            key: r.get(0),
            request_json: r.get(1),
            response_json: r.get(2),
            asked_ms: r.get(3),
            answered_ms: r.get(4),
        })
        .collect())
}
