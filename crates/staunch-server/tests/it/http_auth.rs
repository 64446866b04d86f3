//! Authentication on the HTTP transport: static bearer tokens, and OAuth JWTs whose keys a
//! tiny JWKS server of the test's own serves (fixed test keys, `staunch_testkit::auth`).
//!
//! What a client sees: 401 with the RFC 9728 metadata pointer when it sends no token, 401
//! `invalid_token` for a wrong audience, an expired token, a bad signature or an unknown key id,
//! 403 `insufficient_scope` for a tool it lacks the scope of (both eras); what one principal
//! cannot do to another's session, jobs and tasks, on one instance and across two sharing a
//! store; and a key rotation picked up. The flags that configure it, a JWKS over https and a
//! real OAuth client are the binary's tests (`crates/staunch/tests/it/http_auth.rs`).

use std::time::Duration;

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};
use staunch_server::transport::http::{AuthMethod, JwksSource, OAuthConfig};
use staunch_testkit::TestServer;
use staunch_testkit::auth::{
    ISSUER, JwksServer, Key, auth_header, claims, get_path, initialize, metadata_pointer, now,
    post, post_stateless, req, rpc, www_authenticate,
};
use staunch_testkit::http::{call, stateless};

const T: Duration = Duration::from_secs(15);
const ALICE: &str = "alice-token-0123456789";
const BOB: &str = "bob-token-0123456789ab";
const WRITER: &str = "writer-token-0123456789";
/// `set_value` needs the scope `kv:write` (a `--tool-scope` entry).
const SET: &str = "set_value=kv:write";

/// Adds `TOOL=SCOPE[ SCOPE…]` entries to the transport's scopes per tool.
fn with_scopes(setup: staunch_testkit::Setup, entries: &[&str]) -> staunch_testkit::Setup {
    let entries: Vec<(String, Vec<String>)> = entries
        .iter()
        .map(|e| {
            let (tool, scopes) = e.split_once('=').expect("TOOL=SCOPES");
            (
                tool.into(),
                scopes.split_whitespace().map(String::from).collect(),
            )
        })
        .collect();
    setup.http(move |c| {
        let auth = c.auth.as_mut().expect("auth is on");
        for (tool, scopes) in entries {
            auth.tool_scopes.entry(tool).or_default().extend(scopes);
        }
    })
}

/// Bearer tokens for alice, bob and writer (who has `kv:write`), fast job loops, and `scopes`.
async fn bearer_server(scopes: &[&str]) -> TestServer {
    let tokens = format!("# test tokens\n{ALICE} alice\n{BOB} bob\n{WRITER} writer kv:write\n");
    let setup = TestServer::setup().bearer(&tokens).fast_jobs();
    with_scopes(setup, scopes).start().await
}

/// OAuth with the keys of `jwks`, the server's own URL as the audience, fast job loops and
/// `scopes`; with `refetch_at_once`, no least time between two JWKS fetches. Also the audience.
async fn oauth_server(
    jwks: &JwksServer,
    scopes: &[&str],
    refetch_at_once: bool,
) -> (TestServer, String) {
    // The audience must be known before the server starts: take a free port first.
    let port = staunch_testkit::peers::free_port().await;
    let audience = format!("http://127.0.0.1:{port}/mcp");
    let mut oauth = OAuthConfig::new(ISSUER, &audience, JwksSource::parse(&jwks.url()).unwrap());
    if refetch_at_once {
        oauth.jwks_min_refresh = Duration::ZERO;
    }
    let setup = TestServer::setup()
        .port(port)
        .fast_jobs()
        .http(move |c| {
            c.auth = Some(staunch_server::transport::http::AuthConfig::new(
                AuthMethod::OAuth(oauth),
            ));
        })
        .jobs_of_principals();
    (with_scopes(setup, scopes).start().await, audience)
}

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
    let s = TestServer::start().await;
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
    let s = bearer_server(&[SET]).await;
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
    let (s, audience) = oauth_server(&jwks, &[SET], false).await;
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
    let (s, aud) = oauth_server(&jwks, &[], true).await;
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
    let (s, aud) = oauth_server(&jwks, &[], true).await;
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
    let (s2, aud2) = oauth_server(&jwks2, &[], false).await;
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
async fn jwt_principals_own_their_work_and_scopes_come_from_the_token() {
    let k1 = Key::ec("ec-key-1.pem", "k1");
    let jwks = JwksServer::start(vec![k1.jwk()]).await;
    let (s, aud) = oauth_server(&jwks, &["start_long_scan=scan"], false).await;
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
async fn a_session_stays_bound_to_its_principal_on_another_instance() {
    // Two instances on one store: the binding is stored with the session, so the instance
    // that adopts it checks it too.
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("shared.db").display().to_string();
    let tokens = format!("{ALICE} alice\n{BOB} bob\n");
    let instance = || TestServer::setup().store(&store).bearer(&tokens).start();
    let one = instance().await;
    let two = instance().await;
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
