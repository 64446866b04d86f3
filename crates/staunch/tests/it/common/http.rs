//! `staunch serve --http 127.0.0.1:0` (or `staunch proxy`) in a process of its own, driven by
//! the test kit's raw Streamable HTTP driver ([`Endpoint`], which it derefs to).

use std::process::Stdio;
use std::time::Duration;

pub use staunch_testkit::http::{
    Endpoint, Resp, call, ended, progress_values, responses, rpc, stateless, tool_structured,
};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// A spawned server and its temporary directory (store, lifecycle log).
pub struct HttpServer {
    pub child: Child,
    pub dir: tempfile::TempDir,
    endpoint: Endpoint,
}

impl HttpServer {
    /// A server already spawned, listening on `port` and logging to `log_path`.
    pub fn of(
        child: Child,
        dir: tempfile::TempDir,
        port: u16,
        log_path: std::path::PathBuf,
    ) -> Self {
        Self {
            child,
            dir,
            endpoint: Endpoint { port, log_path },
        }
    }

    /// Starts `staunch serve --http 127.0.0.1:0` with a SQLite store in a temp dir.
    pub async fn start(extra: &[&str]) -> Self {
        Self::start_on(None, extra).await
    }

    /// Starts the server on a given store (`None`: a SQLite file in a temp dir).
    pub async fn start_on(store: Option<&str>, extra: &[&str]) -> Self {
        Self::launch_with_env("serve", store, extra, &[]).await
    }

    /// Like [`Self::start_on`], with environment variables for the server.
    pub async fn start_with_env(store: Option<&str>, extra: &[&str], env: &[(&str, &str)]) -> Self {
        Self::launch_with_env("serve", store, extra, env).await
    }

    /// Starts `staunch SUB --http 127.0.0.1:0 …` (`serve`, or `proxy` with its upstream after
    /// `--` at the end of `extra`).
    pub async fn launch(sub: &str, store: Option<&str>, extra: &[&str]) -> Self {
        Self::launch_with_env(sub, store, extra, &[]).await
    }

    /// [`Self::launch`] with environment variables for the server.
    pub async fn launch_with_env(
        sub: &str,
        store: Option<&str>,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let log_path = dir.path().join("lifecycle.jsonl");
        let store = match store {
            Some(s) => s.to_string(),
            None => dir.path().join("staunch.db").display().to_string(),
        };
        let mut child = Command::new(super::BIN)
            .args([sub, "--http", "127.0.0.1:0", "--log-file"])
            .arg(&log_path)
            .arg("--store")
            .arg(&store)
            .args(extra)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn staunch");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let port = tokio::time::timeout(Duration::from_secs(20), async {
            while let Ok(Some(l)) = lines.next_line().await {
                // `staunch proxy` names its upstream's URL first: the serving line counts.
                if !l.contains("serving MCP") {
                    continue;
                }
                if let Some(rest) = l.split("http://127.0.0.1:").nth(1) {
                    return rest.split('/').next().unwrap().parse::<u16>().unwrap();
                }
            }
            panic!("server exited before listening");
        })
        .await
        .expect("server listens");
        // Keep draining stderr so the server never blocks on it.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Self::of(child, dir, port, log_path)
    }
}

impl std::ops::Deref for HttpServer {
    type Target = Endpoint;

    fn deref(&self) -> &Endpoint {
        &self.endpoint
    }
}
