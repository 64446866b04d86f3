//! OAuth access tokens as JWTs (`--auth oauth`): the signature against the authorization
//! server's JWKS, then `exp`/`nbf` (with a small leeway), `iss` and `aud` — the audience must
//! be this resource (RFC 8707), so a token minted for another server is refused here.
//!
//! Only asymmetric algorithms are accepted (RSA, RSA-PSS, ECDSA, EdDSA): `none` and the HMAC
//! family never are, whatever the token's header says, and a key that declares its `alg` is
//! used with that algorithm only. The principal is the token's `sub`; its scopes come from
//! `scope` (space-separated, RFC 9068) or `scp` (a list, as some servers send).

use std::time::Duration;

use jsonwebtoken::{Algorithm, Validation, decode, decode_header};
use serde_json::Value;

use super::Identity;
use super::jwks::{Jwks, JwksSource, Lookup};

/// What `--auth oauth` checks.
#[derive(Clone, Debug)]
pub struct OAuthConfig {
    /// The authorization server's issuer identifier: tokens' `iss` must equal it, and the
    /// protected-resource metadata names it.
    pub issuer: String,
    /// This resource's identifier (the MCP endpoint's public URL): tokens' `aud` must contain
    /// it.
    pub audience: String,
    /// Where the signing keys are.
    pub jwks: JwksSource,
    /// Clock skew tolerated on `exp` and `nbf`.
    pub leeway: Duration,
    /// Least time between two JWKS fetches (an unknown key id triggers one).
    pub jwks_min_refresh: Duration,
    /// Keys are refetched when older than this.
    pub jwks_max_age: Duration,
}

impl OAuthConfig {
    /// The default clock skew tolerated.
    pub const DEFAULT_LEEWAY: Duration = Duration::from_secs(30);
    /// The default least time between two JWKS fetches.
    pub const DEFAULT_JWKS_MIN_REFRESH: Duration = Duration::from_secs(10);
    /// The default age at which keys are refetched.
    pub const DEFAULT_JWKS_MAX_AGE: Duration = Duration::from_secs(3600);

    /// The defaults for an issuer and audience: leeway 30 s, refetch at most every 10 s,
    /// keys kept an hour.
    pub fn new(issuer: impl Into<String>, audience: impl Into<String>, jwks: JwksSource) -> Self {
        Self {
            issuer: issuer.into(),
            audience: audience.into(),
            jwks,
            leeway: Self::DEFAULT_LEEWAY,
            jwks_min_refresh: Self::DEFAULT_JWKS_MIN_REFRESH,
            jwks_max_age: Self::DEFAULT_JWKS_MAX_AGE,
        }
    }
}

/// Why a token was refused (said in `error_description`; never echoes the token).
#[derive(Debug)]
pub(crate) enum TokenRefusal {
    /// The token is invalid (`invalid_token`).
    Invalid(String),
    /// The keys could not be obtained: not the client's fault.
    KeysUnavailable(String),
}

const ACCEPTED: &[Algorithm] = &[
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// Validates JWT access tokens.
pub(crate) struct JwtValidator {
    cfg: OAuthConfig,
    jwks: Jwks,
}

impl JwtValidator {
    pub(crate) fn new(cfg: OAuthConfig) -> Self {
        let jwks = Jwks::new(cfg.jwks.clone(), cfg.jwks_min_refresh, cfg.jwks_max_age);
        Self { cfg, jwks }
    }

    pub(crate) fn config(&self) -> &OAuthConfig {
        &self.cfg
    }

    pub(crate) async fn verify(&self, token: &str) -> Result<Identity, TokenRefusal> {
        let invalid = |why: &str| TokenRefusal::Invalid(why.to_string());
        let header = decode_header(token).map_err(|_| invalid("malformed token"))?;
        if !ACCEPTED.contains(&header.alg) {
            return Err(invalid("token algorithm not accepted"));
        }
        let keys = match self.jwks.lookup(header.kid.as_deref()).await {
            Lookup::Keys(k) => k,
            Lookup::UnknownKid => return Err(invalid("unknown signing key")),
            Lookup::Unavailable(why) => return Err(TokenRefusal::KeysUnavailable(why)),
        };
        let mut validation = Validation::new(header.alg);
        validation.leeway = self.cfg.leeway.as_secs();
        // Off by default in jsonwebtoken: a token not valid yet is refused too.
        validation.validate_nbf = true;
        validation.set_issuer(&[&self.cfg.issuer]);
        validation.set_audience(&[&self.cfg.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        let mut last = invalid("no key for the token's algorithm");
        for (alg, key) in keys {
            if alg.is_some_and(|a| a != header.alg) {
                continue;
            }
            match decode::<serde_json::Map<String, Value>>(token, &key, &validation) {
                Ok(data) => return identity_of(&data.claims),
                Err(e) => {
                    use jsonwebtoken::errors::ErrorKind as K;
                    last = match e.kind() {
                        K::InvalidSignature => invalid("bad signature"),
                        K::ExpiredSignature => invalid("token expired"),
                        K::ImmatureSignature => invalid("token not valid yet (nbf)"),
                        K::InvalidIssuer => invalid("wrong issuer"),
                        K::InvalidAudience => invalid("wrong audience: not for this resource"),
                        K::MissingRequiredClaim(c) => {
                            TokenRefusal::Invalid(format!("missing claim {c}"))
                        }
                        K::InvalidAlgorithm => invalid("algorithm does not match the key"),
                        _ => invalid("invalid token"),
                    };
                    // Only a signature mismatch may mean "another key with this id"; anything
                    // else is about the claims and holds for every key.
                    if !matches!(e.kind(), K::InvalidSignature | K::InvalidAlgorithm) {
                        return Err(last);
                    }
                }
            }
        }
        Err(last)
    }
}

fn identity_of(claims: &serde_json::Map<String, Value>) -> Result<Identity, TokenRefusal> {
    let principal = claims
        .get("sub")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| TokenRefusal::Invalid("the sub claim is not a non-empty string".into()))?;
    let mut scopes: Vec<String> = match claims.get("scope") {
        Some(Value::String(s)) => s.split_whitespace().map(String::from).collect(),
        _ => Vec::new(),
    };
    match claims.get("scp") {
        Some(Value::Array(a)) => {
            scopes.extend(a.iter().filter_map(Value::as_str).map(String::from))
        }
        Some(Value::String(s)) => scopes.extend(s.split_whitespace().map(String::from)),
        _ => {}
    }
    Ok(Identity {
        principal: principal.to_string(),
        scopes,
    })
}
