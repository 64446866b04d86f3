//! A scripted MCP server on in-memory pipes: the test reads what the client sent and decides
//! what to answer, line by line. With tokio's paused clock, timeouts are exact and instant.

#![allow(dead_code)]

use serde_json::{Value, json};
use staunch_client::{Client, ConnectOptions};
use tokio::io::{
    AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines, ReadHalf, WriteHalf,
};

pub struct Fake {
    lines: Lines<BufReader<ReadHalf<DuplexStream>>>,
    out: WriteHalf<DuplexStream>,
}

impl Fake {
    /// A fake on the server end of an in-memory pipe.
    pub fn from_io(server_side: DuplexStream) -> Self {
        let (sr, sw) = tokio::io::split(server_side);
        Self {
            lines: BufReader::new(sr).lines(),
            out: sw,
        }
    }

    /// The next message the client sent.
    pub async fn recv(&mut self) -> Value {
        // Virtual time: if the client will never write again, the clock jumps here and the
        // test fails instead of hanging.
        let line =
            tokio::time::timeout(std::time::Duration::from_secs(3600), self.lines.next_line())
                .await
                .expect("the client sent nothing more")
                .expect("read")
                .expect("client closed");
        serde_json::from_str(&line).expect("client wrote JSON")
    }

    /// Like `recv`, but `None` when the client wrote nothing within `d` (virtual time).
    pub async fn recv_within(&mut self, d: std::time::Duration) -> Option<Value> {
        tokio::time::timeout(d, self.recv()).await.ok()
    }

    pub async fn send(&mut self, v: Value) {
        let mut b = serde_json::to_vec(&v).unwrap();
        b.push(b'\n');
        self.out.write_all(&b).await.unwrap();
        self.out.flush().await.unwrap();
    }

    pub async fn respond(&mut self, id: &Value, result: Value) {
        self.send(json!({"jsonrpc":"2.0","id":id,"result":result}))
            .await;
    }

    pub async fn progress(&mut self, token: &Value, progress: f64) {
        self.send(json!({"jsonrpc":"2.0","method":"notifications/progress",
            "params":{"progressToken":token,"progress":progress}}))
            .await;
    }

    /// Answers `initialize` and swallows `notifications/initialized`.
    pub async fn handshake(&mut self, capabilities: Value) {
        let init = self.recv().await;
        assert_eq!(init["method"], "initialize");
        self.respond(
            &init["id"],
            json!({"protocolVersion":"2025-11-25","capabilities":capabilities,
                   "serverInfo":{"name":"fake","version":"0"}}),
        )
        .await;
        let n = self.recv().await;
        assert_eq!(n["method"], "notifications/initialized");
    }
}

pub fn text(t: &str) -> Value {
    json!({"content":[{"type":"text","text":t}]})
}

pub fn structured(v: Value) -> Value {
    json!({"content":[{"type":"text","text":v.to_string()}],"structuredContent":v})
}

/// A client connected to a fake server that has completed the handshake.
pub async fn pair_with(capabilities: Value) -> (Client, Fake) {
    let (client_side, server_side) = tokio::io::duplex(1 << 20);
    let (cr, cw) = tokio::io::split(client_side);
    let (sr, sw) = tokio::io::split(server_side);
    let mut fake = Fake {
        lines: BufReader::new(sr).lines(),
        out: sw,
    };
    // The fakes speak the session era: they expect `initialize` first.
    let opts = ConnectOptions {
        era: staunch_client::EraChoice::Session,
        ..ConnectOptions::default()
    };
    let (client, ()) = tokio::join!(
        Client::connect_io(cr, cw, &opts),
        fake.handshake(capabilities)
    );
    (client.expect("connect"), fake)
}

pub async fn pair() -> (Client, Fake) {
    pair_with(json!({"tools":{}})).await
}
