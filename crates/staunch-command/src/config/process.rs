//! What a tool runs: its program (found, executable) and the environment it gets (empty but
//! for what the file allows, sets or copies from staunch's own as a secret).

use std::path::{Path, PathBuf};

use toml::Spanned;

use super::EnvPolicy;
use super::error::Errors;
use super::raw::RawTool;

pub(super) fn program(
    p: &Spanned<String>,
    field: &str,
    base: &Path,
    errors: &mut Errors<'_>,
) -> Option<PathBuf> {
    let name = p.get_ref();
    let found = if name.contains('/') {
        let path = base.join(name);
        path.is_file().then_some(path)
    } else if name.is_empty() {
        None
    } else {
        std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join(name))
                .find(|c| c.is_file())
        })
    };
    let Some(path) = found else {
        errors.at(
            p.span(),
            field,
            format!(
                "{name:?} not found ({})",
                if name.contains('/') {
                    format!("looked at {}", base.join(name).display())
                } else {
                    "looked in PATH; give a path with a / to use one relative to this file".into()
                }
            ),
        );
        return None;
    };
    if !is_executable(&path) {
        errors.at(
            p.span(),
            field,
            format!("{} is not executable (chmod +x it)", path.display()),
        );
        return None;
    }
    Some(path)
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.permissions().mode() & 0o111 != 0)
}

fn env_name_ok(n: &str) -> bool {
    !n.is_empty() && !n.contains(['=', '\0']) && !n.starts_with("STAUNCH_")
}

pub(super) fn env(t: &RawTool, label: &str, errors: &mut Errors<'_>) -> EnvPolicy {
    let mut out = EnvPolicy::default();
    let Some(e) = &t.env else {
        return out;
    };
    let bad = "not a variable name (no = or NUL; STAUNCH_* is reserved for staunch)";
    for a in &e.allow {
        if env_name_ok(a.get_ref()) {
            out.allow.push(a.get_ref().clone());
        } else {
            errors.at(a.span(), format!("{label}.env.allow"), bad);
        }
    }
    for (k, v) in &e.set {
        if !env_name_ok(k.get_ref()) || v.get_ref().contains('\0') {
            errors.at(k.span(), format!("{label}.env.set.{}", k.get_ref()), bad);
        } else {
            out.set.push((k.get_ref().clone(), v.get_ref().clone()));
        }
    }
    for (k, from) in &e.secrets {
        let field = format!("{label}.env.secrets.{}", k.get_ref());
        if !env_name_ok(k.get_ref()) {
            errors.at(k.span(), field, bad);
        } else if std::env::var_os(from.get_ref()).is_none() {
            // Named, never shown: the value is nobody's business, its absence is.
            errors.at(
                from.span(),
                field,
                format!(
                    "the secret's source variable {} is not set in staunch's environment",
                    from.get_ref()
                ),
            );
        } else {
            out.secrets
                .push((k.get_ref().clone(), from.get_ref().clone()));
        }
    }
    out
}
