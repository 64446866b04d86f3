//! Paths rendered from a call's arguments that staunch itself opens (today only `result_file`)
//! stay inside a root directory (the tool's `cwd`).
//!
//! The arguments come from the client, so `../../etc/passwd`, an absolute path or a symbolic
//! link the command left behind must not make staunch read, and hand back, a file outside the
//! tool's directory. [`inside`] refuses absolute paths and `..` outright (whatever the file
//! system holds), then resolves the joined path and the root (`canonicalize`) and refuses a
//! result that is not under the root: a symbolic link pointing out. What it returns is the
//! resolved path, with no links left to follow, so the caller opens exactly what was checked.

use std::io;
use std::path::{Component, Path, PathBuf};

/// Why a rendered path was refused.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// The path is empty.
    #[error("names no file")]
    Empty,
    /// The path is absolute.
    #[error("is an absolute path")]
    Absolute,
    /// The path has a `..` component.
    #[error("has a `..` component")]
    Parent,
    /// The resolved path is outside the root: a symbolic link points out.
    #[error("leads outside it through a symbolic link")]
    Escapes,
    /// The path does not resolve (most often: no such file).
    #[error("cannot be resolved: {0}")]
    Missing(io::Error),
    /// The root itself does not resolve.
    #[error("the directory cannot be resolved: {0}")]
    Root(io::Error),
}

/// Resolves `rendered` (relative, from a template) inside `root`; the canonical path to open.
pub fn inside(root: &Path, rendered: &Path) -> Result<PathBuf, Refused> {
    if rendered.as_os_str().is_empty() {
        return Err(Refused::Empty);
    }
    for c in rendered.components() {
        match c {
            Component::Prefix(_) | Component::RootDir => return Err(Refused::Absolute),
            Component::ParentDir => return Err(Refused::Parent),
            Component::CurDir | Component::Normal(_) => {}
        }
    }
    let root = root.canonicalize().map_err(Refused::Root)?;
    let path = root
        .join(rendered)
        .canonicalize()
        .map_err(Refused::Missing)?;
    if path.starts_with(&root) {
        Ok(path)
    } else {
        Err(Refused::Escapes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn setup() -> (tempfile::TempDir, PathBuf) {
        let top = tempfile::tempdir().unwrap();
        let root = top.path().join("root");
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::fs::write(root.join("a/b/result.txt"), "inside").unwrap();
        std::fs::write(top.path().join("outside.txt"), "secret").unwrap();
        (top, root)
    }

    #[test]
    fn an_absolute_path_is_refused_even_inside_the_root() {
        let (_top, root) = setup();
        let abs = root.join("a/b/result.txt");
        assert!(matches!(inside(&root, &abs), Err(Refused::Absolute)));
        assert!(matches!(
            inside(&root, Path::new("/etc/passwd")),
            Err(Refused::Absolute)
        ));
    }

    #[test]
    fn a_parent_component_is_refused_even_when_it_comes_back() {
        let (_top, root) = setup();
        for p in [
            "../outside.txt",
            "a/../../outside.txt",
            "a/../a/b/result.txt",
        ] {
            assert!(
                matches!(inside(&root, Path::new(p)), Err(Refused::Parent)),
                "{p}"
            );
        }
    }

    #[test]
    fn a_symlink_pointing_outside_is_refused() {
        let (top, root) = setup();
        symlink(top.path().join("outside.txt"), root.join("link.txt")).unwrap();
        symlink(top.path(), root.join("up")).unwrap();
        assert!(matches!(
            inside(&root, Path::new("link.txt")),
            Err(Refused::Escapes)
        ));
        assert!(matches!(
            inside(&root, Path::new("up/outside.txt")),
            Err(Refused::Escapes)
        ));
    }

    #[test]
    fn a_nested_path_resolves_to_its_canonical_form() {
        let (_top, root) = setup();
        let got = inside(&root, Path::new("./a/b/result.txt")).unwrap();
        assert_eq!(got, root.canonicalize().unwrap().join("a/b/result.txt"));
        assert_eq!(std::fs::read_to_string(got).unwrap(), "inside");
        assert!(matches!(
            inside(&root, Path::new("a/none.txt")),
            Err(Refused::Missing(_))
        ));
        assert!(matches!(inside(&root, Path::new("")), Err(Refused::Empty)));
    }

    #[test]
    fn a_symlink_that_stays_inside_is_followed() {
        let (_top, root) = setup();
        symlink("a/b", root.join("short")).unwrap();
        symlink(root.join("a/b/result.txt"), root.join("abs-link.txt")).unwrap();
        let want = root.canonicalize().unwrap().join("a/b/result.txt");
        assert_eq!(inside(&root, Path::new("short/result.txt")).unwrap(), want);
        assert_eq!(inside(&root, Path::new("abs-link.txt")).unwrap(), want);
        // The root itself reached through a link is still the root.
        let top_link = root.parent().unwrap().join("root-link");
        symlink(&root, &top_link).unwrap();
        assert_eq!(
            inside(&top_link, Path::new("a/b/result.txt")).unwrap(),
            want
        );
    }
}
