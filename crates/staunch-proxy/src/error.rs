//! What can go wrong when fronting an upstream server.

use staunch_client::ClientError;
use staunch_protocol::{ErrorObject, codes};
use staunch_server::ToolError;

/// A proxy failure; each says which upstream.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// The upstream could not be started or reached, or its handshake failed.
    #[error("upstream {upstream:?}: cannot connect: {source}")]
    Connect {
        /// The upstream's name.
        upstream: String,
        /// Why.
        #[source]
        source: ClientError,
    },
    /// Starting the upstream command failed.
    #[error("upstream {upstream:?}: cannot start {command}: {message}")]
    Spawn {
        /// The upstream's name.
        upstream: String,
        /// The command line.
        command: String,
        /// The OS error.
        message: String,
    },
    /// A request to the upstream failed (listing its tools at start).
    #[error("upstream {upstream:?}: {what}: {source}")]
    Request {
        /// The upstream's name.
        upstream: String,
        /// What was asked.
        what: String,
        /// Why.
        #[source]
        source: ClientError,
    },
    /// Two tools would be served under one name.
    #[error(
        "the tool name {name:?} is served by both {first:?} and {second:?}: give one of them a \
         prefix (--prefix, or prefix = \"…\" in [[upstream]])"
    )]
    Collision {
        /// The clashing name.
        name: String,
        /// The upstream that claimed it first.
        first: String,
        /// The other one.
        second: String,
    },
    /// A rule names a tool the upstream does not have.
    #[error("upstream {upstream:?} has no tool {tool:?} (a rule names it); its tools: {known}")]
    UnknownTool {
        /// The upstream's name.
        upstream: String,
        /// The tool the rule names.
        tool: String,
        /// The upstream's tool names.
        known: String,
    },
    /// The upstream's protocol is not one the client speaks.
    #[error("upstream {upstream:?}: protocol: {message}")]
    Protocol {
        /// The upstream's name.
        upstream: String,
        /// What is wrong with it.
        message: String,
    },
    /// The stop policy (`kill_after_cancel`) needs a process to stop: a command upstream.
    #[error(
        "upstream {upstream:?}: kill_after_cancel needs a command upstream (a process of its \
         own per call); {url} is a URL"
    )]
    StopPolicyNeedsCommand {
        /// The upstream's name.
        upstream: String,
        /// Its URL.
        url: String,
    },
    /// A job-shaped tool needs the job runtime (a store).
    #[error("the upstream tool {0:?} is shaped `job`, which needs a job runtime (a store)")]
    NoJobRuntime(String),
    /// The upstreams as described (flags, a client's `mcpServers` file) cannot work; the
    /// message names the flag or the file.
    #[error("{0}")]
    Described(String),
}

/// An upstream's failure as the downstream request's error.
pub(crate) fn rpc(e: ClientError) -> ToolError {
    match e {
        ClientError::Rpc(e) => ToolError::Rpc(e),
        ClientError::Cancelled => ToolError::Cancelled,
        other => ToolError::Rpc(ErrorObject::new(
            codes::INTERNAL_ERROR,
            format!("the upstream failed: {other}"),
        )),
    }
}
