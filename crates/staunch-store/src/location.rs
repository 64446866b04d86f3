//! Where the store lives when `--store` is not given: the user's state directory
//! (`$XDG_STATE_HOME/staunch/`, else `~/.local/state/staunch/`), never the caller's working
//! directory — an MCP client starts the server from wherever it runs, often a directory the
//! server cannot or should not write to.
//!
//! The default is written as [`DEFAULT_STORE`] in `--help` and resolved once, when a command
//! opens its store ([`resolve_store`]); the directory is created owner-only (0700), since the
//! store holds job arguments, results and session records.

use std::path::PathBuf;

use crate::StoreError;

/// The `--store` default as `--help` shows it; resolved by [`resolve_store`].
pub const DEFAULT_STORE: &str = "$XDG_STATE_HOME/staunch/staunch.db";

/// `spec` itself, unless it is [`DEFAULT_STORE`]: then the file in the state directory, whose
/// directory is created (0700) when `create` is set.
pub fn resolve_store(spec: &str, create: bool) -> Result<String, StoreError> {
    if spec != DEFAULT_STORE {
        return Ok(spec.to_owned());
    }
    let dir = state_dir()?.join("staunch");
    if create {
        create_private_dir(&dir)?;
    }
    Ok(dir.join("staunch.db").to_string_lossy().into_owned())
}

/// `$XDG_STATE_HOME` when it is an absolute path (the XDG rule: a relative one is ignored),
/// else `$HOME/.local/state`.
fn state_dir() -> Result<PathBuf, StoreError> {
    let from_env = |name: &str| {
        std::env::var_os(name)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    if let Some(dir) = from_env("XDG_STATE_HOME") {
        return Ok(dir);
    }
    match from_env("HOME") {
        Some(home) => Ok(home.join(".local").join("state")),
        None => Err(StoreError::InvalidSpec {
            spec: DEFAULT_STORE.into(),
            reason: "no state directory: neither XDG_STATE_HOME nor HOME is an absolute path; \
                     pass --store PATH (or --store :memory:)"
                .into(),
        }),
    }
}

fn create_private_dir(dir: &std::path::Path) -> Result<(), StoreError> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt as _;
        builder.mode(0o700);
    }
    builder.create(dir).map_err(|e| StoreError::InvalidSpec {
        spec: DEFAULT_STORE.into(),
        reason: format!(
            "creating the state directory {}: {e} (pass --store PATH to keep the store elsewhere)",
            dir.display()
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_explicit_store_is_kept_as_given() {
        for spec in [
            "staunch.db",
            ":memory:",
            "postgres://u@h/db",
            "/var/lib/s.db",
        ] {
            assert_eq!(resolve_store(spec, false).unwrap(), spec);
        }
    }

    #[test]
    fn the_default_lands_in_the_state_directory() {
        // The environment is read, not changed (tests run in parallel threads): compare with
        // what this process's environment says.
        let resolved = resolve_store(DEFAULT_STORE, false).unwrap();
        assert!(resolved.ends_with("/staunch/staunch.db"), "{resolved}");
        assert!(PathBuf::from(&resolved).is_absolute(), "{resolved}");
        if let Some(xdg) = std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
            assert!(resolved.starts_with(&*xdg.to_string_lossy()), "{resolved}");
        }
    }
}
