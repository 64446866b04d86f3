//! The book's table "What the commands say" (docs/src/reference/errors.md), row by row: each
//! mistake a user makes gets its message and exit code from the real binary, and the table
//! holds the same message and code — so neither the binary nor the page can drift alone.

use crate::client_support::{BIN, free_port};
use crate::common::tls::{Cert, tls_front};

use std::path::Path;
use std::time::Duration;

use tokio::process::Command;

/// One row: what the user runs, what must be said, the exit code.
struct Row {
    args: Vec<String>,
    says: &'static str,
    exit: i32,
}

fn row(args: &[&str], says: &'static str, exit: i32) -> Row {
    Row {
        args: args.iter().map(|s| s.to_string()).collect(),
        says,
        exit,
    }
}

async fn run(args: &[String], cwd: &Path) -> (i32, String) {
    let o = tokio::time::timeout(
        Duration::from_secs(60),
        Command::new(BIN)
            .args(args)
            .current_dir(cwd)
            .env("XDG_STATE_HOME", cwd.join("state"))
            .env("RUST_BACKTRACE", "1")
            .stdin(std::process::Stdio::null())
            .output(),
    )
    .await
    .expect("staunch finishes")
    .expect("run staunch");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (o.status.code().unwrap_or(-1), text)
}

#[tokio::test]
async fn every_row_of_the_error_table_is_what_the_binary_says() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path();
    // A store that exists (a server that ran once), for the job rows.
    let store = cwd.join("jobs.db");
    let store = store.to_str().unwrap();
    let (code, out) = run(
        &[
            "serve".into(),
            "--no-log".into(),
            "--store".into(),
            store.into(),
        ],
        cwd,
    )
    .await;
    assert_eq!(code, 0, "{out}");
    std::fs::write(
        cwd.join("bad.toml"),
        "[[tool]]\nname = \"export\"\ndescription = \"Exports.\"\nprogram = \"./export.sh\"\n\
         dedline = \"1m\"\ndeadline = \"soon\"\n",
    )
    .unwrap();
    let server = crate::client_support::staunch(&[]).await;
    let port = server.port;
    let taken = format!("127.0.0.1:{port}");
    let wrong_path = format!("http://127.0.0.1:{port}/wrong");
    let https_to_plain = format!("https://127.0.0.1:{port}/mcp");
    // The fixture signed by the tests' own CA, which this command is not told to trust.
    let private_ca = tls_front(([127, 0, 0, 1], port).into(), Cert::Trusted).await;
    let private_ca = format!("https://localhost:{}/mcp", private_ca.addr.port());
    // A self-signed CA certificate presented as the server's own.
    let ca_as_server = tls_front(([127, 0, 0, 1], port).into(), Cert::Untrusted).await;
    let ca_as_server = format!("https://localhost:{}/mcp", ca_as_server.addr.port());
    let nothing = format!("http://127.0.0.1:{}/mcp", free_port().await);

    let rows = vec![
        row(
            &["serve", "--http", "localhost"],
            "\"localhost\" has no port; write HOST:PORT, e.g. 127.0.0.1:8080 or localhost:8080",
            2,
        ),
        row(
            &["serve", "--bogus"],
            "unexpected argument '--bogus' found",
            2,
        ),
        row(
            &["serve", "--store", "mysql://db/x"],
            "mysql:// is not a store staunch supports; use a SQLite file path, :memory:, or a \
             postgres:// URL",
            1,
        ),
        row(
            &["serve", "--http", &taken, "--store", ":memory:"],
            "Address already in use",
            1,
        ),
        row(
            &["serve", "--config", "bad.toml", "--store", ":memory:"],
            "refusing to start with an invalid configuration",
            1,
        ),
        row(
            &["check", "--config", "bad.toml"],
            "tool[0] \"export\".dedline: unknown key; did you mean \"deadline\"?",
            1,
        ),
        row(
            &["jobs", "--store", "nowhere.db", "list"],
            "no store at \"nowhere.db\" (pass the --store that staunch serve uses)",
            2,
        ),
        row(
            &["jobs", "purge", "--older-than", "soon"],
            "write e.g. 500ms, 30s, 10m, 1h30m or 7d",
            2,
        ),
        row(
            &["jobs", "--store", store, "show", "nope"],
            "no job \"nope\" in this store",
            1,
        ),
        row(
            &[
                "call", "ecoh", "--", BIN, "serve", "--no-log", "--store", ":memory:",
            ],
            "the server has no tool \"ecoh\"\n  did you mean \"echo\"?",
            2,
        ),
        row(
            &["tools"],
            "give a server URL first, or the server command after `--`",
            2,
        ),
        row(
            &["call", &nothing, "echo"],
            "connection refused: nothing is listening at that address and port",
            2,
        ),
        row(
            &["call", &wrong_path, "echo"],
            "HTTP 404 (Not Found): no MCP endpoint at this URL — check the path (staunch serves /mcp)",
            2,
        ),
        row(
            &["call", &https_to_plain, "echo"],
            "TLS: the server did not answer in TLS — is it a plain http:// endpoint? Try the URL \
             with http://",
            2,
        ),
        row(
            &["call", &private_ca, "echo"],
            "TLS: the server's certificate is not signed by an authority this machine trusts; if \
             the server uses a private CA, point SSL_CERT_FILE at that CA's certificate (PEM)",
            2,
        ),
        row(
            &["call", &ca_as_server, "echo"],
            "TLS: the server's certificate is a CA certificate; the server must present a server \
             certificate signed by that CA, not the CA itself",
            2,
        ),
        row(
            &[
                "call",
                "fail",
                "how=tool_error",
                "--",
                BIN,
                "serve",
                "--no-log",
                "--store",
                ":memory:",
            ],
            "this tool failed on purpose",
            1,
        ),
    ];

    let table = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/src/reference/errors.md"),
    )
    .unwrap();
    // The page writes a message on one line; the binary may wrap it over two.
    let flat = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let table_rows: Vec<String> = table
        .lines()
        .filter(|l| l.starts_with("| `staunch"))
        .map(flat)
        .collect();
    let mut failures = Vec::new();
    for r in &rows {
        let (code, out) = run(&r.args, cwd).await;
        let shown = r.args.join(" ");
        if code != r.exit || !out.contains(r.says) {
            failures.push(format!(
                "`staunch {shown}`: exit {code} (want {}), said:\n{out}\n(want {:?})",
                r.exit, r.says
            ));
        }
        if out.contains("stack backtrace") || out.contains("Stack backtrace") {
            failures.push(format!("`staunch {shown}` printed a backtrace:\n{out}"));
        }
        let says = flat(r.says.lines().next().unwrap());
        if !table_rows
            .iter()
            .any(|t| t.contains(&says) && t.ends_with(&format!("| {} |", r.exit)))
        {
            failures.push(format!(
                "errors.md has no row saying {says:?} with exit {}",
                r.exit
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
