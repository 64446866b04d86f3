//! The `staunch serve --http` instances under test: started on a fixed loopback port (so a
//! restart comes back where clients expect it), SIGKILLed and restarted, measured (RSS).
//! Each incarnation writes its own lifecycle log, so the checks know which requests a kill
//! explains.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail};
use tokio::process::{Child, Command};

/// Job lease and reaper interval of every instance (short, so that a paused instance loses
/// its leases within a fault's window).
pub const LEASE_MS: u64 = 1500;
pub const REAP_MS: u64 = 500;

/// How the instances keep their state.
#[derive(Clone, Debug)]
pub enum StoreKind {
    /// One SQLite file (one instance).
    Sqlite(PathBuf),
    /// A PostgreSQL database, and the schema of this run.
    Postgres { url: String, schema: String },
}

pub struct Instance {
    pub index: usize,
    pub port: u16,
    child: Option<Child>,
    dir: PathBuf,
    store: StoreKind,
    bin: PathBuf,
    import_db: PathBuf,
    /// Lifecycle logs, one per incarnation, with whether that incarnation was killed.
    pub logs: Vec<(PathBuf, bool)>,
    pub kills: u32,
    /// RSS of the current incarnation once it settled (the baseline its memory is held to).
    pub rss_base_kib: Option<u64>,
}

/// A free loopback port (bound, then released for the instance to take).
fn free_port() -> anyhow::Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

impl Instance {
    pub async fn start(
        index: usize,
        bin: &Path,
        dir: &Path,
        store: &StoreKind,
        import_db: &Path,
    ) -> anyhow::Result<Self> {
        let mut me = Self {
            index,
            port: free_port()?,
            child: None,
            dir: dir.to_path_buf(),
            store: store.clone(),
            bin: bin.to_path_buf(),
            import_db: import_db.to_path_buf(),
            logs: Vec::new(),
            kills: 0,
            rss_base_kib: None,
        };
        me.spawn().await?;
        Ok(me)
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    async fn spawn(&mut self) -> anyhow::Result<()> {
        let log = self
            .dir
            .join(format!("instance-{}-{}.jsonl", self.index, self.logs.len()));
        let mut c = Command::new(&self.bin);
        c.arg("serve")
            .arg("--http")
            .arg(format!("127.0.0.1:{}", self.port))
            .arg("--log-file")
            .arg(&log)
            .arg("--instance-name")
            .arg(format!("chaos-{}", self.index))
            .arg("--import-db")
            .arg(&self.import_db)
            .arg("--job-lease-ms")
            .arg(LEASE_MS.to_string())
            .arg("--job-reap-ms")
            .arg(REAP_MS.to_string())
            .args(["--job-claim-poll-ms", "100", "--job-poll-after-ms", "100"])
            .args(["--poll-after-ms", "150", "--sse-retry-ms", "20"])
            .args(["--cancel-grace-ms", "500", "--drain-timeout-ms", "2000"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        match &self.store {
            StoreKind::Sqlite(p) => {
                c.arg("--store").arg(p);
            }
            StoreKind::Postgres { url, schema } => {
                c.arg("--store").arg(url).arg("--store-schema").arg(schema);
            }
        }
        let child = c.spawn().context("spawning staunch serve")?;
        self.child = Some(child);
        self.logs.push((log, false));
        // Ready when the port answers.
        let until = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            if tokio::net::TcpStream::connect(("127.0.0.1", self.port))
                .await
                .is_ok()
            {
                return Ok(());
            }
            if let Some(c) = self.child.as_mut()
                && let Ok(Some(st)) = c.try_wait()
            {
                bail!("instance {} exited at start: {st}", self.index);
            }
            if tokio::time::Instant::now() > until {
                bail!("instance {} did not listen within 30 s", self.index);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// SIGKILL, then a restart on the same port with the same instance name.
    pub async fn kill_and_restart(&mut self, down_for: Duration) -> anyhow::Result<()> {
        if let Some(mut c) = self.child.take() {
            c.start_kill()?;
            let _ = c.wait().await;
        }
        if let Some(last) = self.logs.last_mut() {
            last.1 = true;
        }
        self.kills += 1;
        tokio::time::sleep(down_for).await;
        self.spawn().await?;
        // The new incarnation's baseline, once it settled, like the first one's.
        tokio::time::sleep(Duration::from_millis(500)).await;
        self.rss_base_kib = self.rss_kib();
        Ok(())
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().and_then(Child::id)
    }

    /// Pauses the process (SIGSTOP) for `d`, then resumes it (SIGCONT): its clock jumps, its
    /// leases lapse, and it wakes up believing it still holds them.
    pub async fn pause(&self, d: Duration) -> anyhow::Result<()> {
        let pid = self
            .pid()
            .and_then(|p| i32::try_from(p).ok())
            .and_then(rustix::process::Pid::from_raw)
            .context("instance not running")?;
        rustix::process::kill_process(pid, rustix::process::Signal::STOP)?;
        tokio::time::sleep(d).await;
        // Resume whatever happens: an instance left stopped would hang the run.
        rustix::process::kill_process(pid, rustix::process::Signal::CONT)?;
        Ok(())
    }

    /// Resident set size in KiB (from /proc).
    pub fn rss_kib(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()?)).ok()?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
    }

    /// SIGTERM and wait (the log is flushed on the way out), SIGKILL after 10 s.
    pub async fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            if let Some(pid) = c
                .id()
                .and_then(|p| i32::try_from(p).ok())
                .and_then(rustix::process::Pid::from_raw)
            {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
            }
            if tokio::time::timeout(Duration::from_secs(10), c.wait())
                .await
                .is_err()
            {
                let _ = c.start_kill();
                let _ = c.wait().await;
            }
        }
    }
}
