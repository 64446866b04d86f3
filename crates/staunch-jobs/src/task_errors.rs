//! The JSON-RPC errors both task faces (2025-11-25 tasks and the 2026-07-28 extension) answer
//! with: one wording and one code per refusal, whichever era asked.

use staunch_server::ToolError;
use staunch_server::protocol::{ErrorObject, codes};

use crate::error::JobRuntimeError;

pub(crate) fn rpc(code: i64, message: impl Into<String>) -> ToolError {
    ToolError::Rpc(ErrorObject::new(code, message))
}

pub(crate) fn internal(what: &str, e: impl std::fmt::Display) -> ToolError {
    rpc(codes::INTERNAL_ERROR, format!("{what}: {e}"))
}

/// A task id this caller cannot see: never existed, expired, or another owner's (the same
/// answer for all three, so an id reveals nothing).
pub(crate) fn unknown_task(id: &str) -> ToolError {
    rpc(
        codes::INVALID_PARAMS,
        format!("unknown task {id:?} (it never existed, expired, or is not yours)"),
    )
}

/// A task-creating call the runtime refused: bad arguments or key → invalid params, a full
/// quota or a shutdown → server busy, anything else → internal error.
pub(crate) fn refused_start(e: JobRuntimeError) -> ToolError {
    match e {
        JobRuntimeError::InvalidArguments(_)
        | JobRuntimeError::InvalidKey(_)
        | JobRuntimeError::KeyReused { .. } => rpc(codes::INVALID_PARAMS, e.to_string()),
        JobRuntimeError::ShuttingDown | JobRuntimeError::TooManyActive { .. } => {
            rpc(codes::SERVER_BUSY, e.to_string())
        }
        e => internal("recording the task failed", e),
    }
}

/// A replayed idempotency key that names a task this caller cannot read.
pub(crate) fn key_of_another_owner() -> ToolError {
    rpc(
        codes::INVALID_PARAMS,
        "the idempotency key is bound to a task of another session; use a new key",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(e: ToolError) -> i64 {
        match e {
            ToolError::Rpc(o) => o.code,
            other => panic!("not an rpc error: {other:?}"),
        }
    }

    #[test]
    fn a_refused_start_gets_the_code_of_its_cause() {
        assert_eq!(
            code(refused_start(JobRuntimeError::InvalidKey("empty".into()))),
            codes::INVALID_PARAMS
        );
        assert_eq!(
            code(refused_start(JobRuntimeError::TooManyActive { limit: 3 })),
            codes::SERVER_BUSY
        );
        assert_eq!(
            code(refused_start(JobRuntimeError::Config("x".into()))),
            codes::INTERNAL_ERROR
        );
    }
}
