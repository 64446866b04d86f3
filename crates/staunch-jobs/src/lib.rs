//! Durable jobs for staunch: tools whose work outlives a request, survives a crash as a
//! recorded outcome, and never runs twice by accident.
//!
//! - [`JobTool`]: declares a job tool — a typed body `Fn(JobContext, Args) -> Result<R, JobError>`,
//!   whether it has side effects, whether it may be re-run after a crash.
//! - [`JobRuntime`]: one per process. [`JobRuntime::register`] (or [`JobsExt::job_tool`]) puts
//!   a tool's faces on a `ServerBuilder`; [`JobRuntime::start`] runs the worker, the signal
//!   router and the reaper; [`JobRuntime::submit`], [`JobRuntime::cancel`] and
//!   [`JobRuntime::get`] are the operations every face is built on.
//! - [`JobContext`]: what a body receives — cancellation (`check`, `run`, `sleep`, `blocking`),
//!   progress persisted for `get`, and a durable checkpoint.
//! - Faces: the tool face (`start_x`, `get_x`, `cancel_x`, and `x` itself, which waits) and
//!   MCP tasks 2025-11-25 (`tools/call x` with `task`, `tasks/get`, `tasks/result`,
//!   `tasks/cancel`), and the 2026-07-28 tasks extension (`io.modelcontextprotocol/tasks`:
//!   `tools/call x` answers `resultType: "task"`, `tasks/get` inlines the result, `tasks/update`
//!   answers the body's questions — [`JobContext::elicit`] — `tasks/cancel`). All are
//!   projections of one job row in a `staunch_store::JobStore`, so any instance answers.
//!
//! ```text
//! queued ──claim──▶ running ──ok──────────────────────▶ succeeded
//!   │                 ├─error / panic / max runtime──────▶ failed(error | panic | max_runtime)
//!   │                 ├─cancel seen (or body aborted after the grace)──▶ cancelled
//!   │                 └─lease expired (reaper, or a named instance restarting):
//!   │                        cancel requested?               → cancelled
//!   │                        retry-safe with attempts left?  → queued
//!   │                        otherwise                       → failed(lease_lost)
//!   └─cancel──────────────────────────────────────────────▶ cancelled
//! ```
//!
//! Terminal states never change. A success that races a cancel is recorded as a success (the
//! side effects happened); the tasks face still reports `cancelled`, as 2025-11-25 requires.
//! The worker's writes are fenced by its lease token, so an attempt whose lease was taken away
//! writes nothing.
//!
//! Ownership: a job — and its task, its idempotency key, the in-flight dedupe that may join
//! it — belongs to its [`OwnerScope`]: the principal, else the HTTP session that created it,
//! else whoever holds its id. Another scope gets "unknown job" exactly as for an id that never
//! existed.
//!
//! Idempotency: keys are scoped to `(owner scope, tool, key)` (without auth, keyed work is the
//! server's, whatever the session: see [`OwnerScope`]) and honoured for `idempotency_ttl`
//! (24 h by default); the fingerprint is the SHA-256 of the canonical normalised arguments;
//! the same key with the same arguments returns the existing job whatever its state, with
//! other arguments it is refused (`idempotency_key_reused`). Without a key, an identical call
//! of a side-effecting tool that is still queued or running is joined (in-flight dedupe), for
//! agents that re-call a tool after a dropped stream.

// Public items are documented, and `pub` means public: what no other crate can reach is
// `pub(crate)`.
#![warn(missing_docs, unreachable_pub)]
#![forbid(unsafe_code)]

mod call_start;
#[cfg(feature = "cli")]
pub mod cli;
mod config;
mod context;
mod declare;
mod error;
mod idempotency;
mod inputs;
mod operator;
mod reaper;
mod register;
mod runtime;
mod scope;
mod signals;
mod state;
mod task_errors;
mod task_view;
mod tasks;
mod tasks_ext;
mod tool_face;
mod view;
mod worker;

pub use config::{Clock, JobConfig, PrincipalFn};
pub use context::{JobContext, JobUnit};
pub use declare::{JobBody, JobTool};
pub use error::{JobError, JobRuntimeError};
pub use idempotency::{ARG_KEY, META_KEY, canonical_json, fingerprint};
pub use operator::{operator_view, owning_instance, progress_fraction, short_age};
pub use reaper::ReapReport;
pub use register::JobsExt;
pub use runtime::{JobRuntime, Submit, Submitted};
pub use scope::OwnerScope;
pub use task_view::{detailed_task, ext_status};
pub use tasks::RELATED_TASK;
pub use view::{
    REASON_ERROR, REASON_MAX_RUNTIME, REASON_PANIC, iso, job_view, next_step, progress_of,
    task_object, task_status,
};
