//! Finding the real MCP clients that `scripts/setup-tools` installs into `.tools/`.
//!
//! Tests that need them skip with a clear line when they are missing, unless
//! `STAUNCH_REQUIRE_EXTERNAL=1` (set by `scripts/test` and CI), where a missing tool fails.

use std::path::PathBuf;

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The path of an installed tool, or `None` after printing why the test is skipped.
pub fn tool(rel: &str, what: &str) -> Option<PathBuf> {
    let p = root().join(rel);
    if p.exists() {
        return Some(p);
    }
    if std::env::var("STAUNCH_REQUIRE_EXTERNAL").as_deref() == Ok("1") {
        panic!(
            "{what} is missing at {} (run scripts/setup-tools)",
            p.display()
        );
    }
    eprintln!(
        "SKIPPED: {what} not installed at {} (run scripts/setup-tools)",
        p.display()
    );
    None
}

pub fn python() -> Option<PathBuf> {
    tool(".tools/py/bin/python", "Python mcp client")
}

pub fn node() -> Option<PathBuf> {
    tool(
        ".tools/node22/node_modules/node/bin/node",
        "Node 22 with the TS SDK",
    )
}

pub fn python2() -> Option<PathBuf> {
    tool(".tools/py2/bin/python", "Python mcp 2.x client")
}

/// Node 22, when the TypeScript SDK v2 client is installed beside it.
pub fn node_with_ts2() -> Option<PathBuf> {
    tool(
        ".tools/ts2/node_modules/@modelcontextprotocol/client/package.json",
        "TypeScript SDK v2 client",
    )?;
    node()
}
