//! Command tools (`staunch serve --config staunch.toml`) through the real binary over stdio,
//! with real processes: arguments arrive as literal argv, a cancel ends the whole process tree
//! (a grandchild that ignores SIGTERM included), a SIGTERM-ignoring command is SIGKILLed,
//! output limits keep staunch's memory bounded, a crash is a failed job with its stderr tail,
//! a SIGKILLed staunch leaves nothing running and its job ends `failed(lease_lost)`, 50
//! concurrent starts with one idempotency key run the command once, and the lifecycle log and
//! `staunch audit` cover command tools, and (over HTTP) a result file cannot leave its
//! directory.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{BIN, Proc, alive, events_of};
use serde_json::{Value, json};
use tokio::time::Instant;

const FIX: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/command");
const LIMIT: Duration = Duration::from_secs(30);

/// The tools every test serves (job tools need a store: the tests that use them give one).
const TOOLS: &str = r#"
[[tool]]
name = "echo_args"
description = "Prints its arguments as a JSON array."
program = "{FIX}/argv.py"
args = ["--", "{value}", "{items}"]
params.value.type = "string"
params.items = { type = "array", required = false }

[[tool]]
name = "tree"
description = "A process tree whose grandchild ignores SIGTERM."
shape = "streaming"
program = "{FIX}/tree.sh"
args = ["{dir}", "{mode}"]
grace = "1s"
params.dir.type = "string"
params.mode = { type = "string", default = "normal" }

[[tool]]
name = "stubborn"
description = "Ignores SIGTERM, and so does its grandchild."
program = "{FIX}/tree.sh"
args = ["{dir}", "stubborn"]
deadline = "1500ms"
grace = "300ms"
params.dir.type = "string"

[[tool]]
name = "flood"
description = "Prints `bytes` zero bytes."
shape = "streaming"
program = "head"
args = ["-c", "{bytes}", "/dev/zero"]
max_stdout = "64KiB"
params.bytes.type = "integer"

[[tool]]
name = "silent"
description = "Prints nothing for a while."
program = "{FIX}/silent.sh"
args = ["{secs}"]
elapsed_progress = "200ms"
params.secs.type = "number"

[[tool]]
name = "steps"
description = "Reports progress per step."
shape = "streaming"
program = "{FIX}/steps.sh"
args = ["{steps}", "{delay_ms}"]
params.steps.type = "integer"
params.delay_ms = { type = "integer", default = 20 }
"#;

const JOB_TOOLS: &str = r#"
[[tool]]
name = "crash"
description = "Fails with exit status 7."
shape = "job"
program = "{FIX}/crash.sh"

[[tool]]
name = "append"
description = "Appends a line to a file."
shape = "job"
program = "{FIX}/append.sh"
args = ["{file}"]
result = "json"
params.file.type = "string"

[[tool]]
name = "tree_job"
description = "A process tree as a durable job."
shape = "job"
program = "{FIX}/tree.sh"
args = ["{dir}"]
params.dir.type = "string"
"#;

struct Setup {
    dir: tempfile::TempDir,
    config: PathBuf,
}

impl Setup {
    fn new(with_jobs: bool) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("staunch.toml");
        let mut body = TOOLS.to_string();
        if with_jobs {
            body.push_str(JOB_TOOLS);
        }
        std::fs::write(&config, body.replace("{FIX}", FIX)).unwrap();
        Self { dir, config }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Flags for `serve`: the config, a store in the temp dir, quick job loops.
    fn flags(&self, extra: &[&str]) -> Vec<String> {
        let mut v: Vec<String> = [
            "--config",
            self.config.to_str().unwrap(),
            "--store",
            self.path("staunch.db").to_str().unwrap(),
            "--job-lease-ms",
            "900",
            "--job-heartbeat-ms",
            "150",
            "--job-reap-ms",
            "100",
            "--job-claim-poll-ms",
            "50",
            "--job-cancel-grace-ms",
            "3000",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    }

    async fn serve(&self, extra: &[&str]) -> Proc {
        let flags = self.flags(extra);
        let args: Vec<&str> = flags.iter().map(String::as_str).collect();
        Proc::ready(&args).await
    }
}

async fn read_pid(path: &Path) -> u32 {
    let end = Instant::now() + LIMIT;
    loop {
        if let Ok(s) = std::fs::read_to_string(path)
            && let Ok(pid) = s.trim().parse()
        {
            return pid;
        }
        assert!(Instant::now() < end, "{} never appeared", path.display());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn until(what: &str, mut pred: impl FnMut() -> bool) {
    let end = Instant::now() + LIMIT;
    while !pred() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn call(p: &mut Proc, id: i64, tool: &str, args: Value) -> Value {
    p.call(json!(id), tool, args, None).await;
    p.response(&json!(id)).await
}

/// Polls `get_<tool>` until the job is terminal.
async fn job_end(p: &mut Proc, tool: &str, job_id: &str, next_id: &mut i64) -> Value {
    let end = Instant::now() + LIMIT;
    loop {
        *next_id += 1;
        let r = call(
            p,
            *next_id,
            &format!("get_{tool}"),
            json!({"job_id": job_id}),
        )
        .await;
        let v = r["result"]["structuredContent"].clone();
        if ["succeeded", "failed", "cancelled"].contains(&v["status"].as_str().unwrap_or("")) {
            return v;
        }
        assert!(Instant::now() < end, "job never ended: {v}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn injection_attempts_arrive_as_literal_argv() {
    let s = Setup::new(false);
    let mut p = s.serve(&[]).await;
    let canary = s.path("pwned");
    let hostile = [
        format!("; rm -rf {}", s.dir.path().display()),
        format!("$(touch {})", canary.display()),
        format!("`touch {}`", canary.display()),
        "line one\nline two".to_string(),
        "--help".to_string(),
        "-rf".to_string(),
        "' \" * ? | & > /dev/null".to_string(),
    ];
    for (i, value) in hostile.iter().enumerate() {
        let items = json!(["-x", "$HOME", "a b"]);
        let r = call(
            &mut p,
            i as i64 + 1,
            "echo_args",
            json!({"value": value, "items": items}),
        )
        .await;
        let text = r["result"]["content"][0]["text"].as_str().unwrap();
        let argv: Vec<String> = serde_json::from_str(text.trim()).unwrap();
        assert_eq!(argv, ["--", value.as_str(), "-x", "$HOME", "a b"], "{r}");
    }
    assert!(!canary.exists(), "a shell ran something");
    assert!(s.config.exists(), "a shell removed files");
    // Wrong types never reach the command.
    let r = call(&mut p, 50, "echo_args", json!({"value": 3})).await;
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert!(
        r["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("`value`")
    );
}

#[tokio::test]
async fn cancel_kills_the_whole_tree_before_the_call_ends() {
    let s = Setup::new(false);
    let mut p = s.serve(&[]).await;
    let dir = s.dir.path().display().to_string();
    p.call(json!(1), "tree", json!({"dir": dir}), Some(json!("t1")))
        .await;
    let leader = read_pid(&s.path("leader.pid")).await;
    let grandchild = read_pid(&s.path("grandchild.pid")).await;
    assert!(alive(leader) && alive(grandchild));
    // The tree's own progress line arrives as a notification.
    p.wait_for(LIMIT, |m| m["params"]["progressToken"] == "t1")
        .await
        .expect("progress from the command");
    p.cancel(json!(1)).await;
    let lines = p
        .log_until(|l| {
            events_of(l, &json!(1))
                .iter()
                .any(|e| e["event"] == "request.end")
        })
        .await;
    // The request ends only after its process group is gone: both are dead by then, the
    // grandchild (which ignores SIGTERM) included.
    assert!(!alive(leader), "the leader outlived its call");
    assert!(!alive(grandchild), "the grandchild outlived its call");
    let end = events_of(&lines, &json!(1))
        .into_iter()
        .find(|e| e["event"] == "request.end")
        .unwrap()
        .clone();
    assert_eq!(end["outcome"], "cancelled", "{end}");
    let start = events_of(&lines, &json!(1))
        .into_iter()
        .find(|e| e["event"] == "request.start")
        .unwrap()
        .clone();
    assert_eq!(start["tool"], "tree");
    assert_eq!(start["shape"], "streaming");
    p.pump(Duration::from_millis(200)).await;
    assert_eq!(
        p.responses_to(&json!(1)),
        0,
        "a cancelled call gets no response"
    );

    // `staunch audit` reads the run: the command tool is there, cancelled, not orphaned.
    let out = std::process::Command::new(BIN)
        .args(["audit", "--json", "--slow-stop", "10s"])
        .arg(&p.log_path)
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{report}");
    let tree = report["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tool"] == "tree")
        .unwrap_or_else(|| panic!("tree missing from {report}"));
    assert_eq!(tree["cancelled"], 1, "{tree}");
    assert_eq!(tree["orphaned"], 0, "{tree}");
}

#[tokio::test]
async fn a_command_that_ignores_sigterm_is_sigkilled_at_its_deadline() {
    let s = Setup::new(false);
    let mut p = s.serve(&[]).await;
    let dir = s.dir.path().display().to_string();
    p.call(json!(1), "stubborn", json!({"dir": dir}), None)
        .await;
    let leader = read_pid(&s.path("leader.pid")).await;
    let grandchild = read_pid(&s.path("grandchild.pid")).await;
    let r = p.response(&json!(1)).await;
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert!(r.to_string().contains("deadline"), "{r}");
    assert!(!alive(leader), "the SIGTERM-ignoring leader survived");
    assert!(
        !alive(grandchild),
        "the SIGTERM-ignoring grandchild survived"
    );
}

/// VmHWM (peak resident set) of a process, in KiB.
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap()
}

#[tokio::test]
async fn one_gigabyte_of_output_does_not_grow_staunch() {
    let s = Setup::new(false);
    let mut p = s.serve(&[]).await;
    let pid = p.child.id().unwrap();
    let before = peak_rss_kib(pid);
    let gib: u64 = 1 << 30;
    p.call(json!(1), "flood", json!({"bytes": gib}), None).await;
    let r = p
        .wait_for(Duration::from_secs(240), |m| {
            common::is_response_to(m, &json!(1))
        })
        .await
        .expect("flood answered");
    let text = r["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.ends_with(&format!(
            "[output truncated: kept the first 65536 of {gib} bytes]"
        )),
        "{}",
        &text[text.len().saturating_sub(200)..]
    );
    let peak = peak_rss_kib(pid);
    eprintln!("staunch peak RSS: {before} KiB before, {peak} KiB after 1 GiB of output");
    // 1 GiB went through; the peak may move by buffers, never by the output.
    assert!(
        peak < before + 64 * 1024,
        "peak RSS grew from {before} KiB to {peak} KiB"
    );
}

#[tokio::test]
async fn progress_lines_and_elapsed_time_reach_the_client() {
    let s = Setup::new(false);
    let mut p = s.serve(&[]).await;
    p.call(json!(1), "steps", json!({"steps": 4}), Some(json!("s")))
        .await;
    let r = p.response(&json!(1)).await;
    assert_eq!(r["result"]["content"][0]["text"], "done 4\n", "{r}");
    let seen: Vec<f64> = p
        .progress(&json!("s"))
        .into_iter()
        .map(|(_, v)| v)
        .collect();
    assert!(
        !seen.is_empty() && seen.windows(2).all(|w| w[0] < w[1]),
        "{seen:?}"
    );
    assert_eq!(seen.last(), Some(&4.0), "{seen:?}");

    // A silent command still shows that it runs.
    p.call(json!(2), "silent", json!({"secs": 1}), Some(json!("q")))
        .await;
    p.response(&json!(2)).await;
    let msgs: Vec<String> = p
        .history
        .iter()
        .filter(|m| m.msg["params"]["progressToken"] == "q")
        .map(|m| {
            m.msg["params"]["message"]
                .as_str()
                .unwrap_or("")
                .to_string()
        })
        .collect();
    let elapsed = msgs.iter().filter(|m| m.starts_with("running for")).count();
    assert!(elapsed >= 2, "{msgs:?}");
    let values: Vec<f64> = p
        .progress(&json!("q"))
        .into_iter()
        .map(|(_, v)| v)
        .collect();
    assert!(values.windows(2).all(|w| w[0] < w[1]), "{values:?}");
}

#[tokio::test]
async fn a_crashing_command_is_a_failed_job_with_its_stderr_tail() {
    let s = Setup::new(true);
    let mut p = s.serve(&[]).await;
    let r = call(&mut p, 1, "start_crash", json!({})).await;
    let job_id = r["result"]["structuredContent"]["job_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"))
        .to_string();
    let mut next = 10;
    let v = job_end(&mut p, "crash", &job_id, &mut next).await;
    assert_eq!(v["status"], "failed", "{v}");
    let err = v["error"].to_string();
    assert!(err.contains("exit status 7"), "{v}");
    assert!(err.contains("corrupt at byte 42"), "{v}");
}

#[tokio::test]
async fn fifty_concurrent_starts_with_one_key_run_the_command_once() {
    let s = Setup::new(true);
    let mut p = s.serve(&[]).await;
    let file = s.path("runs.txt");
    let args = json!({"file": file.display().to_string(), "idempotency_key": "one-key"});
    for i in 0..50 {
        p.call(json!(1000 + i), "start_append", args.clone(), None)
            .await;
    }
    let mut ids = std::collections::BTreeSet::new();
    for i in 0..50 {
        let r = p.response(&json!(1000 + i)).await;
        let id = r["result"]["structuredContent"]["job_id"]
            .as_str()
            .unwrap_or_else(|| panic!("{r}"))
            .to_string();
        ids.insert(id);
    }
    assert_eq!(ids.len(), 1, "one key, one job: {ids:?}");
    let job_id = ids.into_iter().next().unwrap();
    let mut next = 5000;
    let v = job_end(&mut p, "append", &job_id, &mut next).await;
    assert_eq!(v["status"], "succeeded", "{v}");
    assert_eq!(v["result"], json!({"appended": true}), "{v}");
    let runs = std::fs::read_to_string(&file).unwrap();
    assert_eq!(
        runs.lines().count(),
        1,
        "the command ran more than once: {runs}"
    );
    assert!(
        runs.contains(&job_id),
        "STAUNCH_JOB_ID reached the command: {runs}"
    );
}

#[tokio::test]
async fn sigkill_of_staunch_leaves_nothing_behind_and_the_job_ends_lease_lost() {
    let s = Setup::new(true);
    let name = format!("cmd-test-{}", std::process::id());
    let mut p = s.serve(&["--instance-name", &name]).await;
    let dir = s.dir.path().display().to_string();
    let r = call(&mut p, 1, "start_tree_job", json!({"dir": dir})).await;
    let job_id = r["result"]["structuredContent"]["job_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"))
        .to_string();
    let leader = read_pid(&s.path("leader.pid")).await;
    let grandchild = read_pid(&s.path("grandchild.pid")).await;
    p.child.start_kill().unwrap(); // SIGKILL
    p.child.wait().await.unwrap();
    // The parent-death signal ends the command at once.
    until("the leader to die with staunch", || !alive(leader)).await;
    drop(p);
    // The restart (same store, same instance name) sweeps the grandchild and resolves the job.
    let mut p = s.serve(&["--instance-name", &name]).await;
    until("the grandchild to be swept", || !alive(grandchild)).await;
    let mut next = 10;
    let v = job_end(&mut p, "tree_job", &job_id, &mut next).await;
    assert_eq!(v["status"], "failed", "{v}");
    assert!(v.to_string().contains("lease_lost"), "{v}");
}

#[tokio::test]
async fn check_names_line_and_field_and_serve_refuses_an_invalid_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("staunch.toml");
    std::fs::write(
        &path,
        r#"[[tool]]
name = "export"
description = "Exports."
program = "/bin/echo"
args = ["{since}"]
deadline = "soon"
"#,
    )
    .unwrap();
    let out = std::process::Command::new(BIN)
        .args(["check", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "{}:5:9: tool[0] \"export\".args[0]: {{since}} names no parameter",
            path.display()
        )),
        "{err}"
    );
    assert!(
        err.contains(":6:12: tool[0] \"export\".deadline: \"soon\" is not a duration"),
        "{err}"
    );
    // A typo is caught by the parser, with its line.
    std::fs::write(&path, "[[tool]]\nname = \"x\"\ndescripton = \"y\"\n").unwrap();
    let out = std::process::Command::new(BIN)
        .args(["check", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(":3:1:") && err.contains("descripton"), "{err}");
    // serve will not start on it.
    let out = std::process::Command::new(BIN)
        .args(["serve", "--store", ":memory:", "--config"])
        .arg(&path)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("refusing to start"));
    // A valid file passes.
    let s = Setup::new(true);
    let out = std::process::Command::new(BIN)
        .args(["check", "--config"])
        .arg(&s.config)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("ok, 9 tools"));
}

#[tokio::test]
async fn sighup_reloads_without_dropping_work_and_keeps_the_old_file_when_the_new_is_bad() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("staunch.toml");
    let file = |word: &str| {
        format!(
            r#"[[tool]]
name = "say"
description = "Says a word after a pause."
program = "{FIX}/argv.py"
args = ["{word}", "{{secs}}"]
params.secs = {{ type = "number", default = 0 }}

[[tool]]
name = "pause"
description = "Sleeps, then prints the word it was started with."
shape = "streaming"
program = "{FIX}/steps.sh"
args = ["{{steps}}", "200"]
params.steps.type = "integer"
"#
        )
    };
    std::fs::write(&config, file("hello")).unwrap();
    let cfg = config.to_str().unwrap();
    let mut p = Proc::ready(&["--config", cfg]).await;
    p.request(json!("l"), "tools/list", json!({})).await;
    let r = call(&mut p, 1, "say", json!({})).await;
    assert!(r.to_string().contains("hello"), "{r}");
    // A call in flight while the file changes.
    p.call(json!(2), "pause", json!({"steps": 8}), None).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    std::fs::write(&config, file("bye")).unwrap();
    let pid = rustix::process::Pid::from_raw(p.child.id().unwrap() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::HUP).unwrap();
    let end = Instant::now() + LIMIT;
    let mut n = 10;
    loop {
        n += 1;
        let r = call(&mut p, n, "say", json!({})).await;
        if r.to_string().contains("bye") {
            break;
        }
        assert!(Instant::now() < end, "the reload never took effect: {r}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The call that was running finished as started.
    let r = p.response(&json!(2)).await;
    assert_eq!(r["result"]["content"][0]["text"], "done 8\n", "{r}");
    // An invalid file is refused: the running definitions stay.
    std::fs::write(&config, "[[tool]]\nname = 3\n").unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::HUP).unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let r = call(&mut p, 100, "say", json!({})).await;
    assert!(r.to_string().contains("bye"), "{r}");
    assert!(
        p.child.try_wait().unwrap().is_none(),
        "staunch exited on a bad reload"
    );
}

#[tokio::test]
async fn sighup_adds_and_removes_tools_and_open_sessions_hear_of_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("staunch.toml");
    let say = format!(
        r#"[[tool]]
name = "say"
description = "Prints its word."
program = "{FIX}/argv.py"
args = ["{{word}}"]
params.word.type = "string"
"#
    );
    let pause = format!(
        r#"[[tool]]
name = "pause"
description = "Counts steps slowly."
shape = "streaming"
program = "{FIX}/steps.sh"
args = ["{{steps}}", "200"]
params.steps.type = "integer"
"#
    );
    let greet = format!(
        r#"[[tool]]
name = "greet"
description = "Greets."
program = "{FIX}/argv.py"
args = ["hello", "{{who}}"]
params.who.type = "string"
"#
    );
    std::fs::write(&config, format!("{say}\n{pause}")).unwrap();
    let cfg = config.to_str().unwrap();
    // `ready` sends notifications/initialized: a 2025 session that hears list changes.
    let mut p = Proc::ready(&["--config", cfg]).await;
    let init = p.response(&json!("init")).await;
    assert_eq!(
        init["result"]["capabilities"]["tools"]["listChanged"], true,
        "{init}"
    );
    let names = common::sorted_tool_names;
    p.request(json!("l1"), "tools/list", json!({})).await;
    assert_eq!(names(&p.response(&json!("l1")).await), ["pause", "say"]);
    // A call of `pause` in flight while `pause` is removed and `greet` added.
    p.call(json!(2), "pause", json!({"steps": 8}), None).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    std::fs::write(&config, format!("{say}\n{greet}")).unwrap();
    let pid = rustix::process::Pid::from_raw(p.child.id().unwrap() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::HUP).unwrap();
    p.wait_for(LIMIT, |m| m["method"] == "notifications/tools/list_changed")
        .await
        .expect("the open session heard tools/list_changed");
    p.request(json!("l2"), "tools/list", json!({})).await;
    assert_eq!(names(&p.response(&json!("l2")).await), ["greet", "say"]);
    let r = call(&mut p, 3, "greet", json!({"who": "world"})).await;
    assert_eq!(
        r["result"]["content"][0]["text"], "[\"hello\", \"world\"]\n",
        "{r}"
    );
    // A new call of the removed tool: the unknown-tool error.
    p.call(json!(4), "pause", json!({"steps": 1}), None).await;
    let refused = p.response(&json!(4)).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert_eq!(refused["error"]["message"], "unknown tool: pause");
    // The call that was running when it was removed ends with its result.
    let r = p.response(&json!(2)).await;
    assert_eq!(r["result"]["content"][0]["text"], "done 8\n", "{r}");
}

#[tokio::test]
async fn probe_passes_every_check_on_the_example_config() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/command-tools");
    let out = tokio::process::Command::new(BIN)
        .current_dir(example)
        .args([
            "probe",
            "--protocol",
            "2025-11-25",
            "--args",
            r#"{"steps":20,"delay_ms":300}"#,
            "--",
            BIN,
            "serve",
            "--config",
            "staunch.toml",
            "--store",
            ":memory:",
            "--no-log",
        ])
        .output()
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("0 warned, 0 failed, 0 skipped"), "{text}");
    assert!(text.contains("tasks.cancel        PASS"), "{text}");
}

#[tokio::test]
async fn cancelling_a_job_ends_its_process_tree_and_the_job_is_cancelled() {
    let s = Setup::new(true);
    let mut p = s.serve(&[]).await;
    let dir = s.dir.path().display().to_string();
    let r = call(&mut p, 1, "start_tree_job", json!({"dir": dir})).await;
    let job_id = r["result"]["structuredContent"]["job_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"))
        .to_string();
    let leader = read_pid(&s.path("leader.pid")).await;
    let grandchild = read_pid(&s.path("grandchild.pid")).await;
    let r = call(&mut p, 2, "cancel_tree_job", json!({"job_id": job_id})).await;
    assert_ne!(r["result"]["isError"], true, "{r}");
    let mut next = 10;
    let v = job_end(&mut p, "tree_job", &job_id, &mut next).await;
    assert_eq!(v["status"], "cancelled", "{v}");
    // The job is recorded as cancelled only once its body returned, which it does only after
    // the process group is gone.
    assert!(!alive(leader), "the job's command outlived the job");
    assert!(!alive(grandchild), "the job's grandchild outlived the job");
}

#[tokio::test]
async fn the_serve_table_sets_defaults_and_demo_tools_are_opt_in() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("staunch.toml");
    let tool = format!(
        "[[tool]]\nname = \"hello\"\ndescription = \"Says hello.\"\nprogram = \"{FIX}/argv.py\"\nargs = [\"hello\"]\n"
    );
    let list = |p: &Proc| -> Vec<String> {
        let r = p
            .history
            .iter()
            .find(|m| m.msg["id"] == "l")
            .unwrap()
            .msg
            .clone();
        r["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    };
    // Without demo_tools: only the command tool.
    std::fs::write(&config, &tool).unwrap();
    let mut p = Proc::ready(&["--config", config.to_str().unwrap()]).await;
    p.request(json!("l"), "tools/list", json!({})).await;
    p.response(&json!("l")).await;
    assert_eq!(list(&p), ["hello"]);
    drop(p);
    // [serve] demo_tools = true and a store relative to the file.
    std::fs::write(
        &config,
        format!("[serve]\ndemo_tools = true\nstore = \"from-file.db\"\n\n{tool}"),
    )
    .unwrap();
    let mut p = Proc::spawn(&["--config", config.to_str().unwrap()]).await;
    p.initialize("2025-11-25").await;
    p.request(json!("l"), "tools/list", json!({})).await;
    p.response(&json!("l")).await;
    let names = list(&p);
    assert!(
        names.contains(&"hello".to_string()) && names.contains(&"echo".to_string()),
        "{names:?}"
    );
    // Proc passes --store :memory: explicitly, which wins over the file.
    assert!(!dir.path().join("from-file.db").exists());
    drop(p);
    // Without the flag, the file's store is used (relative to the file, not the cwd).
    let out = tokio::process::Command::new(BIN)
        .args(["serve", "--no-log", "--config"])
        .arg(&config)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(dir.path().join("from-file.db").exists());
}

/// The tool names `staunch serve --config FILE` lists over stdio, with `env` set.
fn listed_tools(config: &Path, env: &[(&str, &str)]) -> Vec<String> {
    use std::io::Write as _;
    let mut child = std::process::Command::new(BIN)
        .args(["serve", "--no-log", "--store", ":memory:", "--config"])
        .arg(config)
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for msg in [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    ] {
        writeln!(stdin, "{msg}").unwrap();
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let list = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|m| m["id"] == 2)
        .unwrap_or_else(|| {
            panic!(
                "no tools/list answer: {stdout}\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

/// Every flag of `serve` is a key of `[serve]`, not only the few the table once listed: the
/// file's `profile` takes effect, its environment variable wins over the file, and `staunch
/// check` names a value the flag refuses at its line, in the flag's words.
#[test]
fn any_serve_flag_is_a_key_of_the_serve_table() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("staunch.toml");
    std::fs::write(
        &config,
        format!(
            "[serve]\ndemo_tools = true\nprofile = \"conformance\"\ncancel_grace_ms = \"1.5s\"\n\n\
             [[tool]]\nname = \"hello\"\ndescription = \"Says hello.\"\nprogram = \"{FIX}/argv.py\"\n"
        ),
    )
    .unwrap();
    let names = listed_tools(&config, &[]);
    assert!(
        names.iter().any(|n| n == "test_simple_text") && names.iter().any(|n| n == "hello"),
        "the file's profile is served: {names:?}"
    );
    let names = listed_tools(&config, &[("STAUNCH_PROFILE", "demo")]);
    assert!(
        names.iter().any(|n| n == "echo") && !names.iter().any(|n| n == "test_simple_text"),
        "the variable wins over the file: {names:?}"
    );
    std::fs::write(
        &config,
        "[serve]\nmax_in_flight = 0\ncancel_grace_ms = \"soon\"\nmax_inflight = 3\n",
    )
    .unwrap();
    let out = std::process::Command::new(BIN)
        .args(["check", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(":2:17: serve.max_in_flight: invalid value '0' for '--max-in-flight <N>'"),
        "{err}"
    );
    assert!(
        err.contains(":3:19: serve.cancel_grace_ms: invalid value 'soon'"),
        "{err}"
    );
    assert!(
        err.contains(":4:1: serve.max_inflight: unknown key; did you mean \"max_in_flight\"?"),
        "{err}"
    );
    assert!(err.contains("3 mistakes"), "{err}");
}

/// Security review, second pass: a `result = "file"` tool read whatever path its arguments
/// named (`../outside.txt`, an absolute path, a symbolic link out of its directory) and handed
/// the content to the client. Over real HTTP on loopback: every escape fails with a message
/// that names the rule, and the outside file's content never reaches the client.
#[tokio::test]
async fn command_tool_result_file_cannot_leave_its_directory() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let secret = "outside-content-5f2c9a81";
    let outside = dir.path().join("outside.txt");
    std::fs::write(&outside, secret).unwrap();
    std::fs::write(work.join("report.txt"), "the report").unwrap();
    std::os::unix::fs::symlink(&outside, work.join("link.txt")).unwrap();
    let config = dir.path().join("staunch.toml");
    std::fs::write(
        &config,
        r#"
[[tool]]
name = "report"
description = "Returns the file it is told to write."
program = "true"
args = ["{out}"]
cwd = "work"
result = "file"
result_file = "{out}"
params.out.type = "string"
"#,
    )
    .unwrap();
    let s = common::http::HttpServer::start(&["--config", config.to_str().unwrap()]).await;
    let sid = s.initialize().await;
    let call =
        |id: &str, out: &str| common::http::call(json!(id), "report", json!({"out": out}), None);
    // Inside the directory the tool works as before.
    let r = common::http::rpc(&s, &sid, call("in", "report.txt")).await;
    assert_ne!(r["result"]["isError"], true, "{r}");
    assert!(r.to_string().contains("the report"), "{r}");
    let absolute = outside.to_str().unwrap().to_string();
    for (id, out) in [
        ("up", "../outside.txt"),
        ("abs", absolute.as_str()),
        ("link", "link.txt"),
    ] {
        let r = common::http::rpc(&s, &sid, call(id, out)).await;
        let text = r.to_string();
        assert!(
            !text.contains(secret),
            "{id}: the outside file leaked: {text}"
        );
        assert_eq!(r["result"]["isError"], true, "{id}: {r}");
        assert!(
            text.contains("result_file must stay inside the tool's working directory"),
            "{id}: {text}"
        );
    }
}

/// Security review (input reaching a process): a client's string in an `args` element of its
/// own reached the program as an option (`--output=…`, `-rf`) — argv, no shell, but the program
/// reads a leading `-` as a flag. Now it is refused unless a literal `"--"` comes before it.
#[tokio::test]
async fn command_tool_argument_cannot_become_an_option() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("staunch.toml");
    std::fs::write(
        &config,
        r#"
[[tool]]
name = "show"
description = "Prints its argument."
program = "echo"
args = ["{text}"]
params.text.type = "string"

[[tool]]
name = "show_after_dashes"
description = "Prints its argument after the end of options."
program = "echo"
args = ["--", "{text}"]
params.text.type = "string"
"#,
    )
    .unwrap();
    let s = common::http::HttpServer::start(&["--config", config.to_str().unwrap()]).await;
    let sid = s.initialize().await;
    let call = |id: &str, tool: &str, text: &str| {
        common::http::call(json!(id), tool, json!({"text": text}), None)
    };
    let r = common::http::rpc(&s, &sid, call("opt", "show", "-n")).await;
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert!(r.to_string().contains("read as an option"), "{r}");
    let r = common::http::rpc(&s, &sid, call("plain", "show", "hello")).await;
    assert!(r.to_string().contains("hello"), "{r}");
    let r = common::http::rpc(&s, &sid, call("after", "show_after_dashes", "-n")).await;
    assert_ne!(r["result"]["isError"], true, "{r}");
    assert!(r.to_string().contains("-n"), "{r}");
}
