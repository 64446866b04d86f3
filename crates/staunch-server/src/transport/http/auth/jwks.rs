//! The authorization server's signing keys (a JWKS), fetched and cached.
//!
//! Keys are fetched on first use and kept for `max_age`. A token naming a key id the cache
//! does not hold triggers one refetch — that is how a key rotation is picked up — but at most
//! once per `min_refresh`, so a stream of tokens with made-up key ids cannot turn this server
//! into a load generator against the authorization server. Refetches are serialised: many
//! requests waiting for the same new key cause one fetch.
//!
//! The JWKS comes from an `https://` or `http://` URL (staunch-net's client: rustls when the
//! `tls` feature is built in, as in the `staunch` binary) or from a file (`file://` or a path).

use std::path::PathBuf;
use std::time::Duration;

use axum::http::Uri;
use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey};
use tokio::sync::Mutex;
use tokio::time::Instant;

use super::AuthError;

/// Largest JWKS document read.
const MAX_JWKS_BYTES: usize = 512 * 1024;
/// Longest a fetch may take (connect, headers and body).
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the keys come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JwksSource {
    /// An `https://` or `http://` URL.
    Url(String),
    /// A local file holding the JWKS document.
    File(PathBuf),
}

impl JwksSource {
    /// `https://…` or `http://…` → a URL (https only when this build has TLS, and refused up
    /// front when no root certificate could be loaded); `file://…` or anything without a
    /// scheme → a file.
    pub fn parse(s: &str) -> Result<Self, AuthError> {
        if let Some(path) = s.strip_prefix("file://") {
            return Ok(Self::File(path.into()));
        }
        if s.starts_with("https://") || s.starts_with("http://") {
            staunch_net::check_url(s).map_err(|e| AuthError::Config(format!("JWKS URL {e}")))?;
            return Ok(Self::Url(s.to_string()));
        }
        if s.contains("://") {
            return Err(AuthError::Config(format!(
                "JWKS URL {s}: use https://, http:// or a file path"
            )));
        }
        Ok(Self::File(s.into()))
    }
}

/// One usable key.
struct Key {
    kid: Option<String>,
    alg: Option<Algorithm>,
    key: DecodingKey,
}

#[derive(Default)]
struct Cache {
    keys: Vec<Key>,
    fetched: Option<Instant>,
    /// When the last fetch was attempted (successful or not): the refetch rate limit.
    attempted: Option<Instant>,
}

/// A cached JWKS with rate-limited refresh.
pub(crate) struct Jwks {
    source: JwksSource,
    client: staunch_net::HttpClient,
    min_refresh: Duration,
    max_age: Duration,
    cache: Mutex<Cache>,
}

/// The candidate keys for a token, or why there are none.
pub(crate) enum Lookup {
    Keys(Vec<(Option<Algorithm>, DecodingKey)>),
    /// No key with that id, even after a refetch (or the refetch was rate-limited).
    UnknownKid,
    /// The keys could not be fetched at all.
    Unavailable(String),
}

impl Jwks {
    pub(crate) fn new(source: JwksSource, min_refresh: Duration, max_age: Duration) -> Self {
        Self {
            source,
            client: staunch_net::client(),
            min_refresh,
            max_age,
            cache: Mutex::new(Cache::default()),
        }
    }

    /// The keys a token with key id `kid` may be signed with (every key when it names none).
    pub(crate) async fn lookup(&self, kid: Option<&str>) -> Lookup {
        let mut cache = self.cache.lock().await;
        let stale = cache.fetched.is_none_or(|t| t.elapsed() >= self.max_age);
        let found = matching(&cache.keys, kid);
        if !stale && !found.is_empty() {
            return Lookup::Keys(found);
        }
        let may_fetch = cache
            .attempted
            .is_none_or(|t| t.elapsed() >= self.min_refresh);
        if may_fetch {
            cache.attempted = Some(Instant::now());
            match self.fetch().await {
                Ok(keys) => {
                    tracing::info!(keys = keys.len(), source = ?self.source, "JWKS fetched");
                    cache.keys = keys;
                    cache.fetched = Some(Instant::now());
                }
                Err(e) => {
                    tracing::warn!(error = %e, source = ?self.source, "JWKS fetch failed");
                    if cache.keys.is_empty() {
                        return Lookup::Unavailable(e.to_string());
                    }
                    // Keep serving with the keys we have.
                }
            }
        }
        let found = matching(&cache.keys, kid);
        if found.is_empty() {
            if cache.fetched.is_none() {
                return Lookup::Unavailable("the JWKS has not been fetched yet".into());
            }
            return Lookup::UnknownKid;
        }
        Lookup::Keys(found)
    }

    async fn fetch(&self) -> Result<Vec<Key>, AuthError> {
        let bytes = match &self.source {
            JwksSource::File(p) => {
                let path = p.clone();
                tokio::task::spawn_blocking(move || std::fs::read(&path))
                    .await
                    .map_err(|e| AuthError::Jwks(e.to_string()))?
                    .map_err(|e| AuthError::Jwks(format!("reading {}: {e}", p.display())))?
            }
            JwksSource::Url(u) => http_get(&self.client, u).await?,
        };
        parse_jwks(&bytes)
    }
}

fn matching(keys: &[Key], kid: Option<&str>) -> Vec<(Option<Algorithm>, DecodingKey)> {
    keys.iter()
        .filter(|k| kid.is_none() || k.kid.as_deref() == kid)
        .map(|k| (k.alg, k.key.clone()))
        .collect()
}

/// The usable keys of a JWKS document: signing keys (no `use`, or `use: sig`) of a supported
/// type; others are skipped with a log line.
fn parse_jwks(bytes: &[u8]) -> Result<Vec<Key>, AuthError> {
    let set: JwkSet = serde_json::from_slice(bytes)
        .map_err(|e| AuthError::Jwks(format!("not a JWKS document: {e}")))?;
    let mut keys = Vec::new();
    for jwk in &set.keys {
        match key_of(jwk) {
            Ok(k) => keys.push(k),
            Err(why) => {
                tracing::warn!(kid = ?jwk.common.key_id, %why, "JWKS key skipped");
            }
        }
    }
    Ok(keys)
}

fn key_of(jwk: &Jwk) -> Result<Key, String> {
    use jsonwebtoken::jwk::PublicKeyUse;
    if jwk
        .common
        .public_key_use
        .as_ref()
        .is_some_and(|u| !matches!(u, PublicKeyUse::Signature))
    {
        return Err("not a signing key".into());
    }
    let alg = match jwk.common.key_algorithm {
        Some(a) => Some(
            Algorithm::try_from(a).map_err(|_| format!("algorithm {a} is not for signatures"))?,
        ),
        None => None,
    };
    let key = DecodingKey::from_jwk(jwk).map_err(|e| e.to_string())?;
    Ok(Key {
        kid: jwk.common.key_id.clone(),
        alg,
        key,
    })
}

/// The `jwks_uri` an issuer announces in its authorization-server metadata (RFC 8414, at
/// `/.well-known/oauth-authorization-server` with the issuer's path appended), or else its
/// OpenID configuration.
pub async fn discover_jwks_uri(issuer: &str) -> Result<String, AuthError> {
    let uri: Uri = issuer
        .parse()
        .map_err(|e| AuthError::Config(format!("issuer {issuer}: {e}")))?;
    let (Some(scheme), Some(authority)) = (uri.scheme_str(), uri.authority()) else {
        return Err(AuthError::Config(format!(
            "issuer {issuer}: not an absolute URL"
        )));
    };
    staunch_net::check_url(issuer).map_err(|e| {
        AuthError::Config(format!(
            "issuer {e}; give --jwks-url (a URL or a file) to skip discovery"
        ))
    })?;
    let client = staunch_net::client();
    let path = uri.path().trim_end_matches('/');
    let candidates = [
        format!("{scheme}://{authority}/.well-known/oauth-authorization-server{path}"),
        format!(
            "{}/.well-known/openid-configuration",
            issuer.trim_end_matches('/')
        ),
    ];
    let mut last = String::new();
    for url in &candidates {
        let body = match http_get(&client, url).await {
            Ok(b) => b,
            Err(e) => {
                last = e.to_string();
                continue;
            }
        };
        let doc: serde_json::Value = serde_json::from_slice(&body)
            .map_err(|e| AuthError::Jwks(format!("{url}: not JSON: {e}")))?;
        if let Some(j) = doc.get("jwks_uri").and_then(serde_json::Value::as_str) {
            return Ok(j.to_string());
        }
        last = format!("{url}: no jwks_uri");
    }
    Err(AuthError::Jwks(format!(
        "could not discover the issuer's JWKS ({last}); give --jwks-url"
    )))
}

/// GET `url` (JSON), bounded in size and time; the body when the status is 200.
async fn http_get(client: &staunch_net::HttpClient, url: &str) -> Result<Vec<u8>, AuthError> {
    staunch_net::get(
        client,
        url,
        "application/json",
        MAX_JWKS_BYTES,
        FETCH_TIMEOUT,
    )
    .await
    .map(|b| b.to_vec())
    .map_err(|e| AuthError::Jwks(format!("GET {url}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources() {
        assert_eq!(
            JwksSource::parse("http://127.0.0.1:9/jwks").unwrap(),
            JwksSource::Url("http://127.0.0.1:9/jwks".into())
        );
        assert_eq!(
            JwksSource::parse("file:///etc/jwks.json").unwrap(),
            JwksSource::File("/etc/jwks.json".into())
        );
        assert_eq!(
            JwksSource::parse("keys.json").unwrap(),
            JwksSource::File("keys.json".into())
        );
        assert!(JwksSource::parse("ftp://x/y").is_err());
        let e = JwksSource::parse("http:///jwks").unwrap_err().to_string();
        assert!(e.contains("JWKS URL http:///jwks"), "{e}");
    }

    #[test]
    fn skips_keys_it_cannot_use() {
        let doc = br#"{"keys":[
            {"kty":"EC","crv":"P-256","kid":"a","use":"sig","alg":"ES256",
             "x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
             "y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"},
            {"kty":"EC","crv":"P-256","kid":"enc","use":"enc",
             "x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
             "y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}
        ]}"#;
        let keys = parse_jwks(doc).unwrap();
        assert_eq!(keys.len(), 1);
        assert_eq!(keys[0].kid.as_deref(), Some("a"));
        assert_eq!(keys[0].alg, Some(Algorithm::ES256));
        assert!(parse_jwks(b"{}").is_err());
    }
}
