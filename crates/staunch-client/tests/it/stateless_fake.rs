//! The 2026-07-28 era against a scripted server on in-memory pipes (stdio framing): discover
//! first and fall back to `initialize`, `_meta` on every request, input-required rounds, the
//! unknown `resultType`, and `notifications/cancelled` as the stdio cancel.

use crate::fake;

use std::time::Duration;

use fake::{Fake, text};
use serde_json::{Value, json};
use staunch_client::era::Era;
use staunch_client::{CallOptions, Client, ClientError, ConnectOptions, EraChoice};

const PV: &str = "io.modelcontextprotocol/protocolVersion";
const CAPS: &str = "io.modelcontextprotocol/clientCapabilities";
const INFO: &str = "io.modelcontextprotocol/clientInfo";

fn discover_result() -> Value {
    json!({"resultType": "complete", "supportedVersions": ["2026-07-28"],
           "capabilities": {"tools": {}},
           "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "fake26", "version": "2"}}})
}

/// A client and a fake whose first message (`server/discover`) is handed to `answer`.
async fn connect(
    era: EraChoice,
    answer: impl AsyncFnOnce(&mut Fake, Value),
) -> (Result<Client, ClientError>, Fake) {
    let (client_side, server_side) = tokio::io::duplex(1 << 20);
    let (cr, cw) = tokio::io::split(client_side);
    let mut fake = Fake::from_io(server_side);
    let opts = ConnectOptions {
        era,
        capabilities: json!({"elicitation": {}}),
        discover_timeout: Duration::from_secs(5),
        ..ConnectOptions::default()
    };
    let (client, ()) = tokio::join!(Client::connect_io(cr, cw, &opts), async {
        let first = fake.recv().await;
        answer(&mut fake, first).await;
    });
    (client, fake)
}

fn assert_stateless_meta(msg: &Value) {
    let meta = &msg["params"]["_meta"];
    assert_eq!(meta[PV], "2026-07-28", "{msg}");
    assert_eq!(meta[CAPS], json!({"elicitation": {}}), "{msg}");
    assert_eq!(meta[INFO]["name"], "staunch", "{msg}");
}

#[tokio::test(start_paused = true)]
async fn discover_makes_a_stateless_client_whose_requests_carry_meta() {
    let (client, mut server) = connect(EraChoice::Auto, async |f: &mut Fake, m: Value| {
        assert_eq!(m["method"], "server/discover");
        assert_stateless_meta(&m);
        f.respond(&m["id"], discover_result()).await;
    })
    .await;
    let client = client.unwrap();
    assert_eq!(client.era(), Era::Stateless);
    let info = client.server();
    assert_eq!(info.protocol_version, "2026-07-28");
    assert_eq!(info.name, "fake26");
    assert_eq!(info.supported_versions, vec!["2026-07-28".to_string()]);
    assert!(info.fallback.is_none());

    let c = client.clone();
    let call = tokio::spawn(async move {
        c.call_tool(
            "echo",
            json!({"text": "hi"}),
            &CallOptions::default(),
            |_| {},
        )
        .await
    });
    let req = server.recv().await;
    assert_eq!(req["method"], "tools/call");
    assert_stateless_meta(&req);
    assert!(req["params"]["_meta"]["progressToken"].is_number());
    let mut r = text("hi");
    r["resultType"] = json!("complete");
    server.respond(&req["id"], r).await;
    assert_eq!(call.await.unwrap().unwrap()["content"][0]["text"], "hi");
    // No `notifications/initialized`, nothing else was sent.
    assert!(server.recv_within(Duration::from_secs(1)).await.is_none());
}

#[tokio::test(start_paused = true)]
async fn a_session_era_server_gets_initialize_after_refusing_discover() {
    let (client, mut server) = connect(EraChoice::Auto, async |f: &mut Fake, m: Value| {
        assert_eq!(m["method"], "server/discover");
        f.send(json!({"jsonrpc": "2.0", "id": m["id"],
                      "error": {"code": -32601, "message": "Method not found"}}))
            .await;
        f.handshake(json!({"tools": {}})).await;
    })
    .await;
    let client = client.unwrap();
    assert_eq!(client.era(), Era::Session);
    let info = client.server();
    assert_eq!(info.protocol_version, "2025-11-25");
    assert!(info.fallback.as_deref().unwrap().contains("-32601"));
    // Session requests carry no stateless _meta.
    let c = client.clone();
    let call = tokio::spawn(async move {
        c.call_tool("echo", json!({}), &CallOptions::default(), |_| {})
            .await
    });
    let req = server.recv().await;
    assert!(req["params"]["_meta"].get(PV).is_none(), "{req}");
    server.respond(&req["id"], text("ok")).await;
    call.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_silent_server_is_given_initialize_after_the_discover_timeout() {
    let (client, _server) = connect(EraChoice::Auto, async |f: &mut Fake, m: Value| {
        assert_eq!(m["method"], "server/discover");
        // Say nothing; the client moves on after 5 s (virtual) without cancelling discover.
        f.handshake(json!({})).await;
    })
    .await;
    let client = client.unwrap();
    assert_eq!(client.era(), Era::Session);
    assert!(
        client
            .server()
            .fallback
            .as_deref()
            .unwrap()
            .contains("timeout")
    );
}

#[tokio::test(start_paused = true)]
async fn forcing_2026_fails_against_a_session_era_server() {
    let (client, _server) = connect(EraChoice::Stateless, async |f: &mut Fake, m: Value| {
        f.send(json!({"jsonrpc": "2.0", "id": m["id"],
                      "error": {"code": -32601, "message": "Method not found"}}))
            .await;
    })
    .await;
    let err = client.unwrap_err();
    assert!(
        err.to_string().contains("does not speak 2026-07-28"),
        "{err}"
    );
}

async fn stateless_pair() -> (Client, Fake) {
    let (client, server) = connect(EraChoice::Stateless, async |f: &mut Fake, m: Value| {
        f.respond(&m["id"], discover_result()).await;
    })
    .await;
    (client.unwrap(), server)
}

#[tokio::test(start_paused = true)]
async fn input_required_rounds_are_answered_and_retried_with_the_state() {
    let (client, mut server) = stateless_pair().await;
    let c = client.clone();
    let call = tokio::spawn(async move {
        let mut asked = Vec::new();
        let r = c
            .call_tool_with_input(
                "greet",
                json!({"lang": "en"}),
                &CallOptions::default().progress(false),
                |_| {},
                |reqs| {
                    asked.push(reqs.clone());
                    async move {
                        let mut out = serde_json::Map::new();
                        for k in reqs.keys() {
                            out.insert(
                                k.clone(),
                                json!({"action": "accept", "content": {"name": "Ada"}}),
                            );
                        }
                        Ok(out)
                    }
                },
            )
            .await;
        (r, asked)
    });
    let first = server.recv().await;
    assert!(first["params"].get("inputResponses").is_none());
    server
        .respond(
            &first["id"],
            json!({"resultType": "input_required", "requestState": "sealed-1",
                   "inputRequests": {"user_name": {"method": "elicitation/create",
                                                   "params": {"message": "Name?"}}}}),
        )
        .await;
    let second = server.recv().await;
    assert_ne!(second["id"], first["id"], "a retry is a new request");
    assert_eq!(second["params"]["name"], "greet");
    assert_eq!(second["params"]["arguments"], json!({"lang": "en"}));
    assert_eq!(second["params"]["requestState"], "sealed-1");
    assert_eq!(
        second["params"]["inputResponses"]["user_name"]["content"]["name"],
        "Ada"
    );
    assert_stateless_meta(&second);
    let mut done = text("Hello, Ada");
    done["resultType"] = json!("complete");
    server.respond(&second["id"], done).await;
    let (r, asked) = call.await.unwrap();
    assert_eq!(r.unwrap()["content"][0]["text"], "Hello, Ada");
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0]["user_name"]["method"], "elicitation/create");
}

#[tokio::test(start_paused = true)]
async fn unanswered_input_and_unknown_result_types_are_errors() {
    let (client, mut server) = stateless_pair().await;
    let c = client.clone();
    let call = tokio::spawn(async move {
        c.call_tool("greet", json!({}), &CallOptions::default(), |_| {})
            .await
    });
    let req = server.recv().await;
    server
        .respond(
            &req["id"],
            json!({"resultType": "input_required",
                   "inputRequests": {"k": {"method": "sampling/createMessage", "params": {}}}}),
        )
        .await;
    let err = call.await.unwrap().unwrap_err();
    assert!(matches!(&err, ClientError::InputRequired(v) if v["inputRequests"]["k"].is_object()));
    assert!(
        err.to_string().contains("k (sampling/createMessage)"),
        "{err}"
    );

    let c = client.clone();
    let call = tokio::spawn(async move {
        c.request("tools/list", None, &CallOptions::default().progress(false))
            .await
    });
    let req = server.recv().await;
    assert_stateless_meta(&req);
    server
        .respond(&req["id"], json!({"resultType": "eventually", "tools": []}))
        .await;
    let err = call.await.unwrap().unwrap_err();
    assert!(
        matches!(&err, ClientError::UnknownResultType(s) if s == "eventually"),
        "{err:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn over_stdio_the_stateless_cancel_is_still_a_notification() {
    let (client, mut server) = stateless_pair().await;
    let c = client.clone();
    let call = tokio::spawn(async move {
        c.call_tool(
            "slow",
            json!({}),
            &CallOptions::default()
                .timeout(Duration::from_secs(2))
                .reset_on_progress(false),
            |_| {},
        )
        .await
    });
    let req = server.recv().await;
    let cancel = server.recv().await;
    assert_eq!(cancel["method"], "notifications/cancelled");
    assert_eq!(cancel["params"]["requestId"], req["id"]);
    assert!(matches!(
        call.await.unwrap(),
        Err(ClientError::Timeout { .. })
    ));
}
