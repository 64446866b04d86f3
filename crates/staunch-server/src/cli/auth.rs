//! The authentication flags (`--auth …`) and what they turn into: the HTTP transport's
//! [`AuthConfig`] and the principal that owns a caller's jobs.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, ValueEnum};

use super::heading::AUTH;
use super::parse::{parse_secs, secs};
use crate::Context;
use crate::transport::http::auth::AuthError;
use crate::transport::http::auth::jwks::discover_jwks_uri;
use crate::transport::http::{AuthConfig, AuthMethod, JwksSource, OAuthConfig, StaticTokens};

/// A setting that cannot work, in the words of its flags.
fn refused(message: impl Into<String>) -> AuthError {
    AuthError::Config(message.into())
}

/// The variable that may hold the static tokens themselves (same format as the file).
pub const TOKENS_ENV: &str = "STAUNCH_AUTH_TOKENS";

/// How HTTP requests are authenticated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum AuthKind {
    /// No authentication (the default).
    None,
    /// Static bearer tokens from --auth-tokens or STAUNCH_AUTH_TOKENS.
    Bearer,
    /// JWT access tokens from an OAuth authorization server (--issuer, --audience).
    Oauth,
}

/// Authentication options of `staunch serve` (HTTP only).
#[derive(Debug, Clone, Args)]
pub struct AuthArgs {
    /// Authenticate every HTTP request: `bearer` (static tokens) or `oauth` (JWTs).
    ///
    /// `oauth` takes JWT access tokens from an authorization server (--issuer, --audience).
    /// Off by default.
    #[arg(long, value_enum, default_value = "none", env = "STAUNCH_AUTH", help_heading = AUTH)]
    pub auth: AuthKind,
    /// --auth bearer: file of `TOKEN PRINCIPAL [SCOPE ...]` lines.
    ///
    /// Or set STAUNCH_AUTH_TOKENS to the same text, entries separated by newlines or `;`.
    #[arg(
        long,
        env = "STAUNCH_AUTH_TOKENS_FILE",
        value_name = "FILE",
        help_heading = AUTH
    )]
    pub auth_tokens: Option<PathBuf>,
    /// --auth oauth: the authorization server's issuer identifier (tokens' `iss`).
    #[arg(long, env = "STAUNCH_AUTH_ISSUER", value_name = "URL", help_heading = AUTH)]
    pub issuer: Option<String>,
    /// This server's public MCP URL: the JWT audience and the protected resource.
    ///
    /// The RFC 8707 `resource` of the protected-resource metadata (default with bearer:
    /// http://{Host}{endpoint}).
    #[arg(long, env = "STAUNCH_AUTH_AUDIENCE", value_name = "URL", help_heading = AUTH)]
    pub audience: Option<String>,
    /// --auth oauth: where the signing keys are (default: the issuer's `jwks_uri`).
    ///
    /// An https:// or http:// URL, or a file. https trusts the system's roots or SSL_CERT_FILE.
    #[arg(
        long,
        env = "STAUNCH_AUTH_JWKS_URL",
        value_name = "URL",
        hide_short_help = true,
        help_heading = AUTH
    )]
    pub jwks_url: Option<String>,
    /// --auth oauth: seconds of clock skew tolerated on `exp` and `nbf`.
    #[arg(
        long,
        default_value_t = secs(OAuthConfig::DEFAULT_LEEWAY),
        env = "STAUNCH_AUTH_LEEWAY_SECS",
        value_name = "SECS",
        hide_short_help = true,
        help_heading = AUTH,
        value_parser = parse_secs
    )]
    pub auth_leeway_secs: u64,
    /// --auth oauth: least seconds between two JWKS fetches.
    ///
    /// A token with an unknown key id triggers one (key rotation).
    #[arg(
        long,
        default_value_t = secs(OAuthConfig::DEFAULT_JWKS_MIN_REFRESH),
        env = "STAUNCH_JWKS_MIN_REFRESH_SECS",
        value_name = "SECS",
        hide_short_help = true,
        help_heading = AUTH,
        value_parser = parse_secs
    )]
    pub jwks_min_refresh_secs: u64,
    /// --auth oauth: seconds the JWKS is cached before it is fetched again.
    #[arg(
        long,
        default_value_t = secs(OAuthConfig::DEFAULT_JWKS_MAX_AGE),
        env = "STAUNCH_JWKS_MAX_AGE_SECS",
        value_name = "SECS",
        hide_short_help = true,
        help_heading = AUTH,
        value_parser = parse_secs
    )]
    pub jwks_max_age_secs: u64,
    /// Scopes a tool needs, `TOOL=SCOPE[ SCOPE…]`; repeat per tool.
    ///
    /// A token without them gets 403 insufficient_scope when it calls the tool.
    #[arg(
        long = "tool-scope",
        env = "STAUNCH_TOOL_SCOPES",
        value_delimiter = ',',
        value_name = "TOOL=SCOPES",
        help_heading = AUTH
    )]
    pub tool_scopes: Vec<String>,
}

impl AuthArgs {
    /// Whether requests are authenticated at all.
    pub fn enabled(&self) -> bool {
        self.auth != AuthKind::None
    }

    /// The job runtime's principal hook: jobs and tasks belong to the authenticated principal
    /// when auth is on (and to their session otherwise).
    #[allow(clippy::type_complexity)] // the job runtime's `PrincipalFn`, which it cannot name
    pub fn principal_fn(&self) -> Option<Arc<dyn Fn(&Context) -> Option<String> + Send + Sync>> {
        self.enabled().then(|| {
            Arc::new(|ctx: &Context| ctx.principal().map(String::from))
                as Arc<dyn Fn(&Context) -> Option<String> + Send + Sync>
        })
    }

    /// Auth is for HTTP: refuses `--auth` without `--http` (stdio's caller is whoever
    /// started the process).
    pub fn check_transport(&self, http: bool) -> Result<(), AuthError> {
        if self.enabled() && !http {
            return Err(refused(
                "--auth applies to HTTP (--http); over stdio the caller is whoever started the \
                 process",
            ));
        }
        Ok(())
    }

    /// The HTTP transport's auth settings; `None` when off.
    pub async fn config(&self) -> Result<Option<AuthConfig>, AuthError> {
        let method = match self.auth {
            AuthKind::None => return Ok(None),
            AuthKind::Bearer => AuthMethod::Bearer(self.static_tokens()?),
            AuthKind::Oauth => AuthMethod::OAuth(self.oauth().await?),
        };
        let mut cfg = AuthConfig::new(method);
        if let Some(a) = &self.audience {
            cfg.resource = Some(a.clone());
        }
        cfg.tool_scopes = parse_tool_scopes(&self.tool_scopes)?;
        Ok(Some(cfg))
    }

    fn static_tokens(&self) -> Result<StaticTokens, AuthError> {
        let from_env = std::env::var(TOKENS_ENV)
            .ok()
            .filter(|v| !v.trim().is_empty());
        match (&self.auth_tokens, from_env) {
            (Some(_), Some(_)) => Err(refused(format!(
                "give the tokens either in --auth-tokens or in {TOKENS_ENV}, not both"
            ))),
            (Some(path), None) => {
                warn_if_readable_by_others(path);
                let text = std::fs::read_to_string(path).map_err(|e| {
                    refused(format!("reading --auth-tokens {}: {e}", path.display()))
                })?;
                StaticTokens::parse(&text, &path.display().to_string())
            }
            (None, Some(text)) => StaticTokens::parse(&text, TOKENS_ENV),
            (None, None) => Err(refused(format!(
                "--auth bearer needs tokens: --auth-tokens FILE or {TOKENS_ENV}"
            ))),
        }
    }

    async fn oauth(&self) -> Result<OAuthConfig, AuthError> {
        let (Some(issuer), Some(audience)) = (&self.issuer, &self.audience) else {
            return Err(refused(
                "--auth oauth needs --issuer (the authorization server) and --audience (this \
                 server's public MCP URL, which tokens must name in aud)",
            ));
        };
        let jwks = match &self.jwks_url {
            Some(u) => u.clone(),
            None => discover_jwks_uri(issuer).await?,
        };
        let mut cfg = OAuthConfig::new(issuer.clone(), audience.clone(), JwksSource::parse(&jwks)?);
        cfg.leeway = Duration::from_secs(self.auth_leeway_secs);
        cfg.jwks_min_refresh = Duration::from_secs(self.jwks_min_refresh_secs);
        cfg.jwks_max_age = Duration::from_secs(self.jwks_max_age_secs.max(1));
        Ok(cfg)
    }
}

/// `TOOL=SCOPE[ SCOPE…]` entries into a map (several entries for one tool add up).
fn parse_tool_scopes(entries: &[String]) -> Result<HashMap<String, Vec<String>>, AuthError> {
    let mut map: HashMap<String, Vec<String>> = HashMap::new();
    for e in entries {
        let Some((tool, scopes)) = e.split_once('=') else {
            return Err(refused(format!("--tool-scope {e:?}: expected TOOL=SCOPE")));
        };
        let scopes: Vec<String> = scopes.split_whitespace().map(String::from).collect();
        if tool.trim().is_empty() || scopes.is_empty() {
            return Err(refused(format!("--tool-scope {e:?}: expected TOOL=SCOPE")));
        }
        if let Some(bad) = scopes.iter().find(|s| s.contains(['"', '\\'])) {
            return Err(refused(format!(
                "--tool-scope {e:?}: scope {bad:?} has a character scopes cannot have"
            )));
        }
        map.entry(tool.trim().to_string())
            .or_default()
            .extend(scopes);
    }
    Ok(map)
}

#[cfg(unix)]
fn warn_if_readable_by_others(path: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(m) = std::fs::metadata(path)
        && m.permissions().mode() & 0o077 != 0
    {
        tracing::warn!(file = %path.display(), "the token file is readable by other users; chmod 600 it");
    }
}

#[cfg(not(unix))]
fn warn_if_readable_by_others(_path: &std::path::Path) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_scopes_add_up_and_refuse_nonsense() {
        let m = parse_tool_scopes(&["a=x y".into(), "a=z".into(), "b=w".into()]).unwrap();
        assert_eq!(m["a"], ["x", "y", "z"]);
        assert_eq!(m["b"], ["w"]);
        assert!(parse_tool_scopes(&["a".into()]).is_err());
        assert!(parse_tool_scopes(&["a=".into()]).is_err());
        assert!(parse_tool_scopes(&["a=\"q\"".into()]).is_err());
    }
}
