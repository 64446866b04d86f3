//! The binary's stdio wiring: the end of stdin ends the session's work and the process (the
//! session's lifecycle itself is tested in staunch-server, in-process); files, pipes and
//! sockets alike are served, and pipes and sockets are left blocking as they were found.

use crate::common;

use std::os::fd::{AsFd as _, OwnedFd};
use std::time::Duration;

use common::{Proc, events_of, has_event};
use serde_json::{Value, json};

#[tokio::test]
async fn eof_cancels_in_flight_work_and_the_process_exits() {
    let mut p = Proc::ready(&[]).await;
    let id = json!("long");
    p.call(
        id.clone(),
        "slow_count",
        json!({"steps": 100000, "delay_ms": 10}),
        None,
    )
    .await;
    p.log_until(|l| has_event(l, &id, "request.start")).await;
    p.close_stdin();
    let status = tokio::time::timeout(Duration::from_secs(15), p.child.wait())
        .await
        .expect("process exits after EOF")
        .unwrap();
    assert!(status.success(), "{status}");
    let lines = p.log_lines();
    let ev = events_of(&lines, &id);
    let cancel = ev
        .iter()
        .find(|l| l["event"] == "request.cancel_received")
        .expect("cancel logged");
    assert_eq!(cancel["reason"], "transport closed");
    assert_eq!(ev.last().unwrap()["outcome"], "cancelled");
}

/// Three messages written to a server's stdin at once: `initialize`, the notification that
/// follows it, and `ping`.
fn initialize_then_ping() -> String {
    [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "stdio-wiring", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}),
    ]
    .iter()
    .map(|m| format!("{m}\n"))
    .collect()
}

/// The ids of the responses in newline-delimited `out`.
fn answered_ids(out: &str) -> Vec<Value> {
    out.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|m| m.get("result").is_some())
        .map(|m| m["id"].clone())
        .collect()
}

/// stdin and stdout that are files (not pipes) are read and written by threads of their own.
#[test]
fn files_for_stdin_and_stdout_are_served() {
    let dir = tempfile::tempdir().unwrap();
    let (input, output) = (dir.path().join("in.jsonl"), dir.path().join("out.jsonl"));
    std::fs::write(&input, initialize_then_ping()).unwrap();
    let status = std::process::Command::new(common::BIN)
        .args(["serve", "--no-log", "--store", ":memory:"])
        .stdin(std::fs::File::open(&input).unwrap())
        .stdout(std::fs::File::create(&output).unwrap())
        .status()
        .unwrap();
    assert!(status.success(), "{status}");
    let out = std::fs::read_to_string(&output).unwrap();
    assert_eq!(answered_ids(&out), [json!(1), json!(2)], "{out}");
}

/// Pipes (as Python's and Rust's subprocesses make them) and socket pairs (as Node's does) are
/// read and written by the runtime in non-blocking mode; the mode belongs to the pipe or
/// socket end, which its giver may share, so the server leaves both ends blocking as it found
/// them.
#[test]
fn pipes_for_stdin_and_stdout_are_blocking_again_after_the_server_exits() {
    let (stdin_read, stdin_write) = std::io::pipe().unwrap();
    let (stdout_read, stdout_write) = std::io::pipe().unwrap();
    served_and_left_blocking(
        (stdin_read.into(), stdin_write.into()),
        (stdout_read.into(), stdout_write.into()),
    );
}

#[test]
fn sockets_for_stdin_and_stdout_are_blocking_again_after_the_server_exits() {
    let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
    let stdin = (theirs.into(), ours.into());
    let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
    served_and_left_blocking(stdin, (ours.into(), theirs.into()));
}

/// Serves two requests on `stdin` (the server's end, the test's end) and `stdout` (the test's
/// end, the server's end), then checks that the server's ends are blocking again.
fn served_and_left_blocking(stdin: (OwnedFd, OwnedFd), stdout: (OwnedFd, OwnedFd)) {
    use rustix::fs::{OFlags, fcntl_getfl};
    use std::io::{Read as _, Write as _};
    let ((server_in, test_in), (test_out, server_out)) = (stdin, stdout);
    // The test keeps a handle on each end the server gets: the same open end, whose flags it
    // reads after the server has gone.
    let kept = [
        server_in.try_clone().unwrap(),
        server_out.try_clone().unwrap(),
    ];
    let mut child = std::process::Command::new(common::BIN)
        .args(["serve", "--no-log", "--store", ":memory:"])
        .stdin(server_in)
        .stdout(server_out)
        .spawn()
        .unwrap();
    let mut input = std::fs::File::from(test_in);
    input.write_all(initialize_then_ping().as_bytes()).unwrap();
    drop(input); // EOF: the server answers what it read, and exits.
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
    for (end, fd) in ["stdin", "stdout"].into_iter().zip(&kept) {
        let flags = fcntl_getfl(fd.as_fd()).unwrap();
        assert!(
            !flags.contains(OFlags::NONBLOCK),
            "{end} left non-blocking: {flags:?}"
        );
    }
    drop(kept);
    let mut out = String::new();
    std::fs::File::from(test_out)
        .read_to_string(&mut out)
        .unwrap();
    assert_eq!(answered_ids(&out), [json!(1), json!(2)], "{out}");
}
