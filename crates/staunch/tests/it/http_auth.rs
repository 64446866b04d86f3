//! Authentication on `staunch serve --http` (issue 12): the real binary over loopback, with
//! static bearer tokens and with OAuth JWTs whose keys a tiny JWKS server in this test serves
//! (keys: fixed test keys under tests/fixtures/auth, signed with `jsonwebtoken`).
//!
//! What a client sees: 401 with the RFC 9728 metadata pointer when it sends no token, 401
//! `invalid_token` for a wrong audience, an expired token, a bad signature or an unknown key id,
//! 403 `insufficient_scope` for a tool it lacks the scope of (both eras); what one principal
//! cannot do to another's session, jobs and tasks; and a key rotation picked up.

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use common::http::{HttpServer, Resp, call, stateless};
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(15);
const ISSUER: &str = "http://issuer.test";
const ALICE: &str = "alice-token-0123456789";
const BOB: &str = "bob-token-0123456789ab";
const WRITER: &str = "writer-token-0123456789";
const SET: &str = "set_value=kv:write";

// ---------------------------------------------------------------------------------------------
// Keys and tokens

fn pem_der(name: &str) -> Vec<u8> {
    let path = format!("{}/tests/fixtures/auth/{name}", env!("CARGO_MANIFEST_DIR"));
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

/// A test signing key: its private half and its public JWK (with a key id).
struct Key {
    kid: String,
    alg: Algorithm,
    enc: EncodingKey,
}

impl Key {
    fn ec(file: &str, kid: &str) -> Self {
        Self {
            kid: kid.into(),
            alg: Algorithm::ES256,
            enc: EncodingKey::from_ec_der(&pem_der(file)),
        }
    }

    fn rsa(file: &str, kid: &str) -> Self {
        Self {
            kid: kid.into(),
            alg: Algorithm::RS256,
            enc: EncodingKey::from_rsa_der(&pem_der(file)),
        }
    }

    fn jwk(&self) -> Jwk {
        let mut j = Jwk::from_encoding_key(&self.enc, self.alg).expect("public JWK");
        j.common.key_id = Some(self.kid.clone());
        j
    }

    /// A token signed by this key, naming `kid` (normally its own).
    fn sign_as(&self, kid: &str, claims: &Value) -> String {
        let mut h = Header::new(self.alg);
        h.kid = Some(kid.to_string());
        jsonwebtoken::encode(&h, claims, &self.enc).expect("sign")
    }

    fn sign(&self, claims: &Value) -> String {
        self.sign_as(&self.kid, claims)
    }
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Good claims for `sub` on `audience`, with `scope`.
fn claims(sub: &str, audience: &str, scope: &str) -> Value {
    json!({"iss": ISSUER, "sub": sub, "aud": audience, "exp": now() + 300,
           "iat": now(), "nbf": now() - 5, "scope": scope})
}

// ---------------------------------------------------------------------------------------------
// A JWKS server

struct JwksServer {
    port: u16,
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
    async fn start(keys: Vec<Jwk>) -> Self {
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

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/jwks.json", self.port)
    }

    fn set(&self, keys: Vec<Jwk>) {
        *self.keys.lock().unwrap() = keys;
    }

    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

// ---------------------------------------------------------------------------------------------
// Servers under test and requests

/// Fast job loops.
const JOB_FLAGS: &[&str] = &[
    "--job-claim-poll-ms",
    "50",
    "--job-poll-after-ms",
    "100",
    "--job-reap-ms",
    "100",
];

async fn bearer_server(extra: &[&str]) -> HttpServer {
    let tokens = format!("# test tokens\n{ALICE} alice\n{BOB} bob\n{WRITER} writer kv:write\n");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tokens");
    std::fs::write(&file, tokens).unwrap();
    let file = file.display().to_string();
    let mut args = vec!["--auth", "bearer", "--auth-tokens", file.as_str()];
    args.extend_from_slice(JOB_FLAGS);
    args.extend_from_slice(extra);
    let s = HttpServer::start(&args).await;
    // The server has read the file; the directory may go.
    drop(dir);
    s
}

/// An OAuth server whose audience is its own URL; `extra` flags appended.
async fn oauth_server(jwks: &JwksServer, extra: &[&str]) -> (HttpServer, String) {
    oauth_server_with(&jwks.url(), extra, &[]).await
}

/// [`oauth_server`] with the JWKS at `url` and environment variables for the server.
async fn oauth_server_with(
    url: &str,
    extra: &[&str],
    env: &[(&str, &str)],
) -> (HttpServer, String) {
    // The audience must be known before the port is: bind a port first, then hand it over.
    let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = probe.local_addr().unwrap().port();
    drop(probe);
    let addr = format!("127.0.0.1:{port}");
    let audience = format!("http://{addr}/mcp");
    let mut args = vec![
        "--http",
        addr.as_str(),
        "--auth",
        "oauth",
        "--issuer",
        ISSUER,
        "--audience",
        audience.as_str(),
        "--jwks-url",
        url,
    ];
    args.extend_from_slice(JOB_FLAGS);
    args.extend_from_slice(extra);
    (start_at(&args, env).await, audience)
}

/// `staunch serve` with the given flags (which name `--http` themselves) and environment.
async fn start_at(args: &[&str], env: &[(&str, &str)]) -> HttpServer {
    use tokio::io::AsyncBufReadExt;
    let dir = tempfile::tempdir().unwrap();
    let log_path = dir.path().join("lifecycle.jsonl");
    let mut child = tokio::process::Command::new(common::BIN)
        .arg("serve")
        .arg("--log-file")
        .arg(&log_path)
        .arg("--store")
        .arg(dir.path().join("staunch.db"))
        .args(args)
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn staunch");
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let port = tokio::time::timeout(T, async {
        while let Ok(Some(l)) = lines.next_line().await {
            if let Some(rest) = l.split("http://127.0.0.1:").nth(1) {
                return rest.split('/').next().unwrap().parse::<u16>().unwrap();
            }
        }
        panic!("server exited before listening");
    })
    .await
    .expect("server listens");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    HttpServer::of(child, dir, port, log_path)
}

fn auth_header(token: &str) -> String {
    format!("Bearer {token}")
}

/// POSTs a session-era message with a token (and session, when given).
async fn post(s: &HttpServer, token: Option<&str>, session: Option<&str>, msg: &Value) -> Resp {
    let bearer = token.map(auth_header);
    let mut h = vec![
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
    ];
    if let Some(b) = &bearer {
        h.push(("authorization", b.as_str()));
    }
    if let Some(sid) = session {
        h.push(("mcp-session-id", sid));
        h.push(("mcp-protocol-version", "2025-11-25"));
    }
    s.send("POST", &h, &msg.to_string()).await
}

/// The JSON-RPC response of a session-era request (SSE or JSON body).
async fn answer(r: Resp) -> Value {
    assert_eq!(r.status, 200, "status");
    let (_, v) = r.answer(T).await;
    v
}

async fn initialize(s: &HttpServer, token: &str) -> String {
    let r = post(
        s,
        Some(token),
        None,
        &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"}}}),
    )
    .await;
    assert_eq!(r.status, 200);
    let sid = r.header("mcp-session-id").expect("session id");
    let n = post(
        s,
        Some(token),
        Some(&sid),
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    assert_eq!(n.status, 202);
    sid
}

async fn rpc(s: &HttpServer, token: &str, sid: &str, msg: Value) -> Value {
    answer(post(s, Some(token), Some(sid), &msg).await).await
}

fn req(id: i64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// A stateless (2026-07-28) request with a token.
async fn post_stateless(s: &HttpServer, token: Option<&str>, msg: &Value) -> Resp {
    let bearer = token.map(auth_header).unwrap_or_default();
    s.post_stateless_with(msg, &[("authorization", bearer.as_str())])
        .await
}

fn www_authenticate(r: &Resp) -> String {
    r.header("www-authenticate").unwrap_or_default()
}

async fn get_path(port: u16, path: &str) -> (u16, Value) {
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
fn metadata_pointer(challenge: &str) -> String {
    challenge
        .split("resource_metadata=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap_or_else(|| panic!("no resource_metadata in {challenge:?}"))
        .to_string()
}

// ---------------------------------------------------------------------------------------------
// Bearer tokens

#[tokio::test]
async fn no_token_is_401_with_the_metadata_pointer_and_a_wrong_one_is_invalid_token() {
    let s = bearer_server(&[]).await;
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"}}});
    // No token, in both eras.
    let r = post(&s, None, None, &init).await;
    assert_eq!(r.status, 401);
    let c = www_authenticate(&r);
    assert!(c.starts_with("Bearer "), "{c}");
    assert!(!c.contains("error="), "no token presented, no error: {c}");
    assert_eq!(
        metadata_pointer(&c),
        format!(
            "http://127.0.0.1:{}/.well-known/oauth-protected-resource/mcp",
            s.port
        )
    );
    let r = post_stateless(&s, None, &stateless(json!(1), "tools/list", json!({}))).await;
    assert_eq!(r.status, 401);
    assert!(www_authenticate(&r).contains("resource_metadata="));
    // A token that is not in the list, and a non-Bearer scheme.
    let r = post(&s, Some("not-a-known-token-at-all"), None, &init).await;
    assert_eq!(r.status, 401);
    let c = www_authenticate(&r);
    assert!(c.contains("error=\"invalid_token\""), "{c}");
    assert!(c.contains("resource_metadata="), "{c}");
    let basic = s
        .send(
            "POST",
            &[
                ("content-type", "application/json"),
                ("accept", "application/json, text/event-stream"),
                ("authorization", "Basic YWxpY2U6cHc="),
            ],
            &init.to_string(),
        )
        .await;
    assert_eq!(basic.status, 401);
    // GET and DELETE need a token too.
    let g = s.get("0123", None).await;
    assert_eq!(g.status, 401);
    // A good token opens a session; the token is never logged.
    let sid = initialize(&s, ALICE).await;
    let listed = rpc(&s, ALICE, &sid, req(1, "tools/list", json!({}))).await;
    assert!(listed["result"]["tools"].as_array().unwrap().len() > 3);
    let stderr_and_log = std::fs::read_to_string(&s.log_path).unwrap_or_default();
    assert!(!stderr_and_log.contains(ALICE));
    assert!(!stderr_and_log.contains("not-a-known-token"));
}

#[tokio::test]
async fn auth_off_serves_no_metadata_and_needs_no_token() {
    let s = HttpServer::start(&[]).await;
    let (status, _) = get_path(s.port, "/.well-known/oauth-protected-resource/mcp").await;
    assert_eq!(status, 404);
    let sid = s.initialize().await;
    let r = s.post(Some(&sid), &req(1, "tools/list", json!({}))).await;
    assert_eq!(r.status, 200);
    assert!(r.header("www-authenticate").is_none());
}

#[tokio::test]
async fn a_second_principal_cannot_use_the_first_ones_session() {
    let s = bearer_server(&[]).await;
    let a = initialize(&s, ALICE).await;
    // Bob with Alice's session id: as if it did not exist, for POST, GET and DELETE.
    let r = post(&s, Some(BOB), Some(&a), &req(1, "tools/list", json!({}))).await;
    assert_eq!(r.status, 404);
    let bearer = auth_header(BOB);
    let g = s
        .send(
            "GET",
            &[
                ("accept", "text/event-stream"),
                ("mcp-session-id", &a),
                ("authorization", &bearer),
            ],
            "",
        )
        .await;
    assert_eq!(g.status, 404);
    let d = s
        .send(
            "DELETE",
            &[("mcp-session-id", &a), ("authorization", &bearer)],
            "",
        )
        .await;
    assert_eq!(d.status, 404);
    // Alice's session is untouched.
    let listed = rpc(&s, ALICE, &a, req(2, "tools/list", json!({}))).await;
    assert!(listed["result"]["tools"].is_array(), "{listed}");
    let d = s
        .send(
            "DELETE",
            &[
                ("mcp-session-id", &a),
                ("authorization", &auth_header(ALICE)),
            ],
            "",
        )
        .await;
    assert_eq!(d.status, 200);
}

#[tokio::test]
async fn a_second_principal_cannot_get_cancel_or_list_the_first_ones_jobs_and_tasks() {
    let s = bearer_server(&[]).await;
    let a = initialize(&s, ALICE).await;
    let b = initialize(&s, BOB).await;
    let started = rpc(
        &s,
        ALICE,
        &a,
        call(
            json!(1),
            "start_import_rows",
            json!({"rows": 100, "delay_ms": 100}),
            None,
        ),
    )
    .await;
    let job = started["result"]["structuredContent"]["job_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{started}"))
        .to_string();
    // Bob, in a session and stateless: the job is unknown to him.
    for tool in ["get_import_rows", "cancel_import_rows"] {
        let r = rpc(
            &s,
            BOB,
            &b,
            call(json!(2), tool, json!({"job_id": job}), None),
        )
        .await;
        let text = r.to_string();
        assert!(
            r["result"]["isError"] == true || r.get("error").is_some(),
            "{tool} by bob: {r}"
        );
        assert!(
            !text.contains("\"running\"") && !text.contains("cancelling"),
            "{r}"
        );
        let m = stateless(
            json!(3),
            "tools/call",
            json!({"name": tool, "arguments": {"job_id": job}}),
        );
        let (_, r) = post_stateless(&s, Some(BOB), &m).await.answer(T).await;
        assert!(
            r["result"]["isError"] == true || r.get("error").is_some(),
            "stateless {tool} by bob: {r}"
        );
    }
    for method in ["tasks/get", "tasks/cancel"] {
        let r = rpc(&s, BOB, &b, req(4, method, json!({"taskId": job}))).await;
        assert!(r.get("error").is_some(), "{method} by bob: {r}");
    }
    let bobs = rpc(&s, BOB, &b, req(5, "tasks/list", json!({}))).await;
    assert_eq!(bobs["result"]["tasks"], json!([]), "{bobs}");
    // Alice sees it, in her session and in a stateless request (the principal, not the
    // session, owns it), and it was not cancelled by Bob.
    let alices = rpc(&s, ALICE, &a, req(6, "tasks/list", json!({}))).await;
    let ids: Vec<&str> = alices["result"]["tasks"]
        .as_array()
        .unwrap_or_else(|| panic!("{alices}"))
        .iter()
        .filter_map(|t| t["taskId"].as_str())
        .collect();
    assert_eq!(ids, [job.as_str()]);
    let m = stateless(
        json!(7),
        "tools/call",
        json!({"name": "get_import_rows", "arguments": {"job_id": job}}),
    );
    let (_, got) = post_stateless(&s, Some(ALICE), &m).await.answer(T).await;
    let status = got["result"]["structuredContent"]["status"]
        .as_str()
        .unwrap_or_else(|| panic!("{got}"));
    assert!(
        status == "running" || status == "queued",
        "bob's cancel must not have reached alice's job: {got}"
    );
    let c = rpc(
        &s,
        ALICE,
        &a,
        call(json!(8), "cancel_import_rows", json!({"job_id": job}), None),
    )
    .await;
    assert!(c["result"]["isError"] != true, "{c}");
}

// ---------------------------------------------------------------------------------------------
// Scopes

#[tokio::test]
async fn a_missing_scope_is_403_insufficient_scope_in_both_eras() {
    let s = bearer_server(&["--tool-scope", SET]).await;
    let a = initialize(&s, ALICE).await;
    let set = call(
        json!(1),
        "set_value",
        json!({"key": "k", "value": "v"}),
        None,
    );
    let r = post(&s, Some(ALICE), Some(&a), &set).await;
    assert_eq!(r.status, 403);
    let c = www_authenticate(&r);
    assert!(c.contains("error=\"insufficient_scope\""), "{c}");
    assert!(c.contains("scope=\"kv:write\""), "{c}");
    assert!(c.contains("resource_metadata="), "{c}");
    let body = r.json().await;
    assert_eq!(body["id"], 1, "{body}");
    // Stateless.
    let m = stateless(
        json!(2),
        "tools/call",
        json!({"name": "set_value", "arguments": {"key": "k", "value": "v"}}),
    );
    let r = post_stateless(&s, Some(ALICE), &m).await;
    assert_eq!(r.status, 403);
    assert!(www_authenticate(&r).contains("insufficient_scope"));
    // Nothing was written.
    let get = call(json!(3), "get_value", json!({"key": "k"}), None);
    let got = rpc(&s, ALICE, &a, get.clone()).await;
    assert!(!got.to_string().contains("\"v\""), "{got}");
    // Tools without a scope stay callable; the writer's token carries the scope.
    let echo = rpc(
        &s,
        ALICE,
        &a,
        call(json!(4), "echo", json!({"text": "hi"}), None),
    )
    .await;
    assert_eq!(echo["result"]["content"][0]["text"], "hi", "{echo}");
    let w = initialize(&s, WRITER).await;
    let ok = rpc(&s, WRITER, &w, set).await;
    assert!(
        ok["result"]["isError"] != true && ok.get("result").is_some(),
        "{ok}"
    );
    let (_, ok) = post_stateless(&s, Some(WRITER), &m).await.answer(T).await;
    assert!(
        ok["result"]["isError"] != true && ok.get("result").is_some(),
        "{ok}"
    );
}

// ---------------------------------------------------------------------------------------------
// OAuth JWTs

#[tokio::test]
async fn the_metadata_document_has_the_rfc_9728_fields() {
    let k1 = Key::ec("ec-key-1.pem", "k1");
    let jwks = JwksServer::start(vec![k1.jwk()]).await;
    let (s, audience) = oauth_server(&jwks, &["--tool-scope", SET]).await;
    let r = post(&s, None, None, &req(0, "initialize", json!({}))).await;
    assert_eq!(r.status, 401);
    let pointer = metadata_pointer(&www_authenticate(&r));
    assert_eq!(
        pointer,
        format!(
            "http://127.0.0.1:{}/.well-known/oauth-protected-resource/mcp",
            s.port
        )
    );
    let path = pointer.split_once(&format!(":{}", s.port)).unwrap().1;
    for p in [path, "/.well-known/oauth-protected-resource"] {
        let (status, doc) = get_path(s.port, p).await;
        assert_eq!(status, 200, "{p}");
        // RFC 9728 §2: resource (REQUIRED) is this server's identifier; the rest as served.
        assert_eq!(doc["resource"], audience.as_str(), "{doc}");
        assert_eq!(doc["authorization_servers"], json!([ISSUER]), "{doc}");
        assert_eq!(doc["bearer_methods_supported"], json!(["header"]), "{doc}");
        assert_eq!(doc["scopes_supported"], json!(["kv:write"]), "{doc}");
        for (k, v) in doc.as_object().unwrap() {
            let known = [
                "resource",
                "authorization_servers",
                "bearer_methods_supported",
                "scopes_supported",
                "resource_name",
            ];
            assert!(known.contains(&k.as_str()), "unexpected member {k}: {v}");
        }
    }
    // No token is needed for the document, and it is not the MCP endpoint: no JWKS fetched.
    assert_eq!(jwks.hits(), 0);
}

#[tokio::test]
async fn jwts_with_a_wrong_audience_expiry_signature_issuer_or_key_id_are_401() {
    let k1 = Key::ec("ec-key-1.pem", "k1");
    let rsa = Key::rsa("rsa-key-1.pem", "r1");
    let attacker = Key::ec("ec-key-3.pem", "k1");
    let jwks = JwksServer::start(vec![k1.jwk(), rsa.jwk()]).await;
    let (s, aud) = oauth_server(&jwks, &["--jwks-min-refresh-secs", "0"]).await;
    let list = stateless(json!(1), "tools/list", json!({}));
    // Good tokens (ES256 and RS256) pass, in the stateless era.
    for good in [
        k1.sign(&claims("alice", &aud, "")),
        rsa.sign(&claims("alice", &aud, "")),
    ] {
        let r = post_stateless(&s, Some(&good), &list).await;
        assert_eq!(r.status, 200);
    }
    let mut expired = claims("alice", &aud, "");
    expired["exp"] = json!(now() - 600);
    let mut early = claims("alice", &aud, "");
    early["nbf"] = json!(now() + 600);
    let mut other_issuer = claims("alice", &aud, "");
    other_issuer["iss"] = json!("http://evil.test");
    let mut no_sub = claims("alice", &aud, "");
    no_sub.as_object_mut().unwrap().remove("sub");
    let hs256 = jsonwebtoken::encode(
        &Header::new(Algorithm::HS256),
        &claims("alice", &aud, ""),
        &EncodingKey::from_secret(b"a shared secret the server does not have").unwrap(),
    )
    .unwrap();
    let cases = [
        (
            "wrong audience",
            k1.sign(&claims("alice", "http://127.0.0.1:1/other", "")),
            "audience",
        ),
        ("expired", k1.sign(&expired), "expired"),
        ("not yet valid", k1.sign(&early), "nbf"),
        ("wrong issuer", k1.sign(&other_issuer), "issuer"),
        ("no sub", k1.sign(&no_sub), "sub"),
        (
            "bad signature",
            attacker.sign(&claims("alice", &aud, "")),
            "signature",
        ),
        (
            "unknown key id",
            k1.sign_as("no-such-key", &claims("alice", &aud, "")),
            "unknown signing key",
        ),
        ("HS256", hs256, "algorithm"),
        ("garbage", "abc.def.ghi".to_string(), "malformed"),
    ];
    for (what, token, says) in cases {
        for era in ["2025", "2026"] {
            let r = if era == "2025" {
                post(&s, Some(&token), None, &req(0, "initialize", json!({}))).await
            } else {
                post_stateless(&s, Some(&token), &list).await
            };
            assert_eq!(r.status, 401, "{what} ({era})");
            let c = www_authenticate(&r);
            assert!(c.contains("error=\"invalid_token\""), "{what}: {c}");
            assert!(c.contains(says), "{what}: {c:?} should say {says:?}");
            assert!(c.contains("resource_metadata="), "{what}: {c}");
        }
    }
}

#[tokio::test]
async fn a_jwks_key_rotation_is_picked_up_and_refetches_are_rate_limited() {
    let k1 = Key::ec("ec-key-1.pem", "k1");
    let k2 = Key::ec("ec-key-2.pem", "k2");
    let jwks = JwksServer::start(vec![k1.jwk()]).await;
    let (s, aud) = oauth_server(&jwks, &["--jwks-min-refresh-secs", "0"]).await;
    let list = stateless(json!(1), "tools/list", json!({}));
    let r = post_stateless(&s, Some(&k1.sign(&claims("alice", &aud, ""))), &list).await;
    assert_eq!(r.status, 200);
    assert_eq!(jwks.hits(), 1);
    // The cached key serves the next token without a fetch.
    let r = post_stateless(&s, Some(&k1.sign(&claims("alice", &aud, ""))), &list).await;
    assert_eq!(r.status, 200);
    assert_eq!(jwks.hits(), 1);
    // Rotation: k1 retired, k2 in. A k2 token triggers one refetch and passes.
    jwks.set(vec![k2.jwk()]);
    let r = post_stateless(&s, Some(&k2.sign(&claims("alice", &aud, ""))), &list).await;
    assert_eq!(r.status, 200);
    assert_eq!(jwks.hits(), 2);
    // The retired key no longer works.
    let r = post_stateless(&s, Some(&k1.sign(&claims("alice", &aud, ""))), &list).await;
    assert_eq!(r.status, 401);

    // With the default rate limit (10 s), made-up key ids do not hammer the JWKS server.
    let jwks2 = JwksServer::start(vec![k1.jwk()]).await;
    let (s2, aud2) = oauth_server(&jwks2, &[]).await;
    let r = post_stateless(&s2, Some(&k1.sign(&claims("alice", &aud2, ""))), &list).await;
    assert_eq!(r.status, 200);
    for i in 0..20 {
        let t = k1.sign_as(&format!("made-up-{i}"), &claims("alice", &aud2, ""));
        assert_eq!(post_stateless(&s2, Some(&t), &list).await.status, 401);
    }
    assert_eq!(
        jwks2.hits(),
        1,
        "unknown key ids within the limit cause no fetch"
    );
}

/// The JWKS over https:// (a TLS terminator with the fixture certificate in front of the JWKS
/// server; the server trusts the test CA through SSL_CERT_FILE). A JWKS behind a certificate
/// the server cannot verify is never fetched: tokens are answered 503, not accepted.
#[tokio::test]
async fn the_jwks_is_fetched_over_https_and_an_unverifiable_certificate_is_refused() {
    use common::tls::{Cert, test_ca, tls_front};
    let k1 = Key::ec("ec-key-1.pem", "k1");
    let ca = test_ca();
    let env = [("SSL_CERT_FILE", ca.to_str().unwrap())];
    let list = stateless(json!(1), "tools/list", json!({}));

    let jwks = JwksServer::start(vec![k1.jwk()]).await;
    let front = tls_front(([127, 0, 0, 1], jwks.port).into(), Cert::Trusted).await;
    let url = format!("https://localhost:{}/jwks.json", front.addr.port());
    let (s, aud) = oauth_server_with(&url, &[], &env).await;
    let r = post_stateless(&s, Some(&k1.sign(&claims("alice", &aud, ""))), &list).await;
    assert_eq!(r.status, 200);
    assert_eq!(jwks.hits(), 1, "the keys came over TLS");

    let hidden = JwksServer::start(vec![k1.jwk()]).await;
    let bad_front = tls_front(([127, 0, 0, 1], hidden.port).into(), Cert::Untrusted).await;
    let url = format!("https://localhost:{}/jwks.json", bad_front.addr.port());
    let (s, aud) = oauth_server_with(&url, &[], &env).await;
    let r = post_stateless(&s, Some(&k1.sign(&claims("alice", &aud, ""))), &list).await;
    assert_eq!(r.status, 503, "no keys, no access");
    assert_eq!(hidden.hits(), 0, "the handshake failed before any request");
}

#[tokio::test]
async fn jwt_principals_own_their_work_and_scopes_come_from_the_token() {
    let k1 = Key::ec("ec-key-1.pem", "k1");
    let jwks = JwksServer::start(vec![k1.jwk()]).await;
    let (s, aud) = oauth_server(&jwks, &["--tool-scope", "start_long_scan=scan"]).await;
    let alice = k1.sign(&claims("alice", &aud, "scan other"));
    let bob = k1.sign(&claims("bob", &aud, "scan"));
    let noscope = k1.sign(&claims("carol", &aud, "other"));
    let start = stateless(
        json!(1),
        "tools/call",
        json!({"name": "start_long_scan", "arguments": {"steps": 200, "delay_ms": 50}}),
    );
    let r = post_stateless(&s, Some(&noscope), &start).await;
    assert_eq!(r.status, 403);
    assert!(www_authenticate(&r).contains("scope=\"scan\""));
    let (_, started) = post_stateless(&s, Some(&alice), &start)
        .await
        .answer(T)
        .await;
    let job = started["result"]["structuredContent"]["job_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{started}"))
        .to_string();
    let get = |id: i64| {
        stateless(
            json!(id),
            "tools/call",
            json!({"name": "get_long_scan", "arguments": {"job_id": job}}),
        )
    };
    let (_, by_bob) = post_stateless(&s, Some(&bob), &get(2))
        .await
        .answer(T)
        .await;
    assert!(
        by_bob["result"]["isError"] == true || by_bob.get("error").is_some(),
        "{by_bob}"
    );
    // Alice's session sees the job her stateless request started: same principal.
    let a = initialize(&s, &alice).await;
    let by_alice = rpc(
        &s,
        &alice,
        &a,
        call(json!(3), "get_long_scan", json!({"job_id": job}), None),
    )
    .await;
    assert!(
        by_alice["result"]["structuredContent"]["status"].is_string(),
        "{by_alice}"
    );
    // Bob cannot use Alice's session.
    let r = post(&s, Some(&bob), Some(&a), &req(4, "tools/list", json!({}))).await;
    assert_eq!(r.status, 404);
}

#[tokio::test]
async fn auth_flags_are_checked_at_start() {
    let out = std::process::Command::new(common::BIN)
        .args(["serve", "--auth", "bearer", "--store", ":memory:"])
        .env_remove("STAUNCH_AUTH_TOKENS")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--http"), "{err}");
    let out = std::process::Command::new(common::BIN)
        .args([
            "serve",
            "--http",
            "127.0.0.1:0",
            "--auth",
            "oauth",
            "--store",
            ":memory:",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--issuer") && err.contains("--audience"),
        "{err}"
    );
    let out = std::process::Command::new(common::BIN)
        .args([
            "serve",
            "--http",
            "127.0.0.1:0",
            "--auth",
            "bearer",
            "--store",
            ":memory:",
        ])
        .env("STAUNCH_AUTH_TOKENS", "short alice")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("shorter than 16") && !err.contains("short alice"),
        "{err}"
    );
}

// ---------------------------------------------------------------------------------------------
// A real OAuth client, end to end

/// The TypeScript SDK's own OAuth client (client credentials) against `staunch serve --auth
/// oauth` and a small authorization server (tests-external/oauth_as.mjs): from the first 401 the
/// SDK finds the RFC 9728 metadata, the authorization server's RFC 8414 metadata, gets a token
/// for this resource (RFC 8707) and ends in tool calls; without the tool's scope it meets 403
/// insufficient_scope. Then the v2 SDK client does the same in the 2026-07-28 era. staunch finds
/// the JWKS from the issuer's metadata (no --jwks-url).
#[tokio::test]
async fn typescript_sdk_oauth_client_discovers_the_authorization_server_and_calls_a_tool() {
    use tokio::io::AsyncBufReadExt;
    let Some(node) = common::external::node() else {
        return;
    };
    let root = common::external::root();
    let mut as_proc = tokio::process::Command::new(&node)
        .arg(root.join("tests-external/oauth_as.mjs"))
        .args(["staunch-test-client", "s3cret-s3cret"])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start the authorization server");
    let mut as_lines = tokio::io::BufReader::new(as_proc.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(T, as_lines.next_line())
        .await
        .expect("authorization server starts")
        .unwrap()
        .expect("a first line");
    let as_port = serde_json::from_str::<Value>(&first).unwrap()["listening"]
        .as_u64()
        .expect("its port");
    let issuer = format!("http://127.0.0.1:{as_port}");
    let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = probe.local_addr().unwrap().port();
    drop(probe);
    let addr = format!("127.0.0.1:{port}");
    let audience = format!("http://{addr}/mcp");
    let s = start_at(
        &[
            "--http",
            &addr,
            "--auth",
            "oauth",
            "--issuer",
            &issuer,
            "--audience",
            &audience,
            "--tool-scope",
            SET,
        ],
        &[],
    )
    .await;
    let run = |scope: Option<&'static str>| {
        let (node, url) = (node.clone(), audience.clone());
        let client = root.join("tests-external/ts_oauth_client.mjs");
        tokio::task::spawn_blocking(move || {
            std::process::Command::new(node)
                .arg(client)
                .args([url.as_str(), "staunch-test-client", "s3cret-s3cret"])
                .args(scope)
                .output()
                .expect("run the TS OAuth client")
        })
    };
    // Configured without the scope: authenticated, but set_value is refused with 403
    // insufficient_scope (the SDK's own step-up retry cannot get more than it asks for).
    let out = run(None).await.unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("403"), "{err}");
    let refused: Value = serde_json::from_str(
        &tokio::time::timeout(T, as_lines.next_line())
            .await
            .expect("a token was issued")
            .unwrap()
            .expect("a token line"),
    )
    .unwrap();
    assert_eq!(refused["token"]["scope"], "", "{refused}");
    // Drain the step-up retry's token line(s) before the next run.
    while let Ok(Ok(Some(_))) =
        tokio::time::timeout(Duration::from_millis(300), as_lines.next_line()).await
    {}
    let out = run(Some("kv:write")).await.unwrap();
    assert!(
        out.status.success(),
        "ts_oauth_client failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert!(
        v["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t == "set_value"),
        "{v}"
    );
    assert_eq!(v["set"]["isError"], false, "{v}");
    assert_eq!(v["get"]["isError"], false, "{v}");
    assert!(v["get"].to_string().contains("ok"), "{v}");
    assert_eq!(v["token_type"], "Bearer", "{v}");
    // What the SDK asked the authorization server for: this resource (RFC 8707), the scope.
    let token_line = tokio::time::timeout(T, as_lines.next_line())
        .await
        .expect("a token was issued")
        .unwrap()
        .expect("a token line");
    let issued: Value = serde_json::from_str(&token_line).unwrap();
    assert_eq!(issued["token"]["resource"], audience.as_str(), "{issued}");
    assert_eq!(issued["token"]["scope"], "kv:write", "{issued}");
    assert_eq!(issued["token"]["client"], "staunch-test-client");

    // The v2 SDK client speaks 2026-07-28: every stateless request carries the token.
    if common::external::node_with_ts2().is_some() {
        let (node, url) = (node.clone(), audience.clone());
        let client = root.join("tests-external/v2/ts2_oauth_client.mjs");
        let out = tokio::task::spawn_blocking(move || {
            std::process::Command::new(node)
                .arg(client)
                .args([
                    url.as_str(),
                    "staunch-test-client",
                    "s3cret-s3cret",
                    "kv:write",
                ])
                .output()
                .expect("run the TS v2 OAuth client")
        })
        .await
        .unwrap();
        assert!(
            out.status.success(),
            "ts2_oauth_client failed: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        let v: Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
        assert_eq!(v["protocolVersion"], "2026-07-28", "{v}");
        assert_eq!(v["set"]["isError"], false, "{v}");
        assert_eq!(v["get"]["text"], "ok", "{v}");
        let line = tokio::time::timeout(T, as_lines.next_line())
            .await
            .expect("a token was issued")
            .unwrap()
            .expect("a token line");
        let issued: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(issued["token"]["resource"], audience.as_str(), "{issued}");
    }
    drop(s);
}

#[tokio::test]
async fn a_session_stays_bound_to_its_principal_on_another_instance() {
    // Two instances on one store: the binding is stored with the session, so the instance
    // that adopts it checks it too.
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("shared.db").display().to_string();
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, format!("{ALICE} alice\n{BOB} bob\n")).unwrap();
    let tokens = tokens.display().to_string();
    let args = ["--auth", "bearer", "--auth-tokens", tokens.as_str()];
    let one = HttpServer::start_on(Some(&store), &args).await;
    let two = HttpServer::start_on(Some(&store), &args).await;
    let a = initialize(&one, ALICE).await;
    let r = post(&two, Some(BOB), Some(&a), &req(1, "tools/list", json!({}))).await;
    assert_eq!(r.status, 404, "bob cannot adopt alice's session");
    let listed = rpc(&two, ALICE, &a, req(2, "tools/list", json!({}))).await;
    assert!(listed["result"]["tools"].is_array(), "{listed}");
    let r = post(&two, Some(BOB), Some(&a), &req(3, "tools/list", json!({}))).await;
    assert_eq!(r.status, 404, "nor use it once adopted");
}

#[tokio::test]
async fn a_second_principal_cannot_join_the_first_ones_work_or_learn_its_id() {
    // In-flight dedupe is on by default; idempotency keys are scoped to the principal.
    let s = bearer_server(&[]).await;
    let a = initialize(&s, ALICE).await;
    let b = initialize(&s, BOB).await;
    let start = |id: i64, args: Value| call(json!(id), "start_import_rows", args, None);
    let job_of = |v: &Value| {
        v["result"]["structuredContent"]["job_id"]
            .as_str()
            .unwrap_or_else(|| panic!("{v}"))
            .to_string()
    };
    let same = json!({"rows": 100, "delay_ms": 100});
    let alices = job_of(&rpc(&s, ALICE, &a, start(1, same.clone())).await);
    // Alice calling again joins her own job (dedupe works) ...
    assert_eq!(
        job_of(&rpc(&s, ALICE, &a, start(2, same.clone())).await),
        alices
    );
    // ... Bob with the same arguments gets a job of his own.
    let bobs = rpc(&s, BOB, &b, start(3, same)).await;
    assert_ne!(job_of(&bobs), alices, "{bobs}");
    assert!(!bobs.to_string().contains(&alices));
    // The same idempotency key: each principal has its own, and a reuse with other
    // arguments never names the other principal's job.
    let keyed = |id: i64, rows: u32| {
        start(
            id,
            json!({"rows": rows, "delay_ms": 100, "idempotency_key": "order-17"}),
        )
    };
    let alice_keyed = job_of(&rpc(&s, ALICE, &a, keyed(4, 50)).await);
    let bob_keyed = rpc(&s, BOB, &b, keyed(5, 60)).await;
    assert_ne!(job_of(&bob_keyed), alice_keyed, "{bob_keyed}");
    assert!(!bob_keyed.to_string().contains(&alice_keyed), "{bob_keyed}");
    let reuse = rpc(&s, BOB, &b, keyed(6, 70)).await;
    let text = reuse.to_string();
    assert!(text.contains("idempotency_key_reused"), "{reuse}");
    assert!(
        !text.contains(&alice_keyed) && !text.contains(&alices),
        "{reuse}"
    );
}
