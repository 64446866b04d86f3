//! The operator's queries on PostgreSQL (`staunch jobs`, the live page): every principal's
//! jobs by filter, counts by state, ids by prefix, and purging finished jobs.

use super::job_row::job_from_row;
use super::{Pg, execute, query, to_u64};
use crate::job_rows::clamp_limit;
use crate::schema::JOB_COLS;
use crate::{JobFilter, JobRecord, JobState, StoreError};

pub(super) async fn list_all(pg: &Pg, filter: &JobFilter) -> Result<Vec<JobRecord>, StoreError> {
    let states = filter.state_names();
    let limit = clamp_limit(filter.limit) as i64;
    let c = pg.client().await?;
    // One statement for every filter combination: an absent filter is a NULL parameter
    // that matches every row.
    let rows = query(
        &c,
        &format!(
            "SELECT {JOB_COLS} FROM staunch_jobs \
             WHERE ($1::text[] IS NULL OR state = ANY($1)) \
             AND ($2::text IS NULL OR tool = $2) \
             AND ($3::bigint IS NULL OR created_ms >= $3) \
             AND ($4::bigint IS NULL OR created_ms < $4) \
             ORDER BY created_ms DESC, id DESC LIMIT $5"
        ),
        &[
            &states,
            &filter.tool,
            &filter.created_from_ms,
            &filter.created_before_ms,
            &limit,
        ],
    )
    .await?;
    rows.iter().map(job_from_row).collect()
}

pub(super) async fn count_by_state(pg: &Pg) -> Result<Vec<(JobState, u64)>, StoreError> {
    let c = pg.client().await?;
    let rows = query(
        &c,
        "SELECT state, COUNT(*) FROM staunch_jobs GROUP BY state",
        &[],
    )
    .await?;
    rows.iter()
        .map(|r| {
            let n: i64 = r.try_get(1)?;
            Ok((JobState::parse(r.try_get(0)?)?, to_u64(n, "count")?))
        })
        .collect()
}

pub(super) async fn ids_starting_with(
    pg: &Pg,
    prefix: &str,
    limit: usize,
) -> Result<Vec<String>, StoreError> {
    let c = pg.client().await?;
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let rows = query(
        &c,
        "SELECT id FROM staunch_jobs WHERE left(id, length($1)) = $1 ORDER BY id LIMIT $2",
        &[&prefix, &limit],
    )
    .await?;
    rows.iter().map(|r| Ok(r.try_get(0)?)).collect()
}

pub(super) async fn purge_finished_before(
    pg: &Pg,
    finished_before_ms: i64,
) -> Result<u64, StoreError> {
    let mut c = pg.client().await?;
    let tx = c.transaction().await?;
    execute(
        &tx,
        "DELETE FROM staunch_job_inputs WHERE job_id IN (SELECT id FROM staunch_jobs \
         WHERE finished_ms < $1 AND state IN ('succeeded', 'failed', 'cancelled'))",
        &[&finished_before_ms],
    )
    .await?;
    let n = execute(
        &tx,
        "DELETE FROM staunch_jobs WHERE finished_ms < $1 \
         AND state IN ('succeeded', 'failed', 'cancelled')",
        &[&finished_before_ms],
    )
    .await?;
    tx.commit().await?;
    Ok(n)
}
