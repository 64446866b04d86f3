//! The whole protocol of the ceiling: borrow-parse one frame, answer it, serialise.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

#[derive(Deserialize)]
struct Frame<'a> {
    #[serde(borrow)]
    id: Option<&'a RawValue>,
    #[serde(borrow)]
    method: Option<Cow<'a, str>>,
    #[serde(borrow)]
    params: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct CallParams<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
    #[serde(borrow)]
    arguments: Option<EchoArgs<'a>>,
}

#[derive(Deserialize)]
struct EchoArgs<'a> {
    #[serde(borrow)]
    text: Cow<'a, str>,
}

#[derive(Serialize)]
struct Reply<'a, T: Serialize> {
    jsonrpc: &'static str,
    id: &'a RawValue,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<T>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<RpcError>,
}

#[derive(Serialize)]
struct RpcError {
    code: i32,
    message: &'static str,
}

#[derive(Serialize)]
struct Text<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: &'a str,
}

#[derive(Serialize)]
struct EchoResult<'a> {
    content: [Text<'a>; 1],
    #[serde(rename = "isError")]
    is_error: bool,
}

const INITIALIZE: &str = r#"{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"bare-peer","version":"0.1.0"}}"#;
const TOOLS: &str = r#"{"tools":[{"name":"echo","description":"Echo the given text back","inputSchema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}}]}"#;

/// The answer to one frame, or `None` for a notification (or a frame that is not a request).
pub fn answer(frame: &[u8]) -> Option<Vec<u8>> {
    let Ok(f) = serde_json::from_slice::<Frame<'_>>(frame) else {
        let e = RpcError {
            code: -32700,
            message: "parse error",
        };
        return Some(reply::<()>(null(), None, Some(e)));
    };
    let (id, method) = (f.id?, f.method?);
    Some(match method.as_ref() {
        "initialize" => reply(id, Some(raw(INITIALIZE)), None),
        "ping" => reply(id, Some(raw("{}")), None),
        "tools/list" => reply(id, Some(raw(TOOLS)), None),
        "tools/call" => match f
            .params
            .map(|p| serde_json::from_str::<CallParams<'_>>(p.get()))
        {
            Some(Ok(CallParams {
                name,
                arguments: Some(a),
            })) if name == "echo" => {
                let result = EchoResult {
                    content: [Text {
                        kind: "text",
                        text: &a.text,
                    }],
                    is_error: false,
                };
                reply(id, Some(result), None)
            }
            _ => reply::<()>(
                id,
                None,
                Some(RpcError {
                    code: -32602,
                    message: "unknown tool",
                }),
            ),
        },
        _ => reply::<()>(
            id,
            None,
            Some(RpcError {
                code: -32601,
                message: "method not found",
            }),
        ),
    })
}

fn reply<T: Serialize>(id: &RawValue, result: Option<T>, error: Option<RpcError>) -> Vec<u8> {
    let r = Reply {
        jsonrpc: "2.0",
        id,
        result,
        error,
    };
    serde_json::to_vec(&r).unwrap_or_default()
}

fn raw(s: &'static str) -> &'static RawValue {
    // The constants above are valid JSON; a typo would show at the first request.
    serde_json::from_str(s).unwrap_or_else(|_| null())
}

fn null() -> &'static RawValue {
    serde_json::from_str("null").expect("null is JSON")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_echo() {
        let a = answer(br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi \"x\""}}}"#).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&a).unwrap();
        assert_eq!(v["id"], 7);
        assert_eq!(v["result"]["content"][0]["text"], "hi \"x\"");
    }

    #[test]
    fn notifications_get_no_answer() {
        assert!(answer(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).is_none());
    }
}
