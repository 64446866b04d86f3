//! `SIGHUP` reloads `staunch.toml`: a valid file replaces the tools' definitions and adds or
//! removes quick, streaming and atomic tools on the running server (calls in flight keep
//! theirs; open sessions hear `tools/list_changed`); an invalid one is logged and the running
//! configuration stays.

use std::path::{Path, PathBuf};

use staunch_server::Server;

use crate::CommandTools;
use crate::config::ServeFlags;

/// Reloads on SIGHUP: a valid file replaces the tools' definitions and adds or removes
/// quick, streaming and atomic tools on the running server (calls in flight keep theirs; open
/// sessions hear `tools/list_changed`); an invalid one is logged and the running
/// configuration stays.
pub fn reload_on_sighup(
    path: PathBuf,
    tools: CommandTools,
    server: Server,
    flags: impl ServeFlags + Send + 'static,
) {
    #[cfg(unix)]
    tokio::spawn(async move {
        use tokio::signal::unix::{SignalKind, signal};
        let Ok(mut hup) = signal(SignalKind::hangup()) else {
            tracing::warn!("cannot listen for SIGHUP; the configuration will not reload");
            return;
        };
        while hup.recv().await.is_some() {
            reload(&path, &tools, &server, &flags);
        }
    });
}

fn reload(path: &Path, tools: &CommandTools, server: &Server, flags: &dyn ServeFlags) {
    match crate::load(path, flags) {
        Ok(cfg) => {
            let r = tools.reload(&cfg, server);
            tracing::warn!(
                updated = ?r.updated, added = ?r.added, removed = ?r.removed,
                added_need_restart = ?r.added_need_restart,
                shape_changed_need_restart = ?r.shape_changed, conflicts = ?r.conflicts,
                "config.reloaded"
            );
            eprintln!(
                "staunch: reloaded {} ({} tools updated{}{}{}{}{}{})",
                path.display(),
                r.updated.len(),
                list(", added: ", &r.added),
                list(", removed: ", &r.removed),
                list(
                    ", removed job tools (start/get/cancel stay listed until a restart): ",
                    &r.removed_jobs_listed
                ),
                list(
                    ", new job tools (restart to serve): ",
                    &r.added_need_restart
                ),
                list(
                    ", shape changed to or from job (restart to apply): ",
                    &r.shape_changed
                ),
                list(", not served (the name is another tool's): ", &r.conflicts),
            );
        }
        Err(e) => {
            tracing::error!(error = %e, "config.reload_failed: keeping the running configuration");
            eprintln!("staunch: reload failed, keeping the running configuration:\n{e}");
        }
    }
}

fn list(prefix: &str, names: &[String]) -> String {
    if names.is_empty() {
        String::new()
    } else {
        format!("{prefix}{}", names.join(", "))
    }
}
