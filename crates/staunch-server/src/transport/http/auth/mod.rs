//! Authentication on the HTTP transport: the server as an OAuth 2.1 resource server, as the MCP
//! authorization spec asks (off unless configured; nothing changes without it).
//!
//! Every request to the MCP endpoint must carry `Authorization: Bearer <token>`. A token is
//! either one of a static list ([`tokens`], `--auth bearer`) or a JWT access token issued by an
//! authorization server ([`jwt`], `--auth oauth`, keys from its JWKS, [`jwks`]). The result is
//! an [`Identity`]: a principal and its scopes. The principal reaches every handler as
//! `Context::principal()`; a session is bound to the principal that created it, and each
//! stateless request is authenticated on its own.
//!
//! Refusals follow RFC 6750 and RFC 9728: 401 with `WWW-Authenticate: Bearer
//! resource_metadata="…"` pointing at this server's protected-resource metadata (`metadata`)
//! — plus `error="invalid_token"` when a token was presented and failed — and 403
//! `insufficient_scope` with the scopes needed when a tool asks for scopes the token lacks.
//! Tokens are never logged or forwarded.

pub mod jwks;
pub mod jwt;
mod metadata;
pub mod tokens;

use std::collections::HashMap;

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use staunch_protocol::{RequestId, codes};

pub use jwks::JwksSource;
pub use jwt::OAuthConfig;
pub(crate) use metadata::metadata_document;
pub use tokens::StaticTokens;

use jwt::{JwtValidator, TokenRefusal};

/// A misconfiguration or an unreachable key source.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// The settings cannot work (named in the message).
    #[error("auth configuration: {0}")]
    Config(String),
    /// The JWKS could not be fetched or read.
    #[error("JWKS: {0}")]
    Jwks(String),
}

/// How requests are authenticated.
#[derive(Clone, Debug)]
pub enum AuthMethod {
    /// Static bearer tokens, each naming a principal.
    Bearer(StaticTokens),
    /// JWT access tokens from an OAuth authorization server.
    OAuth(OAuthConfig),
}

/// Authentication settings of the HTTP transport.
#[derive(Clone, Debug)]
pub struct AuthConfig {
    /// How tokens are checked.
    pub method: AuthMethod,
    /// This resource's identifier (the MCP endpoint's public URL, RFC 8707/9728). With OAuth
    /// it is the audience; without it the URL is derived from the request's `Host`.
    pub resource: Option<String>,
    /// Scopes needed per tool, on top of those the tools declare themselves.
    pub tool_scopes: HashMap<String, Vec<String>>,
    /// Scopes that routes beside the endpoint check (e.g. the live page's operator scope),
    /// listed in the metadata's `scopes_supported`.
    pub other_scopes: Vec<String>,
}

impl AuthConfig {
    /// Auth with `method` and nothing else configured.
    pub fn new(method: AuthMethod) -> Self {
        let resource = match &method {
            AuthMethod::OAuth(o) => Some(o.audience.clone()),
            AuthMethod::Bearer(_) => None,
        };
        Self {
            method,
            resource,
            tool_scopes: HashMap::new(),
            other_scopes: Vec::new(),
        }
    }
}

/// Who made a request, as the token says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    /// The principal: a static token's name, or the JWT's `sub`.
    pub principal: String,
    /// The scopes the token carries.
    pub scopes: Vec<String>,
}

enum Checker {
    Static(StaticTokens),
    Jwt(Box<JwtValidator>),
}

/// The authenticator of a running transport (holds the JWKS cache).
pub(crate) struct Auth {
    cfg: AuthConfig,
    checker: Checker,
}

impl Auth {
    pub(crate) fn new(cfg: AuthConfig) -> Self {
        let checker = match &cfg.method {
            AuthMethod::Bearer(t) => Checker::Static(t.clone()),
            AuthMethod::OAuth(o) => Checker::Jwt(Box::new(JwtValidator::new(o.clone()))),
        };
        Self { cfg, checker }
    }

    /// The authorization servers named in the metadata.
    fn authorization_servers(&self) -> Vec<String> {
        match &self.checker {
            Checker::Jwt(v) => vec![v.config().issuer.clone()],
            Checker::Static(_) => Vec::new(),
        }
    }

    /// Who sent the request, or the refusal to answer with.
    pub(crate) async fn authenticate(
        &self,
        headers: &HeaderMap,
        endpoint: &str,
    ) -> Result<Identity, Response> {
        let mut values = headers.get_all(header::AUTHORIZATION).iter();
        let first = values.next();
        if values.next().is_some() {
            tracing::info!("request refused: more than one Authorization header");
            return Err(plain_error(
                StatusCode::BAD_REQUEST,
                None,
                "send one Authorization header",
            ));
        }
        let token = first
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                let (scheme, rest) = v.split_once(' ')?;
                scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
            })
            .filter(|t| !t.is_empty());
        let Some(token) = token else {
            tracing::info!("request refused: no bearer token");
            return Err(self.challenge(
                headers,
                endpoint,
                None,
                "authentication required: send Authorization: Bearer <token>",
            ));
        };
        let result = match &self.checker {
            Checker::Static(t) => t
                .verify(token)
                .ok_or_else(|| TokenRefusal::Invalid("unknown token".into())),
            Checker::Jwt(v) => v.verify(token).await,
        };
        match result {
            Ok(id) => Ok(id),
            Err(TokenRefusal::Invalid(why)) => {
                tracing::info!(reason = %why, "request refused: invalid token");
                Err(self.challenge(
                    headers,
                    endpoint,
                    Some(&why),
                    &format!("invalid token: {why}"),
                ))
            }
            Err(TokenRefusal::KeysUnavailable(why)) => {
                tracing::error!(error = %why, "cannot check tokens: JWKS unavailable");
                Err(plain_error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    None,
                    "the authorization server's keys are unavailable; try again later",
                ))
            }
        }
    }

    /// This resource's identifier: configured, or `http://{Host}{endpoint}`.
    pub(crate) fn resource(&self, headers: &HeaderMap, endpoint: &str) -> String {
        if let Some(r) = &self.cfg.resource {
            return r.clone();
        }
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("localhost");
        format!("http://{host}{endpoint}")
    }

    /// The 401 answer: the metadata pointer, and `invalid_token` when a token failed.
    fn challenge(
        &self,
        headers: &HeaderMap,
        endpoint: &str,
        invalid: Option<&str>,
        message: &str,
    ) -> Response {
        let url = metadata::metadata_url(&self.resource(headers, endpoint));
        let mut value = String::from("Bearer ");
        if let Some(why) = invalid {
            value.push_str(&format!(
                "error=\"invalid_token\", error_description=\"{}\", ",
                quoted(why)
            ));
        }
        value.push_str(&format!("resource_metadata=\"{}\"", quoted(&url)));
        let mut r = plain_error(StatusCode::UNAUTHORIZED, None, message);
        if let Ok(v) = HeaderValue::from_str(&value) {
            r.headers_mut().insert(header::WWW_AUTHENTICATE, v);
        }
        r
    }

    /// The scopes a call of `tool` needs: the tool's own and the configured ones.
    pub(crate) fn tool_scopes(&self, server: &crate::Server, tool: &str) -> Vec<String> {
        let mut need: Vec<String> = server.tool_scopes(tool);
        if let Some(extra) = self.cfg.tool_scopes.get(tool) {
            need.extend(extra.iter().cloned());
        }
        need.sort();
        need.dedup();
        need
    }

    /// Every scope a tool needs (the metadata's `scopes_supported`).
    pub(crate) fn all_scopes(&self, server: &crate::Server) -> Vec<String> {
        let mut all = server.declared_scopes();
        all.extend(self.cfg.tool_scopes.values().flatten().cloned());
        all.extend(self.cfg.other_scopes.iter().cloned());
        all.sort();
        all.dedup();
        all
    }

    /// `None` when `identity` may call `tool`; otherwise the 403 `insufficient_scope` answer.
    pub(crate) fn check_tool(
        &self,
        server: &crate::Server,
        identity: &Identity,
        tool: &str,
        id: &RequestId,
        headers: &HeaderMap,
        endpoint: &str,
    ) -> Option<Response> {
        let need = self.tool_scopes(server, tool);
        let missing: Vec<&String> = need
            .iter()
            .filter(|s| !identity.scopes.contains(s))
            .collect();
        if missing.is_empty() {
            return None;
        }
        tracing::info!(principal = %identity.principal, %tool, ?missing, "tool call refused: insufficient scope");
        let url = metadata::metadata_url(&self.resource(headers, endpoint));
        let value = format!(
            "Bearer error=\"insufficient_scope\", scope=\"{}\", resource_metadata=\"{}\", \
             error_description=\"tool {} needs scope {}\"",
            quoted(&need.join(" ")),
            quoted(&url),
            quoted(tool),
            quoted(&need.join(" ")),
        );
        let mut r = plain_error(
            StatusCode::FORBIDDEN,
            Some(id),
            &format!("insufficient scope: tool {tool:?} needs {}", need.join(" ")),
        );
        if let Ok(v) = HeaderValue::from_str(&value) {
            r.headers_mut().insert(header::WWW_AUTHENTICATE, v);
        }
        Some(r)
    }

    /// The protected-resource metadata document (RFC 9728) for this request's resource.
    pub(crate) fn metadata(
        &self,
        server: &crate::Server,
        headers: &HeaderMap,
        endpoint: &str,
    ) -> serde_json::Value {
        metadata_document(
            &self.resource(headers, endpoint),
            &self.authorization_servers(),
            &self.all_scopes(server),
        )
    }

    /// The paths the metadata is served on: the root form and the path-suffixed form for
    /// the endpoint (and for the configured resource's path, when it differs).
    pub(crate) fn metadata_paths(&self, endpoint: &str) -> Vec<String> {
        let mut paths = vec![metadata::WELL_KNOWN.to_string()];
        let suffix = endpoint.trim_end_matches('/');
        if !suffix.is_empty() {
            paths.push(format!("{}{suffix}", metadata::WELL_KNOWN));
        }
        if let Some(p) = self
            .cfg
            .resource
            .as_deref()
            .and_then(metadata::resource_path)
        {
            paths.push(format!("{}{p}", metadata::WELL_KNOWN));
        }
        paths.sort();
        paths.dedup();
        paths
    }
}

/// The endpoint's token check, for routes served beside it (the live page): the same verifier
/// — and, with OAuth, the same JWKS cache — as the MCP endpoint, and the same refusals (401
/// with the metadata pointer, 403 `insufficient_scope`). Cheap to clone.
#[derive(Clone)]
pub struct Authenticator {
    auth: std::sync::Arc<Auth>,
    endpoint: String,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticator")
            .field("endpoint", &self.endpoint)
            .finish()
    }
}

impl Authenticator {
    pub(crate) fn new(auth: std::sync::Arc<Auth>, endpoint: String) -> Self {
        Self { auth, endpoint }
    }

    /// Who sent the request, or the answer to refuse it with: 401 (no token, or an invalid
    /// one) with `WWW-Authenticate` pointing at the endpoint's protected-resource metadata,
    /// 400 for two `Authorization` headers, 503 when the keys cannot be fetched.
    pub async fn authenticate(&self, headers: &HeaderMap) -> Result<Identity, Response> {
        self.auth.authenticate(headers, &self.endpoint).await
    }

    /// `None` when `identity` carries `scope`; otherwise the 403 `insufficient_scope` answer
    /// (RFC 6750 §3.1) naming it.
    pub fn require_scope(
        &self,
        identity: &Identity,
        scope: &str,
        headers: &HeaderMap,
    ) -> Option<Response> {
        if identity.scopes.iter().any(|s| s == scope) {
            return None;
        }
        tracing::info!(principal = %identity.principal, scope, "refused: insufficient scope");
        let url = metadata::metadata_url(&self.auth.resource(headers, &self.endpoint));
        let value = format!(
            "Bearer error=\"insufficient_scope\", scope=\"{}\", resource_metadata=\"{}\"",
            quoted(scope),
            quoted(&url),
        );
        let mut r = plain_error(
            StatusCode::FORBIDDEN,
            None,
            &format!("insufficient scope: this needs {scope}"),
        );
        if let Ok(v) = HeaderValue::from_str(&value) {
            r.headers_mut().insert(header::WWW_AUTHENTICATE, v);
        }
        Some(r)
    }
}

/// A value inside a quoted-string of `WWW-Authenticate`: without `"` and `\`.
fn quoted(s: &str) -> String {
    s.chars()
        .filter(|c| *c != '"' && *c != '\\' && !c.is_control())
        .collect()
}

fn plain_error(status: StatusCode, id: Option<&RequestId>, message: &str) -> Response {
    let id = id.map_or(serde_json::Value::Null, RequestId::to_value);
    let body = json!({"jsonrpc": "2.0", "id": id, "error": {
        "code": codes::INVALID_REQUEST, "message": message
    }});
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}
