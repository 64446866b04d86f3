//! The servers under test and how to start each one, over stdio or HTTP on a loopback port.
//!
//! Every server is spawned by the driver itself, so every one is measured the same way: a
//! fresh process per scenario group, stdout a pipe (stdio) or an ephemeral 127.0.0.1 port
//! (HTTP), stderr discarded (the peers' logs are not what is measured).

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use tokio::process::{Child, Command};

/// Which implementation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Staunch,
    /// staunch with `--store :memory:`: HTTP events kept in memory, as the peers keep theirs.
    StaunchMem,
    /// Another staunch build (`--staunch-b`), run as users run it: an A/B comparison of two
    /// builds in one interleaved run, where separate runs differ by more than the change.
    StaunchB,
    Rmcp,
    Ts,
    Python,
    /// rmcp in its stateless mode (`rmcp-peer http PORT --stateless`; stdio is the same peer).
    RmcpStateless,
    /// TypeScript SDK v2 (`@modelcontextprotocol/server` 2.4.0, createMcpHandler).
    Ts2,
    /// Python `mcp` 2.3.0 (MCPServer, stateless_http).
    Python2,
    Bare,
    /// `staunch proxy` in front of the rmcp peer (as users run it: log on, SQLite store):
    /// over stdio `-- rmcp-peer stdio`; over HTTP `--upstream` the rmcp peer's own HTTP.
    Proxy,
    /// The same with `--tool echo=quick --retry-safe`: rmcp's `echo` carries no annotations,
    /// so the proxy answers it on a stored, resumable stream unless told it is safe to run
    /// again; told so, its 2025 answers are plain JSON, nothing stored.
    ProxyRetrySafe,
}

impl Kind {
    pub const ALL: [Kind; 12] = [
        Kind::Staunch,
        Kind::StaunchMem,
        Kind::StaunchB,
        Kind::Rmcp,
        Kind::Ts,
        Kind::Python,
        Kind::RmcpStateless,
        Kind::Ts2,
        Kind::Python2,
        Kind::Bare,
        Kind::Proxy,
        Kind::ProxyRetrySafe,
    ];

    pub fn key(self) -> &'static str {
        match self {
            Kind::Staunch => "staunch",
            Kind::StaunchMem => "staunch-mem",
            Kind::StaunchB => "staunch-b",
            Kind::Rmcp => "rmcp",
            Kind::Ts => "ts",
            Kind::Python => "python",
            Kind::RmcpStateless => "rmcp-stateless",
            Kind::Ts2 => "ts2",
            Kind::Python2 => "python2",
            Kind::Bare => "bare",
            Kind::Proxy => "proxy",
            Kind::ProxyRetrySafe => "proxy-retry-safe",
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            Kind::Staunch => "staunch",
            Kind::StaunchMem => "staunch (--no-log, :memory: store)",
            Kind::StaunchB => "staunch (B build)",
            Kind::Rmcp => "rmcp",
            Kind::Ts => "TS SDK",
            Kind::Python => "Python mcp",
            Kind::RmcpStateless => "rmcp stateless",
            Kind::Ts2 => "TS SDK v2",
            Kind::Python2 => "Python mcp 2",
            Kind::Bare => "bare ceiling",
            Kind::Proxy => "staunch proxy → rmcp",
            Kind::ProxyRetrySafe => "staunch proxy → rmcp (echo --retry-safe)",
        }
    }

    pub fn parse(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.key() == s)
    }

    /// The bare loop only answers `initialize`, `ping`, `tools/list` and `echo`.
    pub fn has_slow_tools(self) -> bool {
        self != Kind::Bare
    }

    /// `staunch proxy` in front of the rmcp peer, either way.
    pub fn is_proxy(self) -> bool {
        matches!(self, Kind::Proxy | Kind::ProxyRetrySafe)
    }
}

/// stdio or Streamable HTTP.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Transport {
    Stdio,
    Http,
}

impl Transport {
    pub fn key(self) -> &'static str {
        match self {
            Transport::Stdio => "stdio",
            Transport::Http => "http",
        }
    }
}

/// Where the programs are.
#[derive(Clone, Debug)]
pub struct Programs {
    pub staunch: PathBuf,
    /// The B build of `staunch-b`.
    pub staunch_b: PathBuf,
    /// What `staunch proxy` speaks to its upstream (`--upstream-protocol`).
    pub proxy_upstream_protocol: String,
    pub rmcp: PathBuf,
    pub bare: PathBuf,
    pub node: PathBuf,
    pub python: PathBuf,
    pub ts_script: PathBuf,
    pub py_script: PathBuf,
    /// Python with mcp 2.x, and the v2 peers' scripts.
    pub python2: PathBuf,
    pub ts2_script: PathBuf,
    pub py2_script: PathBuf,
    /// Extra flags for `staunch serve`, chosen for the load (printed with the results).
    pub staunch_flags: Vec<String>,
    /// Where staunch's default (SQLite file) stores go: a fresh file per process, so no run
    /// sees another's events and nothing is left in the working directory.
    pub scratch: PathBuf,
}

impl Programs {
    fn scratch_store(&self) -> String {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.scratch
            .join(format!("staunch-{n}.db"))
            .display()
            .to_string()
    }

    /// The argv that starts `kind` on `transport` (`port` for HTTP; `upstream_port`: where
    /// the proxy's HTTP upstream listens).
    pub fn argv(
        &self,
        kind: Kind,
        transport: Transport,
        port: u16,
        upstream_port: u16,
    ) -> Vec<String> {
        let p = |p: &PathBuf| p.display().to_string();
        let mut v = match kind {
            Kind::Proxy | Kind::ProxyRetrySafe => {
                let mut v = vec![p(&self.staunch), "proxy".into()];
                v.extend(self.staunch_flags.iter().cloned());
                if kind == Kind::ProxyRetrySafe {
                    v.extend(["--tool".into(), "echo=quick".into(), "--retry-safe".into()]);
                }
                v.extend([
                    "--upstream-protocol".into(),
                    self.proxy_upstream_protocol.clone(),
                ]);
                v.extend(["--store".into(), self.scratch_store()]);
                match transport {
                    Transport::Stdio => v.extend(["--".into(), p(&self.rmcp), "stdio".into()]),
                    Transport::Http => v.extend([
                        "--http".into(),
                        format!("127.0.0.1:{port}"),
                        "--upstream".into(),
                        format!("http://127.0.0.1:{upstream_port}/mcp"),
                    ]),
                }
                return v;
            }
            Kind::Staunch | Kind::StaunchMem | Kind::StaunchB => {
                let bin = if kind == Kind::StaunchB {
                    &self.staunch_b
                } else {
                    &self.staunch
                };
                let mut v = vec![p(bin), "serve".into()];
                v.extend(self.staunch_flags.iter().cloned());
                if kind == Kind::StaunchMem {
                    // The labelled other configuration: no lifecycle log, events in memory.
                    v.push("--no-log".into());
                }
                v.push("--store".into());
                v.push(if kind == Kind::StaunchMem {
                    ":memory:".into()
                } else {
                    self.scratch_store()
                });
                if transport == Transport::Http {
                    v.push("--http".into());
                    v.push(format!("127.0.0.1:{port}"));
                }
                return v;
            }
            Kind::Rmcp => vec![p(&self.rmcp)],
            Kind::Bare => vec![p(&self.bare)],
            Kind::Ts => vec![p(&self.node), p(&self.ts_script)],
            Kind::Python => vec![p(&self.python), p(&self.py_script)],
            Kind::Ts2 => vec![p(&self.node), p(&self.ts2_script)],
            Kind::Python2 => vec![p(&self.python2), p(&self.py2_script)],
            Kind::RmcpStateless => {
                let mut v = vec![p(&self.rmcp)];
                match transport {
                    Transport::Stdio => v.push("stdio".into()),
                    Transport::Http => {
                        v.extend(["http".into(), port.to_string(), "--stateless".into()]);
                    }
                }
                return v;
            }
        };
        match transport {
            Transport::Stdio => v.push("stdio".into()),
            Transport::Http => {
                v.push("http".into());
                v.push(port.to_string());
            }
        }
        v
    }
}

/// A running server process.
pub struct Running {
    pub child: Child,
    pub pid: u32,
    /// Set for HTTP.
    pub port: u16,
    /// The proxy's upstream, when the driver started it (HTTP): held so that it is killed
    /// with the proxy.
    _upstream: Option<Box<Running>>,
}

impl Running {
    /// Whether the process is still alive.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        // kill_on_drop does this too; start_kill makes it explicit and immediate.
        let _ = self.child.start_kill();
    }
}

/// Starts a server. For HTTP, waits until the port accepts connections (at most 30 s). The
/// proxy's HTTP upstream (the rmcp peer) is started first.
pub async fn spawn(
    programs: &Programs,
    kind: Kind,
    transport: Transport,
) -> anyhow::Result<Running> {
    let upstream = if kind.is_proxy() && transport == Transport::Http {
        Some(Box::new(
            start(programs, Kind::Rmcp, transport, 0, None).await?,
        ))
    } else {
        None
    };
    let upstream_port = upstream.as_ref().map_or(0, |u| u.port);
    start(programs, kind, transport, upstream_port, upstream).await
}

async fn start(
    programs: &Programs,
    kind: Kind,
    transport: Transport,
    upstream_port: u16,
    upstream: Option<Box<Running>>,
) -> anyhow::Result<Running> {
    let port = match transport {
        Transport::Stdio => 0,
        Transport::Http => free_port()?,
    };
    let argv = programs.argv(kind, transport, port, upstream_port);
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    // The TS peer resolves its SDK from node_modules next to the script.
    let child = cmd
        .spawn()
        .with_context(|| format!("starting {}", argv.join(" ")))?;
    let pid = child.id().context("no pid")?;
    let mut running = Running {
        child,
        pid,
        port,
        _upstream: upstream,
    };
    if transport == Transport::Http {
        let until = Instant::now() + Duration::from_secs(30);
        loop {
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                break;
            }
            if !running.alive() {
                bail!("{} exited before listening: {}", kind.key(), argv.join(" "));
            }
            if Instant::now() > until {
                bail!("{} did not listen on port {port} within 30 s", kind.key());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    Ok(running)
}

/// An ephemeral loopback port, free at the time of asking.
fn free_port() -> anyhow::Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}
