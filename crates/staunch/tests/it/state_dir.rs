//! The default store travels with the user, not with the caller's directory: an MCP client
//! starts `staunch serve` wherever it runs — here a directory nobody may write to — and the
//! store still opens, in `$XDG_STATE_HOME/staunch/` (created 0700); `staunch jobs`, run from
//! elsewhere, finds the same jobs without flags. An explicit `--store` wins, and a store
//! scheme staunch does not support is refused by name, in the one error style (one line, the
//! cause once, no backtrace even with `RUST_BACKTRACE=1`).

use crate::common;

use std::os::unix::fs::PermissionsExt as _;
use std::process::Output;

fn run(cwd: &std::path::Path, state: &std::path::Path, args: &[&str]) -> Output {
    std::process::Command::new(common::BIN)
        .args(args)
        .current_dir(cwd)
        .env("XDG_STATE_HOME", state)
        .env_remove("STAUNCH_STORE")
        // Set by many for panics: a user's mistake must still read as one line, no backtrace.
        .env("RUST_BACKTRACE", "1")
        .output()
        .expect("run staunch")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn without_store_the_state_directory_holds_it_wherever_the_server_starts() {
    let root = tempfile::tempdir().unwrap();
    let state = root.path().join("state");
    let locked = root.path().join("locked");
    std::fs::create_dir(&locked).unwrap();
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o555)).unwrap();
    let elsewhere = root.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();

    // A job through a stdio server started in the locked directory.
    let bin = common::BIN;
    let out = run(
        &locked,
        &state,
        &[
            "call",
            "start_import_rows",
            "rows=3",
            "--",
            bin,
            "serve",
            "--no-log",
        ],
    );
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let db = state.join("staunch").join("staunch.db");
    assert!(db.is_file(), "no store at {}", db.display());
    let mode = std::fs::metadata(state.join("staunch"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700, "the state directory is owner-only");
    assert_eq!(
        std::fs::read_dir(&locked).unwrap().count(),
        0,
        "nothing in the caller's dir"
    );

    // `staunch jobs` from another directory reads the same default.
    let listed = run(&elsewhere, &state, &["jobs", "--json", "list"]);
    assert!(listed.status.success(), "{}", text(&listed.stderr));
    let jobs: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    let jobs = jobs.as_array().expect("a list");
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    assert_eq!(jobs[0]["tool"], "import_rows", "{jobs:?}");
    assert_eq!(jobs[0]["status"], "succeeded", "{jobs:?}");

    // An explicit --store wins over the default.
    let own = root.path().join("own.db");
    let listed = run(
        &elsewhere,
        &state,
        &["jobs", "--store", own.to_str().unwrap(), "list"],
    );
    assert_eq!(listed.status.code(), Some(2), "no store there yet");
    assert!(
        text(&listed.stderr).contains("own.db"),
        "{}",
        text(&listed.stderr)
    );
}

#[test]
fn an_unsupported_store_scheme_is_refused_by_name() {
    let root = tempfile::tempdir().unwrap();
    let out = run(
        root.path(),
        root.path(),
        &[
            "serve",
            "--http",
            "127.0.0.1:0",
            "--store",
            "mysql://root@127.0.0.1/db",
        ],
    );
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("mysql:// is not a store staunch supports"),
        "{err}"
    );
    assert!(
        !root.path().join("mysql:").exists(),
        "no directory named after the URL"
    );
}
