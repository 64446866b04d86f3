//! `staunch jobs`: the operator's commands on the job store `staunch serve` uses — list, show,
//! cancel and purge jobs without SQL. Table output by default, `--json` for scripts.
//!
//! `cancel` goes through the store exactly as `cancel_<tool>` does (`request_cancel`): a
//! queued job is cancelled at once; a running one is flagged and its worker — on whichever
//! instance holds it — stops at its next heartbeat (at once on PostgreSQL, whose NOTIFY reaches
//! every instance).

use std::time::Duration;

use clap::{Args, Subcommand};
use serde_json::{Value, json};
use staunch_server::units::parse_duration;

use super::table;
use crate::operator_view;
use staunch_store::{CancelOutcome, JobFilter, JobState};

const EXIT_CODES: &str = "\
Exit status:
  0  done
  1  no such job
  2  the store could not be opened or read, or a bad argument";

/// The suggested polling interval shown in `next` sentences (the serve default).
const POLL_MS: u64 = 1000;

/// Options of `staunch jobs`.
#[derive(Debug, Args)]
#[command(after_help = EXIT_CODES)]
pub struct JobsArgs {
    /// The store `staunch serve` uses: a SQLite file, `:memory:`, or a postgres:// URL.
    #[arg(
        long,
        global = true,
        default_value = staunch_store::location::DEFAULT_STORE,
        env = "STAUNCH_STORE"
    )]
    pub store: String,
    /// With a postgres:// store: the schema staunch's tables live in.
    #[arg(long, global = true, env = "STAUNCH_STORE_SCHEMA")]
    pub store_schema: Option<String>,
    /// Print JSON instead of a table.
    #[arg(long, global = true)]
    pub json: bool,
    /// What to do.
    #[command(subcommand)]
    pub command: JobsCommand,
}

/// What `staunch jobs` does.
#[derive(Debug, Subcommand)]
pub enum JobsCommand {
    /// Jobs of every caller, newest first.
    List(ListArgs),
    /// One job: the record, attempts, progress, error and what to do next.
    Show {
        /// The job id, or enough of its first characters to name one job.
        id: String,
    },
    /// Cancel a job: a queued one at once, a running one cooperatively (its worker stops at
    /// its next unit of work, on whichever instance runs it).
    Cancel {
        /// The job id, or enough of its first characters to name one job.
        id: String,
    },
    /// Delete finished (succeeded, failed, cancelled) jobs; queued and running jobs are never
    /// touched.
    Purge {
        /// Delete jobs that finished longer ago than this (e.g. 7d, 12h, 30m).
        #[arg(long, value_parser = parse_duration)]
        older_than: Duration,
    },
}

/// Which jobs `staunch jobs list` shows.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only jobs in this state (repeat or comma-separate: queued,running,succeeded,failed,cancelled).
    #[arg(long, value_delimiter = ',', value_parser = parse_state)]
    pub state: Vec<JobState>,
    /// Only jobs of this tool.
    #[arg(long)]
    pub tool: Option<String>,
    /// Only jobs created longer ago than this (e.g. 1h).
    #[arg(long, value_parser = parse_duration)]
    pub older_than: Option<Duration>,
    /// Only jobs created within this much time (e.g. 10m).
    #[arg(long, value_parser = parse_duration)]
    pub newer_than: Option<Duration>,
    /// At most this many jobs (1 to 1000).
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u16).range(1..=1000))]
    pub limit: u16,
}

fn parse_state(s: &str) -> Result<JobState, String> {
    JobState::parse(s.trim()).map_err(|_| {
        format!("{s:?} is not a job state (queued, running, succeeded, failed, cancelled)")
    })
}

fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Runs the command; returns the exit code.
pub async fn run(args: JobsArgs) -> i32 {
    let opened = match staunch_store::location::resolve_store(&args.store, false) {
        Ok(store) => open_store(&store, args.store_schema.as_deref()).await,
        Err(e) => Err(e.to_string()),
    };
    let result = match opened {
        Ok(stores) => execute(&args, &stores.jobs).await,
        Err(e) => Err(e),
    };
    result.unwrap_or_else(|e| {
        eprintln!("staunch jobs: {e}");
        2
    })
}

async fn execute(
    args: &JobsArgs,
    jobs: &std::sync::Arc<dyn staunch_store::JobStore>,
) -> Result<i32, String> {
    let now = staunch_store::now_ms();
    match &args.command {
        JobsCommand::List(l) => {
            let filter = JobFilter {
                states: l.state.clone(),
                tool: l.tool.clone(),
                created_from_ms: l.newer_than.map(|d| now.saturating_sub(ms(d))),
                created_before_ms: l.older_than.map(|d| now.saturating_sub(ms(d))),
                limit: usize::from(l.limit),
            };
            let list = jobs
                .list_all(&filter)
                .await
                .map_err(|e| format!("listing jobs: {e}"))?;
            if args.json {
                let views: Vec<Value> = list
                    .iter()
                    .map(|j| operator_view(j, now, POLL_MS))
                    .collect();
                println!("{}", pretty(&views));
            } else {
                print!("{}", table::jobs_table(&list, now));
            }
            Ok(0)
        }
        JobsCommand::Show { id } => {
            let id = match resolve(jobs, id).await? {
                Ok(id) => id,
                Err(code) => return Ok(code),
            };
            let id = id.as_str();
            let Some(job) = jobs
                .get(id)
                .await
                .map_err(|e| format!("reading the job: {e}"))?
            else {
                return not_found(id);
            };
            let inputs = jobs
                .inputs(id)
                .await
                .map_err(|e| format!("reading the job's questions: {e}"))?;
            let mut v = operator_view(&job, now, POLL_MS);
            if !inputs.is_empty() {
                v["questions"] = inputs
                    .iter()
                    .map(|i| {
                        json!({
                            "key": i.key,
                            "request": serde_json::from_str::<Value>(&i.request_json).unwrap_or(Value::Null),
                            "answered": i.response_json.is_some(),
                        })
                    })
                    .collect();
            }
            if args.json {
                println!("{}", pretty(&v));
            } else {
                print!("{}", table::job_details(&job, &v));
            }
            Ok(0)
        }
        JobsCommand::Cancel { id } => {
            let id = match resolve(jobs, id).await? {
                Ok(id) => id,
                Err(code) => return Ok(code),
            };
            let id = id.as_str();
            let by = format!("staunch jobs cancel (pid {})", std::process::id());
            let out = jobs
                .request_cancel(id, &by, now)
                .await
                .map_err(|e| format!("cancelling the job: {e}"))?;
            let (job, status, sentence) = match out {
                CancelOutcome::NotFound => return not_found(id),
                CancelOutcome::CancelledQueued(j) => {
                    (j, "cancelled", "It had not started; nothing was done.")
                }
                CancelOutcome::Requested(j) => (
                    j,
                    "cancelling",
                    "Its worker stops at its next unit of work (at the latest at its next \
                     heartbeat); `staunch jobs show` tells when it ended.",
                ),
                CancelOutcome::AlreadyTerminal(j) => (
                    j,
                    "already_ended",
                    "It had already ended; nothing to cancel.",
                ),
            };
            if args.json {
                let v = json!({"job_id": job.id, "status": status, "state": job.state.as_str(), "message": sentence});
                println!("{}", pretty(&v));
            } else {
                println!("{} {status} ({}): {sentence}", job.id, job.state);
            }
            Ok(0)
        }
        JobsCommand::Purge { older_than } => {
            let cutoff = now.saturating_sub(ms(*older_than));
            let n = jobs
                .purge_finished_before(cutoff)
                .await
                .map_err(|e| format!("purging jobs: {e}"))?;
            if args.json {
                println!("{}", json!({"purged": n}));
            } else {
                println!("purged {n} finished job(s) older than {older_than:?}");
            }
            Ok(0)
        }
    }
}

/// The whole id of the one job whose id starts with `given`, or the exit code after saying
/// why there is none (no such job, or several: then their ids, to pick from).
async fn resolve(
    jobs: &std::sync::Arc<dyn staunch_store::JobStore>,
    given: &str,
) -> Result<Result<String, i32>, String> {
    const SHOWN: usize = 5;
    let ids = jobs
        .ids_starting_with(given, SHOWN + 1)
        .await
        .map_err(|e| format!("looking the job up: {e}"))?;
    Ok(match ids.as_slice() {
        [one] => Ok(one.clone()),
        _ if ids.iter().any(|i| i == given) => Ok(given.to_owned()),
        [] => Err(not_found(given)?),
        many => {
            let more = if many.len() > SHOWN { ", …" } else { "" };
            let shown: Vec<&str> = many.iter().take(SHOWN).map(String::as_str).collect();
            eprintln!(
                "staunch jobs: {given:?} is the start of several job ids ({}{more}); give more \
                 of the id",
                shown.join(", ")
            );
            Err(2)
        }
    })
}

fn not_found(id: &str) -> Result<i32, String> {
    eprintln!(
        "staunch jobs: no job {id:?} in this store (finished jobs are purged after their retention)"
    );
    Ok(1)
}

/// A view as indented JSON (a `Value` always serializes).
fn pretty(v: &impl serde::Serialize) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default()
}

/// Opens the store as `staunch serve` does (`--store`, `--store-schema`).
/// Unlike `serve`, a SQLite file that does not exist is an error, not a new empty store: a
/// mistyped path would otherwise list nothing and look fine.
async fn open_store(store: &str, schema: Option<&str>) -> Result<staunch_store::Stores, String> {
    let is_pg = store.starts_with("postgres://") || store.starts_with("postgresql://");
    let file = store.strip_prefix("sqlite:").unwrap_or(store);
    if !is_pg && store != ":memory:" && !std::path::Path::new(file).exists() {
        return Err(format!(
            "no store at {file:?} (pass the --store that staunch serve uses)"
        ));
    }
    staunch_store::open_in(store, schema)
        .await
        .map_err(|e| format!("opening the store {store:?}: {e}"))
}
