//! JSON-RPC and MCP error codes.
//!
//! The -32700..-32600 block is JSON-RPC 2.0's own. -32000..-32019 are implementation-defined in
//! MCP; staunch uses a few of them for its limits so a client can tell them apart. From
//! 2026-07-28, -32020..-32099 belong to the specification.

/// The frame is not valid JSON.
pub const PARSE_ERROR: i64 = -32700;
/// The JSON is not a valid JSON-RPC request (wrong `jsonrpc`, bad id, missing method, batch …).
pub const INVALID_REQUEST: i64 = -32600;
/// No such method.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// The method exists but its params are malformed.
pub const INVALID_PARAMS: i64 = -32602;
/// The server failed (a handler panicked, a store broke).
pub const INTERNAL_ERROR: i64 = -32603;

/// staunch: the server is at its concurrency limit; retry later.
pub const SERVER_BUSY: i64 = -32000;
/// staunch: the request ran past its own deadline (shorter than the client's timeout).
pub const DEADLINE_EXCEEDED: i64 = -32001;
/// MCP (up to 2025-11-25): resource not found.
pub const RESOURCE_NOT_FOUND: i64 = -32002;

/// 2026-07-28: an HTTP header (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`) is missing or
/// does not match the body (answered with HTTP 400).
pub const HEADER_MISMATCH: i64 = -32020;
/// 2026-07-28: serving the request needs a client capability the request did not declare in
/// `_meta["io.modelcontextprotocol/clientCapabilities"]` (`data.requiredCapabilities`).
pub const MISSING_REQUIRED_CLIENT_CAPABILITY: i64 = -32021;
/// 2026-07-28: the request's protocol version is not served here (`data.supported`,
/// `data.requested`; HTTP 400).
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
