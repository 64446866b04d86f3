//! What a client learned about its server in the handshake.

use serde_json::Value;

use crate::era::Era;

/// What the server said about itself in `initialize` or `server/discover`.
#[derive(Debug, Clone)]
pub struct ServerInfo {
    /// The protocol version in use: negotiated by `initialize`, or the stateless version every
    /// request names.
    pub protocol_version: String,
    /// The era the connection speaks.
    pub era: Era,
    /// `server/discover`'s `supportedVersions` (empty in the session era).
    pub supported_versions: Vec<String>,
    /// Why `server/discover` was not used, when the client fell back to `initialize`.
    pub fallback: Option<String>,
    /// `serverInfo.name`.
    pub name: String,
    /// `serverInfo.version`.
    pub version: String,
    /// `capabilities` as sent.
    pub capabilities: Value,
    /// `instructions`, if any.
    pub instructions: Option<String>,
}

impl ServerInfo {
    /// Whether the server accepts `tools/call` as a task (2025-11-25 `capabilities.tasks`).
    pub fn supports_tool_tasks(&self) -> bool {
        self.era == Era::Session
            && self
                .capabilities
                .pointer("/tasks/requests/tools/call")
                .is_some()
    }

    /// One line about the connection: the server, its protocol and era, how it was reached,
    /// and why `server/discover` was not used when the client fell back to `initialize`.
    pub fn connection_line(&self) -> String {
        let mut line = format!(
            "connected: {} {} — protocol {} ({} era, {})",
            self.name,
            self.version,
            self.protocol_version,
            self.era.as_str(),
            match self.era {
                Era::Stateless => "server/discover",
                Era::Session => "initialize",
            }
        );
        if let Some(why) = &self.fallback {
            line.push_str(&format!("; fell back to initialize: {why}"));
        }
        line
    }
}
