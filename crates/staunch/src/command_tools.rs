//! `staunch serve --config staunch.toml`: the loaded file (its `[serve]` table is applied in
//! `serve_table`), reloading the tools on SIGHUP and sweeping away processes a dead staunch
//! left behind.

use std::path::{Path, PathBuf};
use std::time::Duration;

use staunch_command::{CommandConfig, CommandTools};

/// How often the orphan sweep runs while serving.
const SWEEP_EVERY: Duration = Duration::from_secs(30);

/// The loaded configuration (whether the demo tools are served next to it is
/// `--demo-tools`, which its `[serve]` table may set).
pub struct Loaded {
    pub path: PathBuf,
    pub config: CommandConfig,
}

impl Loaded {
    pub fn has_job_tools(&self) -> bool {
        self.config
            .tools
            .iter()
            .any(|t| t.shape == staunch_server::Shape::Job)
    }
}

/// Reloads on SIGHUP: a valid file replaces the tools' definitions and adds or removes
/// quick, streaming and atomic tools on the running server (calls in flight keep theirs; open
/// sessions hear `tools/list_changed`); an invalid one is logged and the running
/// configuration stays.
pub fn reload_on_sighup(path: PathBuf, tools: CommandTools, server: staunch_server::Server) {
    #[cfg(unix)]
    tokio::spawn(async move {
        use tokio::signal::unix::{SignalKind, signal};
        let Ok(mut hup) = signal(SignalKind::hangup()) else {
            tracing::warn!("cannot listen for SIGHUP; the configuration will not reload");
            return;
        };
        while hup.recv().await.is_some() {
            reload(&path, &tools, &server);
        }
    });
}

fn reload(path: &Path, tools: &CommandTools, server: &staunch_server::Server) {
    match staunch_command::load(path, &crate::serve_args::settable_flags()) {
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

/// Ends processes a dead staunch left behind, now and every [`SWEEP_EVERY`].
pub fn sweep_orphans_periodically() {
    let found = staunch_command::sweep::sweep_orphans();
    if !found.is_empty() {
        eprintln!(
            "staunch: killed {} process(es) left behind by a staunch that died: {found:?}",
            found.len()
        );
    }
    tokio::spawn(async {
        let mut tick = tokio::time::interval(SWEEP_EVERY);
        tick.tick().await;
        loop {
            tick.tick().await;
            staunch_command::sweep::sweep_orphans();
        }
    });
}
