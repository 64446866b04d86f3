//! Authenticated requests for the tests of `--auth`: fixed signing keys (`fixtures/auth`,
//! never used anywhere else), JWTs signed with them, a JWKS server of the test's own, and
//! requests that carry a token in either protocol era.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

use crate::http::{Endpoint, Resp};

/// The issuer the test tokens name.
pub const ISSUER: &str = "http://issuer.test";

fn pem_der(name: &str) -> Vec<u8> {
    let path = format!("{}/fixtures/auth/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let b64: String = text
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .collect::<Vec<_>>()
        .concat();
    base64::engine::general_purpose::STANDARD
        .decode(b64)
        .expect("PEM body")
}

/// A test signing key (a fixture's private half) and its public JWK, with a key id.
#[derive(Debug)]
pub struct Key {
    kid: String,
    alg: Algorithm,
    enc: EncodingKey,
}

impl Key {
    /// The P-256 key `fixtures/auth/FILE` (`ec-key-1.pem` … `ec-key-3.pem`), as `kid`.
    pub fn ec(file: &str, kid: &str) -> Self {
        Self {
            kid: kid.into(),
            alg: Algorithm::ES256,
            enc: EncodingKey::from_ec_der(&pem_der(file)),
        }
    }

    /// The RSA key `fixtures/auth/FILE` (`rsa-key-1.pem`), as `kid`.
    pub fn rsa(file: &str, kid: &str) -> Self {
        Self {
            kid: kid.into(),
            alg: Algorithm::RS256,
            enc: EncodingKey::from_rsa_der(&pem_der(file)),
        }
    }

    /// Its public half, as a JWKS lists it.
    pub fn jwk(&self) -> Jwk {
        let mut j = Jwk::from_encoding_key(&self.enc, self.alg).expect("public JWK");
        j.common.key_id = Some(self.kid.clone());
        j
    }

    /// A token signed by this key, naming `kid` (normally its own).
    pub fn sign_as(&self, kid: &str, claims: &Value) -> String {
        let mut h = Header::new(self.alg);
        h.kid = Some(kid.to_string());
        jsonwebtoken::encode(&h, claims, &self.enc).expect("sign")
    }

    /// A token signed by this key, naming its own key id.
    pub fn sign(&self, claims: &Value) -> String {
        self.sign_as(&self.kid, claims)
    }
}

/// Seconds since the epoch.
pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Good claims for `sub` on `audience`, with `scope`.
pub fn claims(sub: &str, audience: &str, scope: &str) -> Value {
    json!({"iss": ISSUER, "sub": sub, "aud": audience, "exp": now() + 300,
           "iat": now(), "nbf": now() - 5, "scope": scope})
}

/// A JWKS served on a loopback port, its keys replaceable (a rotation), its fetches counted.
#[derive(Debug)]
pub struct JwksServer {
    /// Its port.
    pub port: u16,
    keys: Arc<Mutex<Vec<Jwk>>>,
    hits: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for JwksServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl JwksServer {
    /// Serves `keys`.
    pub async fn start(keys: Vec<Jwk>) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let keys = Arc::new(Mutex::new(keys));
        let hits = Arc::new(AtomicUsize::new(0));
        let (k, h) = (keys.clone(), hits.clone());
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (k, h) = (k.clone(), h.clone());
                tokio::spawn(async move {
                    let svc = service_fn(move |_req| {
                        h.fetch_add(1, Ordering::SeqCst);
                        let set = JwkSet {
                            keys: k.lock().unwrap().clone(),
                        };
                        let body = serde_json::to_vec(&set).unwrap();
                        async move {
                            Ok::<_, std::convert::Infallible>(
                                hyper::Response::builder()
                                    .header("content-type", "application/json")
                                    .body(Full::new(Bytes::from(body)))
                                    .unwrap(),
                            )
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
        Self {
            port,
            keys,
            hits,
            task,
        }
    }

    /// Where the keys are.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/jwks.json", self.port)
    }

    /// Serves `keys` from now on.
    pub fn set(&self, keys: Vec<Jwk>) {
        *self.keys.lock().unwrap() = keys;
    }

    /// How often the keys were fetched.
    pub fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

/// `Bearer TOKEN`.
pub fn auth_header(token: &str) -> String {
    format!("Bearer {token}")
}

/// POSTs a session-era message with a token (and session, when given).
pub async fn post(s: &Endpoint, token: Option<&str>, session: Option<&str>, msg: &Value) -> Resp {
    let bearer = token.map(auth_header);
    let extra: Vec<(&str, &str)> = bearer
        .iter()
        .map(|b| ("authorization", b.as_str()))
        .collect();
    s.post_with(session, msg, &extra).await
}

/// The JSON-RPC response of a session-era request (SSE or JSON body).
pub async fn answer(r: Resp) -> Value {
    assert_eq!(r.status, 200, "status");
    let (_, v) = r.answer(Duration::from_secs(15)).await;
    v
}

/// A session opened with `token` (initialized); its id.
pub async fn initialize(s: &Endpoint, token: &str) -> String {
    s.initialize_with(&[("authorization", &auth_header(token))])
        .await
}

/// A session-era request with `token` on session `sid`: its JSON-RPC response.
pub async fn rpc(s: &Endpoint, token: &str, sid: &str, msg: Value) -> Value {
    answer(post(s, Some(token), Some(sid), &msg).await).await
}

/// A JSON-RPC request.
pub fn req(id: i64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// A stateless (2026-07-28) request with a token.
pub async fn post_stateless(s: &Endpoint, token: Option<&str>, msg: &Value) -> Resp {
    let bearer = token.map(auth_header).unwrap_or_default();
    s.post_stateless_with(msg, &[("authorization", bearer.as_str())])
        .await
}

/// The `WWW-Authenticate` challenge (empty without one).
pub fn www_authenticate(r: &Resp) -> String {
    r.header("www-authenticate").unwrap_or_default()
}

/// `GET path` on a loopback port: the status and the JSON body (null if none).
pub async fn get_path(port: u16, path: &str) -> (u16, Value) {
    let stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    let req = hyper::Request::get(path)
        .header("host", format!("127.0.0.1:{port}"))
        .body(Full::new(Bytes::new()))
        .unwrap();
    let resp = sender.send_request(req).await.unwrap();
    let status = resp.status().as_u16();
    let body = http_body_util::BodyExt::collect(resp.into_body())
        .await
        .unwrap()
        .to_bytes();
    (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

/// The `resource_metadata` URL of a challenge.
pub fn metadata_pointer(challenge: &str) -> String {
    challenge
        .split("resource_metadata=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap_or_else(|| panic!("no resource_metadata in {challenge:?}"))
        .to_string()
}
