//! The two ways things go wrong: a job body ends without a result ([`JobError`]), or a runtime
//! operation is refused or fails ([`JobRuntimeError`]).

use staunch_store::StoreError;

/// How a job body ends when it has no result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JobError {
    /// The body saw its cancellation (from [`crate::JobContext::check`] and friends) and
    /// stopped. What is recorded depends on why it was cancelled: `cancelled` after a cancel
    /// request, `failed(max_runtime)` after the maximum runtime, nothing at all after a lost
    /// lease (whoever took the lease over decides).
    #[error("cancelled")]
    Cancelled,
    /// The work failed; the message is shown to the model, so say what to do about it.
    #[error("{0}")]
    Failed(String),
}

impl JobError {
    /// A failure with this message.
    pub fn failed(message: impl Into<String>) -> Self {
        Self::Failed(message.into())
    }
}

/// Why a runtime operation (start, get, cancel, configuration) did not happen.
#[derive(Debug, thiserror::Error)]
pub enum JobRuntimeError {
    /// No job tool of that name is registered on this runtime.
    #[error("unknown job tool {0:?}")]
    UnknownTool(String),
    /// The arguments do not fit the tool; nothing was recorded.
    #[error("{0}")]
    InvalidArguments(String),
    /// The idempotency key is unusable (empty, too long, or two different keys were given).
    #[error("invalid idempotency key: {0}")]
    InvalidKey(String),
    /// The key was used before with other arguments: the call is refused, never attached to
    /// the old job.
    #[error(
        "idempotency_key_reused: the key {key:?} was already used{} with different arguments",
        for_job(.existing_job_id)
    )]
    KeyReused {
        /// The key as the caller gave it.
        key: String,
        /// Empty when the caller may not learn it (a key shared by unauthenticated clients).
        existing_job_id: String,
    },
    /// The caller's owner scope has this many jobs queued or running already; nothing was
    /// recorded.
    #[error("too many jobs: this caller already has {limit} jobs queued or running (the limit)")]
    TooManyActive {
        /// The limit (`max_active_per_owner`).
        limit: u64,
    },
    /// The runtime is shutting down and takes no new jobs.
    #[error("the job runtime is shutting down")]
    ShuttingDown,
    /// The configuration cannot work (e.g. a heartbeat no shorter than the lease).
    #[error("invalid job configuration: {0}")]
    Config(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// ` for job <id>`, or nothing when the id is withheld.
fn for_job(id: &str) -> String {
    if id.is_empty() {
        String::new()
    } else {
        format!(" for job {id}")
    }
}
