//! Options of a connection and of one request.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::era::EraChoice;
use crate::transport::http::HttpOptions;
use crate::transport::stdio::StderrMode;

/// How long to wait for one request, and what may extend the wait.
///
/// The defaults follow the spec's advice (`lifecycle.mdx` §Timeouts): a timeout on every
/// request, reset by progress, and a maximum total that progress cannot extend.
#[derive(Debug, Clone)]
pub struct CallOptions {
    /// Idle timeout: with no answer (and, if [`reset_on_progress`](Self::reset_on_progress),
    /// no progress) for this long, the request is cancelled. `None`: wait for ever (bounded
    /// only by `max_total`).
    pub timeout: Option<Duration>,
    /// Whether a progress notification restarts the idle timeout.
    pub reset_on_progress: bool,
    /// Hard ceiling from the moment the request is sent; always wins over progress.
    pub max_total: Option<Duration>,
    /// Whether to ask for progress (`_meta.progressToken`).
    pub progress: bool,
    /// Fired by the caller (Ctrl-C): the request is cancelled on the wire and the call returns
    /// [`ClientError::Cancelled`](crate::ClientError::Cancelled).
    pub cancel: Option<CancellationToken>,
}

impl Default for CallOptions {
    /// 60 s idle timeout reset on progress, 10 min ceiling, progress requested.
    fn default() -> Self {
        Self {
            timeout: Some(Duration::from_secs(60)),
            reset_on_progress: true,
            max_total: Some(Duration::from_secs(600)),
            progress: true,
            cancel: None,
        }
    }
}

impl CallOptions {
    /// Sets the idle timeout.
    pub fn timeout(mut self, d: Duration) -> Self {
        self.timeout = Some(d);
        self
    }

    /// Sets the hard ceiling.
    pub fn max_total(mut self, d: Duration) -> Self {
        self.max_total = Some(d);
        self
    }

    /// Whether progress resets the idle timeout.
    pub fn reset_on_progress(mut self, yes: bool) -> Self {
        self.reset_on_progress = yes;
        self
    }

    /// Whether to ask for progress.
    pub fn progress(mut self, yes: bool) -> Self {
        self.progress = yes;
        self
    }

    /// A token the caller fires to cancel.
    pub fn cancel_on(mut self, token: CancellationToken) -> Self {
        self.cancel = Some(token);
        self
    }
}

/// How to connect: which era, and the handshake's facts.
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    /// Which protocol era to speak: by default `server/discover` first, then `initialize`
    /// when the server does not speak 2026-07-28.
    pub era: EraChoice,
    /// The version proposed in `initialize` (session era).
    pub protocol_version: String,
    /// `clientInfo.name`.
    pub client_name: String,
    /// `clientInfo.version`.
    pub client_version: String,
    /// Client capabilities: sent in `initialize`, or in every stateless request's `_meta`.
    pub capabilities: serde_json::Value,
    /// Timeout of the `initialize` exchange.
    pub init_timeout: Duration,
    /// Timeout of the `server/discover` attempt ([`EraChoice::Auto`] falls back to
    /// `initialize` when it expires: a session-era stdio server may ignore the request).
    pub discover_timeout: Duration,
    /// What to do with a spawned server's stderr.
    pub stderr: StderrMode,
    /// Streamable HTTP behaviour.
    pub http: HttpOptions,
    /// Who answers the server's own requests (sampling, elicitation, roots); `None` answers
    /// only `ping` and refuses the rest with -32601.
    pub server_requests: Option<crate::ServerRequestHandler>,
    /// Who sees the server's other notifications (`tools/list_changed`, `message`, …); `None`
    /// drops them.
    pub notifications: Option<crate::NotificationHandler>,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        Self {
            era: EraChoice::Auto,
            protocol_version: staunch_protocol::version::LATEST.to_string(),
            client_name: "staunch".into(),
            client_version: env!("CARGO_PKG_VERSION").into(),
            capabilities: serde_json::json!({}),
            init_timeout: Duration::from_secs(30),
            discover_timeout: Duration::from_secs(10),
            stderr: StderrMode::Inherit,
            http: HttpOptions::default(),
            server_requests: None,
            notifications: None,
        }
    }
}
