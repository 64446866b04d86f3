//! The handshake: `server/discover` (2026-07-28) or `initialize` (2025), picked by
//! [`EraChoice`].
//!
//! With [`EraChoice::Auto`] the client behaves as the spec asks of a dual-era client: it sends
//! `server/discover` as a stateless request first, and when the server does not understand it
//! (an error, -32601, HTTP 400/404, an unsupported-version -32022, or silence on stdio until
//! `discover_timeout`) it goes back to the session era and sends `initialize`. Only a failure
//! to reach the server at all ends the attempt, since `initialize` would meet the same fate.
//!
//! After the handshake, what differs between the eras is a question asked of the client here
//! ([`Client::has_session`], [`Client::runs_tasks`], [`Client::with_tasks_extension`]):
//! the task follower, the proxy and the commands ask them and name no era.

use serde_json::{Value, json};
use staunch_protocol::mcp::methods;
use staunch_protocol::stateless::{TASKS_EXTENSION, keys};
use staunch_protocol::version;

use crate::client::Client;
use crate::era::{Era, EraChoice, ResultType, ServerInfo, fallback_reason, meta_for};
use crate::inbox::Inbox;
use crate::transport::Transport;
use crate::transport::http::{HttpEndpoint, HttpTransport};
use crate::transport::stdio::{StdioCommand, StdioTransport};
use crate::{CallOptions, ClientError, ConnectOptions};
use tokio::io::{AsyncRead, AsyncWrite};

/// How a client comes to be: a transport, then the handshake.
impl Client {
    /// Spawns `cmd` and does the handshake over its stdio.
    pub async fn connect_stdio(
        cmd: &StdioCommand,
        opts: &ConnectOptions,
    ) -> Result<Self, ClientError> {
        let inbox = Inbox::default();
        let t = StdioTransport::spawn(cmd, opts.stderr, inbox.clone())?;
        Self::start(Transport::Stdio(Box::new(t)), inbox, opts).await
    }

    /// Connects to a Streamable HTTP endpoint and does the handshake.
    pub async fn connect_http(url: &str, opts: &ConnectOptions) -> Result<Self, ClientError> {
        let ep = HttpEndpoint::with_headers(url, &opts.http.headers)?;
        let inbox = Inbox::default();
        let t = HttpTransport::new(ep, opts.http.clone(), inbox.clone());
        Self::start(Transport::Http(t), inbox, opts).await
    }

    /// Speaks newline-delimited JSON-RPC over any byte streams (in-memory pipes in tests, a
    /// socket) and does the handshake.
    pub async fn connect_io<R, W>(
        reader: R,
        writer: W,
        opts: &ConnectOptions,
    ) -> Result<Self, ClientError>
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let inbox = Inbox::default();
        let t = StdioTransport::from_io(reader, writer, inbox.clone(), None);
        Self::start(Transport::Stdio(Box::new(t)), inbox, opts).await
    }

    async fn start(
        transport: Transport,
        inbox: Inbox,
        opts: &ConnectOptions,
    ) -> Result<Self, ClientError> {
        let client = Self::unconnected(transport, &inbox, opts);
        match handshake(&client, opts).await {
            Ok(info) => {
                client.set_server(info);
                Ok(client)
            }
            Err(e) => {
                client.close().await;
                Err(e)
            }
        }
    }
}

/// The stateless era's discovery method.
pub const DISCOVER: &str = "server/discover";

/// Connects in the era `opts` asks for; what the server said about itself.
pub(crate) async fn handshake(
    client: &Client,
    opts: &ConnectOptions,
) -> Result<ServerInfo, ClientError> {
    match opts.era {
        EraChoice::Session => initialize(client, opts, None).await,
        EraChoice::Stateless => discover(client, opts).await.map_err(|e| match e {
            ClientError::Connect(_) | ClientError::Spawn { .. } | ClientError::Closed(_) => e,
            other => ClientError::Protocol(format!(
                "the server does not speak {} (forced): {other}",
                version::STATELESS
            )),
        }),
        EraChoice::Auto => match discover(client, opts).await {
            Ok(info) => Ok(info),
            Err(e) => match fallback_reason(&e) {
                None => Err(e),
                Some(why) => {
                    tracing::debug!(reason = %why, "falling back to initialize");
                    enter_session(client, None);
                    initialize(client, opts, Some(why)).await
                }
            },
        },
    }
}

fn wait_opts(limit: std::time::Duration) -> CallOptions {
    CallOptions {
        timeout: Some(limit),
        max_total: Some(limit),
        progress: false,
        ..CallOptions::default()
    }
}

async fn discover(client: &Client, opts: &ConnectOptions) -> Result<ServerInfo, ClientError> {
    let v = version::STATELESS;
    let inner = client.inner();
    inner.transport.set_protocol_version(Some(v), true);
    inner.dialect.stand_alone(meta_for(
        v,
        &opts.capabilities,
        &opts.client_name,
        &opts.client_version,
    ));
    let mut p = client.start_request(DISCOVER, None, false)?;
    // Not cancelled on a timeout: a session-era server that ignores it has nothing to stop,
    // and a stray `notifications/cancelled` before `initialize` would only confuse it.
    p.cancellable = false;
    let r = p.wait(&wait_opts(opts.discover_timeout), |_| {}).await?;
    if ResultType::of(&r)? != ResultType::Complete {
        return Err(ClientError::Protocol(format!(
            "server/discover answered with resultType {}",
            r["resultType"]
        )));
    }
    let supported: Vec<String> = r["supportedVersions"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    if !supported.iter().any(|s| s == v) {
        return Err(ClientError::Protocol(format!(
            "server/discover lists {supported:?}, not {v}"
        )));
    }
    let who = &r["_meta"][keys::SERVER_INFO];
    Ok(ServerInfo {
        protocol_version: v.to_string(),
        era: Era::Stateless,
        supported_versions: supported,
        fallback: None,
        name: who["name"].as_str().unwrap_or("").to_string(),
        version: who["version"].as_str().unwrap_or("").to_string(),
        capabilities: r.get("capabilities").cloned().unwrap_or(Value::Null),
        instructions: r["instructions"].as_str().map(str::to_string),
    })
}

async fn initialize(
    client: &Client,
    opts: &ConnectOptions,
    fallback: Option<String>,
) -> Result<ServerInfo, ClientError> {
    let params = json!({
        "protocolVersion": opts.protocol_version,
        "capabilities": opts.capabilities,
        "clientInfo": {"name": opts.client_name, "version": opts.client_version},
    });
    let mut p = client.start_request(methods::INITIALIZE, Some(params), false)?;
    // `initialize` MUST NOT be cancelled: on timeout we only stop waiting.
    p.cancellable = false;
    let r = p.wait(&wait_opts(opts.init_timeout), |_| {}).await?;
    let negotiated = r["protocolVersion"]
        .as_str()
        .ok_or_else(|| ClientError::Protocol("initialize result has no protocolVersion".into()))?
        .to_string();
    if !version::is_supported(&negotiated) {
        return Err(ClientError::Protocol(format!(
            "the server chose protocol version {negotiated}, which this client does not speak"
        )));
    }
    enter_session(client, Some(&negotiated));
    client.notify(methods::INITIALIZED, None);
    client.inner().transport.session_started();
    Ok(ServerInfo {
        protocol_version: negotiated,
        era: Era::Session,
        supported_versions: Vec::new(),
        fallback,
        name: r["serverInfo"]["name"].as_str().unwrap_or("").to_string(),
        version: r["serverInfo"]["version"]
            .as_str()
            .unwrap_or("")
            .to_string(),
        capabilities: r.get("capabilities").cloned().unwrap_or(Value::Null),
        instructions: r["instructions"].as_str().map(str::to_string),
    })
}

/// The session era from now on, with the negotiated version (`None` before `initialize`, e.g.
/// after a refused `server/discover`).
fn enter_session(client: &Client, version: Option<&str>) {
    let inner = client.inner();
    inner.dialect.join_session();
    inner.transport.set_protocol_version(version, false);
}

/// What differs between the eras, asked of a connection (the rest of the crate asks these
/// questions and names no era).
impl Client {
    /// The era this connection speaks.
    pub fn era(&self) -> Era {
        self.inner().dialect.era()
    }

    /// Whether the connection has a session: the server's requests and notifications (its
    /// questions, list changes, task statuses) arrive on the connection; without one, a
    /// question comes as an input-required round and changes only on `subscriptions/listen`.
    pub fn has_session(&self) -> bool {
        self.era() == Era::Session
    }

    /// Whether the server runs `tools/call` as a task in the era spoken: 2025-11-25
    /// `capabilities.tasks` in a session, the tasks extension without one.
    pub fn runs_tasks(&self) -> bool {
        self.server().supports_tool_tasks() || self.offers_tasks_extension()
    }

    /// Whether the server advertised the tasks extension in `server/discover`.
    pub fn offers_tasks_extension(&self) -> bool {
        let info = self.server();
        info.era == Era::Stateless
            && info
                .capabilities
                .get("extensions")
                .and_then(|e| e.get(TASKS_EXTENSION))
                .is_some()
    }

    /// `params` with `_meta.clientCapabilities` = this connection's capabilities plus the
    /// tasks extension (the rest of the stateless `_meta` is added when the request is sent):
    /// what a request of the extension sends, for a caller that makes it itself with
    /// [`Client::request`].
    pub fn with_tasks_extension(&self, mut params: Value) -> Result<Value, ClientError> {
        let mut caps = self
            .inner()
            .dialect
            .capabilities()
            .filter(Value::is_object)
            .unwrap_or_else(|| json!({}));
        let exts = caps
            .as_object_mut()
            .expect("checked to be an object")
            .entry("extensions")
            .or_insert_with(|| json!({}));
        if !exts.is_object() {
            *exts = json!({});
        }
        exts[TASKS_EXTENSION] = json!({});
        let Some(obj) = params.as_object_mut() else {
            return Err(ClientError::Protocol("params must be an object".into()));
        };
        let meta = obj.entry("_meta").or_insert_with(|| json!({}));
        meta[keys::CLIENT_CAPABILITIES] = caps;
        Ok(params)
    }
}
