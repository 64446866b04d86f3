//! Sending a request's response, finished for the era it was made in.
//!
//! Handlers are era-blind. A stateless (2026-07-28) result gets `resultType` (`complete` unless
//! the handler set one), the server's identity in `_meta["io.modelcontextprotocol/serverInfo"]`
//! and, for cacheable methods, `ttlMs`/`cacheScope` (SEP-2549) unless the handler set them;
//! "resource not found" is -32602 in that era (SEP-2164) where it was -32002 before. Session-era
//! results go out as the handler made them.

use serde_json::{Map, Value};
use staunch_protocol::mcp::methods;
use staunch_protocol::stateless::{keys, result_type};
use staunch_protocol::{
    ErrorObject, RequestId, codes, error_response_bytes, result_response_bytes,
};

use super::{Answer, Origin};
use crate::outbound::{Outbound, OutboundKind};
use crate::shared::ServerInner;

/// Methods whose stateless results carry caching hints, with the server's default hint.
fn cache_hint(server: &ServerInner, method: &str) -> Option<(u64, &'static str)> {
    match method {
        "tools/list"
        | "prompts/list"
        | "resources/list"
        | "resources/templates/list"
        | "server/discover" => Some((server.config.list_ttl_ms, "public")),
        // Contents may change at any time and may depend on who asks.
        "resources/read" => Some((0, "private")),
        _ => None,
    }
}

/// Sends the response to request `id` on its connection.
pub(crate) fn respond(
    server: &ServerInner,
    origin: &Origin,
    id: &RequestId,
    method: &str,
    outcome: Result<Answer, ErrorObject>,
) {
    let stateless = origin.peer.is_stateless();
    let (bytes, error_code) = match outcome {
        // Session era: a tool's result is serialised as it is, straight into the response.
        Ok(Answer::Tool(r)) if !stateless => (result_response_bytes(id, &r), None),
        // Stateless era, a result without `_meta` of its own (nearly all): serialised as it
        // is, with the era's two keys added to the written object.
        Ok(Answer::Tool(r)) if r.meta.is_none() => (stateless_tool_response(server, id, &r), None),
        Ok(a) => {
            let mut v = a.into_value();
            if stateless {
                finish_stateless_result(server, method, &mut v);
            }
            (result_response_bytes(id, &v), None)
        }
        Err(mut e) => {
            if stateless && e.code == codes::RESOURCE_NOT_FOUND {
                e.code = codes::INVALID_PARAMS;
            }
            (error_response_bytes(Some(id), &e), Some(e.code))
        }
    };
    origin.conn.send(Outbound {
        related: Some(id.clone()),
        kind: OutboundKind::Response,
        bytes,
        error_code,
    });
}

/// A stateless tool result's response: the result serialised once, then
/// `"_meta":{serverInfo},"resultType":"complete"` written before its closing brace — what
/// [`finish_stateless_result`] makes of a result without `_meta`, without building a value.
fn stateless_tool_response(
    server: &ServerInner,
    id: &RequestId,
    r: &staunch_protocol::mcp::CallToolResult,
) -> Vec<u8> {
    let mut out = result_response_bytes(id, r);
    // `{"jsonrpc":"2.0","id":…,"result":{…}}`: the result object's brace is the last but one.
    if out.ends_with(b"}}") {
        let tail = out.split_off(out.len() - 2);
        out.extend_from_slice(b",\"_meta\":{\"");
        out.extend_from_slice(keys::SERVER_INFO.as_bytes());
        out.extend_from_slice(b"\":");
        out.extend_from_slice(&server.server_info_json);
        out.extend_from_slice(b"},\"resultType\":\"");
        out.extend_from_slice(result_type::COMPLETE.as_bytes());
        out.push(b'"');
        out.extend_from_slice(&tail);
        return out;
    }
    // Not reachable for a serialised struct; the general way all the same.
    let mut v = serde_json::to_value(r).unwrap_or_default();
    finish_stateless_result(server, methods::TOOLS_CALL, &mut v);
    result_response_bytes(id, &v)
}

fn finish_stateless_result(server: &ServerInner, method: &str, v: &mut Value) {
    let Value::Object(obj) = v else { return };
    obj.entry("resultType")
        .or_insert_with(|| Value::from(result_type::COMPLETE));
    let complete = obj.get("resultType").and_then(Value::as_str) == Some(result_type::COMPLETE);
    if complete && let Some((ttl, scope)) = cache_hint(server, method) {
        obj.entry("ttlMs").or_insert_with(|| Value::from(ttl));
        obj.entry("cacheScope")
            .or_insert_with(|| Value::from(scope));
    }
    let meta = obj
        .entry("_meta")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(meta) = meta {
        meta.entry(keys::SERVER_INFO)
            .or_insert_with(|| server.server_info_value.clone());
    }
}
