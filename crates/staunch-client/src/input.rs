//! Input-required rounds (2026-07-28, SEP-2322): a server that needs the client's input
//! (elicitation, sampling, roots) answers `{resultType: "input_required", inputRequests,
//! requestState}` instead of sending a request of its own, and the client retries the *same*
//! request, as a new request, with `inputResponses` and the `requestState` echoed.
//!
//! The caller answers through a callback that gets the round's `inputRequests` (key →
//! `{method, params}`) and returns the answers (key → result). [`no_answers`] is the callback
//! of callers that cannot answer: the call ends with [`ClientError::InputRequired`], which
//! carries what the server asked.

use std::future::Future;

use serde_json::{Map, Value, json};
use staunch_protocol::mcp::methods;

use crate::era::ResultType;
use crate::{CallOptions, Client, ClientError, Progress};

/// More rounds than this is a server that never finishes asking.
pub const MAX_ROUNDS: usize = 16;

/// One round's questions: key → `{method, params}`.
pub type InputRequests = Map<String, Value>;
/// One round's answers: key → the result the method would have returned.
pub type InputResponses = Map<String, Value>;

/// The answer callback of a caller that cannot answer anything.
pub async fn no_answers(requests: InputRequests) -> Result<InputResponses, ClientError> {
    Err(ClientError::InputRequired(
        json!({"resultType": "input_required", "inputRequests": requests}),
    ))
}

impl Client {
    /// A request that may need input rounds: `answer` is called with each round's
    /// `inputRequests`, and the request is sent again with its answers and the server's
    /// `requestState` until the result is complete (at most [`MAX_ROUNDS`] rounds). Each round
    /// is its own request under `opts` (timeout, progress, cancel).
    pub async fn request_with_input<F, Fut>(
        &self,
        method: &str,
        params: Value,
        opts: &CallOptions,
        mut on_progress: impl FnMut(&Progress) + Send,
        mut answer: F,
    ) -> Result<Value, ClientError>
    where
        F: FnMut(InputRequests) -> Fut,
        Fut: Future<Output = Result<InputResponses, ClientError>>,
    {
        let Value::Object(base) = params else {
            return Err(ClientError::Protocol(
                "input rounds need params to be an object".into(),
            ));
        };
        let mut params = base.clone();
        for _ in 0..MAX_ROUNDS {
            let p = self.start_request(method, Some(Value::Object(params)), opts.progress)?;
            let r = p.wait(opts, &mut on_progress).await?;
            match ResultType::of(&r)? {
                ResultType::Complete | ResultType::Task => return Ok(r),
                ResultType::InputRequired => {}
            }
            let Some(requests) = r.get("inputRequests").and_then(Value::as_object) else {
                return Err(ClientError::Protocol(
                    "an input_required result without inputRequests".into(),
                ));
            };
            let answers = answer(requests.clone()).await?;
            params = base.clone();
            params.insert("inputResponses".into(), Value::Object(answers));
            if let Some(state) = r.get("requestState").filter(|s| !s.is_null()) {
                params.insert("requestState".into(), state.clone());
            }
        }
        Err(ClientError::Protocol(format!(
            "the server still asked for input after {MAX_ROUNDS} rounds"
        )))
    }

    /// `tools/call` with input rounds answered by `answer` (see
    /// [`request_with_input`](Self::request_with_input)).
    pub async fn call_tool_with_input<F, Fut>(
        &self,
        name: &str,
        arguments: Value,
        opts: &CallOptions,
        on_progress: impl FnMut(&Progress) + Send,
        answer: F,
    ) -> Result<Value, ClientError>
    where
        F: FnMut(InputRequests) -> Fut,
        Fut: Future<Output = Result<InputResponses, ClientError>>,
    {
        self.request_with_input(
            methods::TOOLS_CALL,
            json!({"name": name, "arguments": arguments}),
            opts,
            on_progress,
            answer,
        )
        .await
    }
}
