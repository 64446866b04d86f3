//! Finding the real MCP clients that `scripts/setup-tools` installs into `.tools/`: the kit's
//! locators (`staunch_testkit::peers`).

pub use staunch_testkit::peers::{installed as tool, node, node_with_ts2, python, python2};

pub fn root() -> std::path::PathBuf {
    staunch_testkit::peers::workspace_root()
}
