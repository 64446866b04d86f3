//! The supervisor on its own, with real processes: a run whose future is dropped (its call was
//! abandoned) still ends the whole process group — SIGTERM, then SIGKILL after the grace — and
//! output limits hold.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use staunch_command::config::{OutputLimits, Overflow};
use staunch_command::spawn::Spawn;
use staunch_command::supervise::{self, EndedBy};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// A leader and a grandchild, both ignoring SIGTERM, writing their pids into the directory.
const STUBBORN_TREE: &str = r#"#!/bin/sh
trap '' TERM
sh -c 'trap "" TERM; echo $$ > "$1/grandchild.pid"; while :; do sleep 0.05; done' g "$1" &
echo $$ > "$1/leader.pid"
while :; do sleep 0.05; done
"#;

fn script(dir: &Path, body: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join("run.sh");
    std::fs::write(&p, body).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

fn limits(max_stdout: u64, overflow: Overflow) -> OutputLimits {
    OutputLimits {
        max_stdout,
        overflow,
        stderr_tail: 1024,
        max_result: 1024,
    }
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        let state = s[s.rfind(')').unwrap() + 1..]
            .split_whitespace()
            .next()
            .unwrap_or("X")
            .to_string();
        state != "Z" && state != "X"
    })
}

async fn pid_in(path: &Path) -> u32 {
    let end = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(pid) = std::fs::read_to_string(path)
            .ok()
            .and_then(|s| s.trim().parse().ok())
        {
            return pid;
        }
        assert!(Instant::now() < end, "{} never appeared", path.display());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_run_still_ends_its_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let spec = Spawn {
        program: script(dir.path(), STUBBORN_TREE),
        args: vec![dir.path().as_os_str().to_owned()],
        cwd: dir.path().to_path_buf(),
        env: vec![("PATH".into(), std::env::var_os("PATH").unwrap())],
    };
    let run = supervise::run(
        &spec,
        limits(1024, Overflow::Truncate),
        Duration::from_millis(300),
        CancellationToken::new(),
        Arc::new(|_, _| {}),
        None,
    );
    let leader_file = dir.path().join("leader.pid");
    let child_file = dir.path().join("grandchild.pid");
    // Run it until both processes exist, then drop the future (the call was abandoned).
    tokio::select! {
        _ = run => panic!("the stubborn tree ended by itself"),
        _ = async {
            pid_in(&leader_file).await;
            pid_in(&child_file).await;
        } => {}
    }
    let (leader, grandchild) = (pid_in(&leader_file).await, pid_in(&child_file).await);
    let end = Instant::now() + Duration::from_secs(20);
    while alive(leader) || alive(grandchild) {
        assert!(Instant::now() < end, "the abandoned group was never ended");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn fail_on_overflow_stops_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let spec = Spawn {
        program: "/bin/sh".into(),
        args: vec![
            "-c".into(),
            "while :; do echo xxxxxxxxxxxxxxxx; done".into(),
        ],
        cwd: dir.path().to_path_buf(),
        env: vec![("PATH".into(), std::env::var_os("PATH").unwrap())],
    };
    let f = supervise::run(
        &spec,
        limits(4096, Overflow::Fail),
        Duration::from_millis(300),
        CancellationToken::new(),
        Arc::new(|_, _| {}),
        None,
    )
    .await
    .unwrap();
    assert!(matches!(f.ended_by, EndedBy::OutputLimit { .. }), "{f:?}");
    assert_eq!(f.stdout.bytes.len(), 4096);
    assert!(f.stdout.truncated);
    assert!(!alive(f.pid));
}
