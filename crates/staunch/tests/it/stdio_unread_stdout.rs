//! Issue 14: a stdio client that stops reading stdout. The stdout queue used to be unbounded,
//! so a client that kept writing requests and read nothing made the server hold every answer
//! in memory. Now the server stops reading stdin once `--stdout-queue-max` bytes are queued
//! (and says so on stderr): the client's own stdin writes block. Answers of requests already
//! admitted are never dropped — once the client reads, every request is answered once.
//! Through the real binary and real pipes.

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_staunch");

/// Kills the server if the test fails half-way.
struct Kill(std::process::Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_stdio_client_that_stops_reading_stdout_stops_being_read() {
    let child = Command::new(BIN)
        .args(["serve", "--store", ":memory:", "--no-log"])
        .args(["--stdout-queue-max", "65536"])
        // Once the client reads again, the server reads its backlog faster than a loaded
        // machine runs the handlers; the in-flight limit (its own test) would then answer
        // some calls "server busy". Set above the calls sent, so only the queue is tested.
        .args(["--max-in-flight", "4096"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn staunch");
    let mut child = Kill(child);
    let mut stdin = child.0.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.0.stdout.take().unwrap());
    let stderr = child.0.stderr.take().unwrap();
    let (log_tx, log_rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if log_tx.send(line).is_err() {
                break;
            }
        }
    });

    let mut line = String::new();
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "unread", "version": "0"}}})
    )
    .unwrap();
    stdout.read_line(&mut line).unwrap();
    let init: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(init["id"], 0, "{init}");
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
    )
    .unwrap();

    // 2000 calls of 4 KiB each way: 8 MiB of answers, far past the 64 KiB the server may owe
    // plus what the pipes and its read buffers hold (well under 1000 calls' worth).
    let total = 2000usize;
    let text = "y".repeat(4096);
    let written = Arc::new(AtomicUsize::new(0));
    let writer = {
        let written = written.clone();
        let text = text.clone();
        std::thread::spawn(move || {
            for id in 1..=total {
                let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                    "params": {"name": "echo", "arguments": {"text": text}}});
                if writeln!(stdin, "{call}").is_err() {
                    return None;
                }
                written.store(id, Ordering::SeqCst);
            }
            stdin.flush().ok()?;
            Some(stdin)
        })
    };

    // Nothing reads stdout: the server must say it stopped reading stdin.
    let deadline = Instant::now() + Duration::from_secs(60);
    let waiting = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match log_rx.recv_timeout(left) {
            Ok(l) if l.contains("not reading stdin") => break l,
            Ok(_) => {}
            Err(_) => panic!(
                "the server never stopped reading stdin ({} of {total} calls written)",
                written.load(Ordering::SeqCst)
            ),
        }
    };
    let log: Value = serde_json::from_str(&waiting).expect("a JSON log line");
    assert_eq!(log["level"], "WARN", "{log}");
    assert_eq!(log["fields"]["cap"], 65536, "{log}");
    // The client is held back: its writes block long before it wrote everything.
    let held = written.load(Ordering::SeqCst);
    assert!(
        held < total / 2,
        "{held} of {total} calls went in while stdout was not read"
    );
    assert!(
        !writer.is_finished(),
        "the client's stdin writes must block"
    );

    // Now the client reads: every call is answered exactly once, nothing was dropped.
    let mut answered = HashSet::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    while answered.len() < total {
        assert!(
            Instant::now() < deadline,
            "{} of {total} answered",
            answered.len()
        );
        line.clear();
        let n = stdout.read_line(&mut line).unwrap();
        assert!(n > 0, "stdout closed after {} answers", answered.len());
        let msg: Value = serde_json::from_str(&line).unwrap();
        let id = msg["id"].as_u64().expect("only answers") as usize;
        assert_eq!(
            msg["result"]["content"][0]["text"],
            text.as_str(),
            "call {id}: {}",
            serde_json::to_string(&msg["error"]).unwrap_or_default()
        );
        assert!(answered.insert(id), "call {id} answered twice");
    }
    let stdin = writer.join().unwrap().expect("every call written");
    drop(stdin);
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.0.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "no exit after stdin EOF");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status}");
}
