//! Every shell example in README.md and the book (`docs/src`) runs, verbatim, against the
//! built binary — an example that breaks fails this test.
//!
//! Each ```` ```sh ```` (or `bash`, `console`) block is one example. An HTML comment on the line
//! before a block says how to take it (invisible on GitHub and in the book):
//!
//! - no comment: run the block with bash; every command in it must exit 0. A server started in
//!   the background (`staunch serve --http ADDR &`) is waited for — its address accepting — before
//!   the next line runs, as a person typing would wait, and stopped when the block ends.
//! - `<!-- example: exit N -->`: as above, and a command may also exit `N` (a timeout's 124).
//! - `<!-- example: server -->`: every command that serves (`--http ADDR`) is started in the
//!   background and must be accepting on ADDR within the time limit and still running; the
//!   other commands (making a token file, …) must exit 0. Add `postgres` to run it only when
//!   `STAUNCH_TEST_POSTGRES` is set (the examples name this machine's test database).
//! - `<!-- example: file NAME -->` (optionally `mode=755`): the block is written to `NAME` in the
//!   page's directory for the blocks after it (a script, a `staunch.toml`).
//! - `<!-- example: skip REASON -->`: not run; the reason is printed.
//!
//! The blocks of one page share a fresh directory, in order, so a tutorial's files and commands
//! build on each other; `HOME` and `XDG_STATE_HOME` point into it, and the built `staunch` comes
//! first on `PATH`. Every block is bounded in time; its whole process group is killed at the end.
//! Outputs are not compared: the examples show none.

use crate::common;

use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long one block may take (a probe of a local server is the slowest, a few seconds).
const BLOCK_LIMIT: Duration = Duration::from_secs(120);
/// How long a server has to accept on its address.
const LISTEN_LIMIT: Duration = Duration::from_secs(30);

#[derive(Clone, Debug, PartialEq)]
enum Mode {
    Run { also_ok: Vec<i32> },
    Server { postgres: bool },
    File { name: String, mode: Option<u32> },
    Skip(String),
}

#[derive(Debug)]
struct Example {
    line: usize,
    mode: Mode,
    text: String,
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn pages() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).expect("docs/src readable") {
            let p = e.expect("entry").path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "md") {
                out.push(p);
            }
        }
    }
    let root = repo_root();
    let mut out = vec![root.join("README.md")];
    walk(&root.join("docs/src"), &mut out);
    out.sort();
    out
}

fn parse_mode(comment: Option<&str>, page: &Path, line: usize) -> Mode {
    let Some(c) = comment else {
        return Mode::Run { also_ok: vec![] };
    };
    let words: Vec<&str> = c.split_whitespace().collect();
    match words.as_slice() {
        ["exit", codes @ ..] => Mode::Run {
            also_ok: codes
                .iter()
                .map(|c| c.parse().expect("an exit code"))
                .collect(),
        },
        ["server"] => Mode::Server { postgres: false },
        ["server", "postgres"] => Mode::Server { postgres: true },
        ["file", name] => Mode::File {
            name: name.to_string(),
            mode: None,
        },
        ["file", name, m] => Mode::File {
            name: name.to_string(),
            mode: Some(
                u32::from_str_radix(m.strip_prefix("mode=").expect("mode=NNN"), 8)
                    .expect("an octal mode"),
            ),
        },
        ["skip", reason @ ..] if !reason.is_empty() => Mode::Skip(reason.join(" ")),
        _ => panic!("{}:{line}: unknown example marker {c:?}", page.display()),
    }
}

/// The shell blocks of one page, each with the marker on the line before it.
fn examples_of(page: &Path, text: &str) -> Vec<Example> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let trimmed = lines[i].trim_start();
        let Some(info) = trimmed.strip_prefix("```") else {
            i += 1;
            continue;
        };
        let indent = lines[i].len() - trimmed.len();
        let lang = info.split([' ', ',']).next().unwrap_or_default();
        let start = i;
        let mut body = Vec::new();
        i += 1;
        while i < lines.len() && !lines[i].trim_start().starts_with("```") {
            body.push(lines[i].get(indent..).unwrap_or(lines[i].trim_start()));
            i += 1;
        }
        i += 1;
        let comment = start
            .checked_sub(1)
            .map(|p| lines[p].trim())
            .and_then(|l| l.strip_prefix("<!-- example:"))
            .and_then(|l| l.strip_suffix("-->"))
            .map(str::trim);
        let shell = matches!(lang, "sh" | "bash" | "console" | "shell");
        if !shell && comment.is_none() {
            continue;
        }
        out.push(Example {
            line: start + 1,
            mode: parse_mode(comment, page, start + 1),
            text: body.join("\n") + "\n",
        });
    }
    out
}

/// The `--http ADDR` addresses a command line names.
fn http_addrs(text: &str) -> Vec<String> {
    let words: Vec<&str> = text.split_whitespace().collect();
    words
        .windows(2)
        .filter(|w| w[0] == "--http")
        .map(|w| w[1].to_string())
        .collect()
}

fn accepting(addr: &str) -> bool {
    use std::net::ToSocketAddrs as _;
    addr.to_socket_addrs().is_ok_and(|mut a| {
        a.any(|a| std::net::TcpStream::connect_timeout(&a, Duration::from_millis(200)).is_ok())
    })
}

fn wait_accepting(addr: &str, child: &mut Child) -> Result<(), String> {
    let end = Instant::now() + LISTEN_LIMIT;
    while Instant::now() < end {
        if accepting(addr) {
            return Ok(());
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("exited ({status}) before accepting on {addr}"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(format!("not accepting on {addr} after {LISTEN_LIMIT:?}"))
}

/// A shell in the page's directory, with the built binary first on PATH, in a process group
/// of its own.
fn shell(dir: &Path, script: &str) -> Command {
    let bin_dir = Path::new(common::BIN)
        .parent()
        .expect("the binary's directory");
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut c = Command::new("bash");
    c.arg("-c").arg(script).current_dir(dir);
    for (k, _) in std::env::vars() {
        if k.starts_with("STAUNCH_") || k == "RUST_LOG" {
            c.env_remove(k);
        }
    }
    c.env("PATH", path)
        .env("HOME", dir)
        .env("XDG_STATE_HOME", dir.join(".state"))
        .stdin(Stdio::null())
        .process_group(0);
    c
}

fn kill_group(child: &mut Child) {
    if let Some(pid) = rustix::process::Pid::from_raw(child.id() as i32) {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
    let _ = child.wait();
}

/// Waits for `child` within the block limit; its output and exit status.
fn finish(mut child: Child, what: &str) -> Result<(std::process::ExitStatus, String), String> {
    let end = Instant::now() + BLOCK_LIMIT;
    loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            let mut out = String::new();
            use std::io::Read as _;
            if let Some(mut o) = child.stdout.take() {
                let _ = o.read_to_string(&mut out);
            }
            if let Some(mut e) = child.stderr.take() {
                let _ = e.read_to_string(&mut out);
            }
            kill_group(&mut child);
            return Ok((status, out));
        }
        if Instant::now() > end {
            kill_group(&mut child);
            return Err(format!("{what}: still running after {BLOCK_LIMIT:?}"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs a block with bash: background servers waited for, every failing command recorded.
fn run_block(dir: &Path, text: &str, also_ok: &[i32]) -> Result<(), String> {
    let failures = dir.join(".failures");
    let _ = std::fs::remove_file(&failures);
    let mut script = format!(
        "set -o pipefail\ntrap 'echo \"$? $BASH_COMMAND\" >> {}' ERR\n",
        failures.display()
    );
    for line in text.lines() {
        script.push_str(line);
        script.push('\n');
        if line.trim_end().ends_with('&') {
            for addr in http_addrs(line) {
                let (host, port) = addr.rsplit_once(':').expect("HOST:PORT");
                script.push_str(&format!(
                    "for _ in $(seq 600); do (exec 3<>/dev/tcp/{host}/{port}) 2>/dev/null && break; sleep 0.05; done\n"
                ));
            }
        }
    }
    // Background servers end with the block.
    script.push_str("trap - ERR\nkill $(jobs -p) 2>/dev/null; wait 2>/dev/null; true\n");
    let child = shell(dir, &script)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    let (_, out) = finish(child, "the block")?;
    let failed = std::fs::read_to_string(&failures).unwrap_or_default();
    let bad: Vec<&str> = failed
        .lines()
        .filter(|l| {
            let code: i32 = l
                .split(' ')
                .next()
                .and_then(|c| c.parse().ok())
                .unwrap_or(-1);
            !also_ok.contains(&code)
        })
        .collect();
    if bad.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "failed (exit code, command):\n{}\noutput:\n{out}",
            bad.join("\n")
        ))
    }
}

/// The block's commands, one each: `\` continuations joined, a here-document kept with the
/// command that opens it, comments and blank lines left out.
fn commands(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let mut cmd = line.to_string();
        while cmd.trim_end().ends_with('\\') {
            let Some(next) = lines.next() else { break };
            cmd.push('\n');
            cmd.push_str(next);
        }
        if let Some((_, tag)) = cmd.split_once("<<") {
            let tag = tag.trim().trim_matches(['\'', '"', '-']).to_string();
            for next in lines.by_ref() {
                cmd.push('\n');
                cmd.push_str(next);
                if next.trim() == tag {
                    break;
                }
            }
        }
        let t = cmd.trim();
        if !t.is_empty() && !t.starts_with('#') {
            out.push(cmd);
        }
    }
    out
}

/// Starts each serving command in the background and checks it accepts; runs the others.
fn server_block(dir: &Path, text: &str) -> Result<(), String> {
    let mut servers: Vec<Child> = Vec::new();
    let mut result = Ok(());
    for cmd in commands(text) {
        let addrs = http_addrs(&cmd);
        if addrs.is_empty() {
            let child = shell(dir, &cmd)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| e.to_string())?;
            let (status, out) = finish(child, &cmd)?;
            if !status.success() {
                result = Err(format!("{cmd}\nexited {status}:\n{out}"));
                break;
            }
            continue;
        }
        let log = dir.join(format!(".server-{}.log", servers.len()));
        let file = std::fs::File::create(&log).map_err(|e| e.to_string())?;
        let mut child = shell(dir, &cmd)
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .map_err(|e| e.to_string())?;
        let waited = addrs.iter().try_for_each(|a| wait_accepting(a, &mut child));
        servers.push(child);
        if let Err(e) = waited {
            let said = std::fs::read_to_string(&log).unwrap_or_default();
            result = Err(format!("{cmd}\n{e}; it said:\n{said}"));
            break;
        }
    }
    for mut s in servers {
        kill_group(&mut s);
    }
    result
}

#[test]
fn every_cli_example_in_the_readme_and_the_book_runs() {
    let postgres = std::env::var("STAUNCH_TEST_POSTGRES").is_ok_and(|v| !v.is_empty());
    let (mut ran, mut skipped, mut failed) = (0, Vec::new(), Vec::new());
    for page in pages() {
        let text = std::fs::read_to_string(&page).expect("a readable page");
        let examples = examples_of(&page, &text);
        if examples.is_empty() {
            continue;
        }
        let dir = tempfile::tempdir().expect("a directory for the page");
        let rel = page
            .strip_prefix(repo_root())
            .unwrap_or(&page)
            .display()
            .to_string();
        for ex in examples {
            let at = format!("{rel}:{}", ex.line);
            let outcome = match &ex.mode {
                Mode::Skip(reason) => {
                    skipped.push(format!("{at}: {reason}"));
                    continue;
                }
                Mode::File { name, mode } => {
                    let path = dir.path().join(name);
                    std::fs::write(&path, &ex.text).expect("write the example's file");
                    if let Some(m) = mode {
                        use std::os::unix::fs::PermissionsExt as _;
                        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(*m))
                            .expect("chmod");
                    }
                    continue;
                }
                Mode::Server { postgres: true } if !postgres => {
                    skipped.push(format!("{at}: SKIPPED (needs STAUNCH_TEST_POSTGRES)"));
                    continue;
                }
                Mode::Server { .. } => server_block(dir.path(), &ex.text),
                Mode::Run { also_ok } => run_block(dir.path(), &ex.text, also_ok),
            };
            ran += 1;
            eprintln!("{at}: {}", if outcome.is_ok() { "ok" } else { "FAILED" });
            if let Err(e) = outcome {
                failed.push(format!("{at}:\n{}\n{e}", ex.text));
            }
        }
    }
    eprintln!(
        "{ran} examples run, {} skipped:\n  {}",
        skipped.len(),
        skipped.join("\n  ")
    );
    assert!(
        ran >= 10,
        "only {ran} examples found: is the harness reading the pages?"
    );
    assert!(
        failed.is_empty(),
        "{} example(s) failed:\n\n{}",
        failed.len(),
        failed.join("\n\n")
    );
}

/// The harness itself: a broken example is reported, a good one passes, a server that does not
/// come up fails, and markers are read.
#[test]
fn the_example_harness_reports_a_broken_example() {
    let dir = tempfile::tempdir().unwrap();
    assert!(run_block(dir.path(), "staunch --version\n", &[]).is_ok());
    let broken = run_block(
        dir.path(),
        "staunch call no_such_flag --nope -- staunch serve\n",
        &[],
    );
    let said = broken.expect_err("a broken example fails");
    assert!(said.contains("--nope"), "{said}");
    // A failure in the middle of a block is not hidden by a later success.
    assert!(
        run_block(
            dir.path(),
            "staunch jobs --store nowhere.db list\ntrue\n",
            &[]
        )
        .is_err()
    );
    // An allowed exit code passes; others still fail.
    assert!(run_block(dir.path(), "bash -c 'exit 124'\n", &[124]).is_ok());
    assert!(run_block(dir.path(), "bash -c 'exit 3'\n", &[124]).is_err());
    // A server with a bad flag never accepts.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let bad = server_block(
        dir.path(),
        &format!("staunch serve --http 127.0.0.1:{port} --no-such-flag\n"),
    );
    assert!(bad.is_err(), "{bad:?}");
    let good = server_block(
        dir.path(),
        &format!("staunch serve --http 127.0.0.1:{port} --store :memory:\n"),
    );
    assert!(good.is_ok(), "{good:?}");
    // Markers.
    let page = Path::new("x.md");
    let ex = examples_of(
        page,
        "<!-- example: exit 124 -->\n```sh\na\n```\n\n<!-- example: skip needs a cloud -->\n```sh\nb\n```\n   ```sh\n   c \\\n     d\n   ```\n",
    );
    assert_eq!(ex.len(), 3);
    assert_eq!(ex[0].mode, Mode::Run { also_ok: vec![124] });
    assert_eq!(ex[1].mode, Mode::Skip("needs a cloud".into()));
    assert_eq!(ex[2].text, "c \\\n  d\n");
    assert_eq!(commands(&ex[2].text), vec!["c \\\n  d".to_string()]);
}
