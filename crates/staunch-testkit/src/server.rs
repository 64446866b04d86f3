//! [`TestServer`]: what `staunch serve --http 127.0.0.1:0` runs, built in the test's own
//! process — the demo (or conformance) tools, the durable job runtime, a store, the lifecycle
//! log in a file — and served on a loopback port. A test starts one in milliseconds, sets any
//! library setting directly, and reaches the [`Server`] it drives.
//!
//! Settings are the libraries' own defaults (`Config`, `HttpConfig`, `JobConfig`), which the
//! command line's defaults are; a test changes what it is about with [`Setup::config`],
//! [`Setup::http`] and [`Setup::jobs`].

use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

use staunch_jobs::{JobConfig, JobRuntime};
use staunch_server::transport::http::{
    Allow, AuthConfig, AuthMethod, HttpConfig, HttpTransport, ListenerConfig, StaticTokens,
    bind_metrics,
};
use staunch_server::{Config, Context, LifecycleLog, Metrics, Server, ServerBuilder, StateKey};
use tokio_util::sync::CancellationToken;

use crate::http::Endpoint;
use crate::stdio::{LogSource, StdioClient};

/// The tool set served, as `staunch serve --profile` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// Every tool shape, a tool that fails on purpose, and the job tools.
    Demo,
    /// What the official conformance suite calls, with the tasks extension's fixtures.
    Conformance,
    /// No tools but those [`Setup::tools`] adds.
    Empty,
}

/// How a [`TestServer`] is built; [`TestServer::setup`] starts one.
pub struct Setup {
    profile: Profile,
    store: Option<String>,
    schema: Option<String>,
    config: Config,
    http: HttpConfig,
    jobs: JobConfig,
    tools: Vec<Box<dyn FnOnce(ServerBuilder) -> ServerBuilder + Send>>,
    port: u16,
    metrics: bool,
    import_db: Option<std::path::PathBuf>,
}

impl std::fmt::Debug for Setup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Setup")
            .field("profile", &self.profile)
            .field("store", &self.store)
            .finish_non_exhaustive()
    }
}

impl Setup {
    /// The tool set (the demo tools by default).
    pub fn profile(mut self, profile: Profile) -> Self {
        self.profile = profile;
        self
    }

    /// The store's URL (`:memory:`, a SQLite path, `postgres://…`); by default a SQLite file
    /// in the server's own temporary directory.
    pub fn store(mut self, url: impl Into<String>) -> Self {
        self.store = Some(url.into());
        self
    }

    /// With a PostgreSQL store: staunch's tables in this schema (`--store-schema`).
    pub fn schema(mut self, name: impl Into<String>) -> Self {
        self.schema = Some(name.into());
        self
    }

    /// Changes the request core's settings.
    pub fn config(mut self, change: impl FnOnce(&mut Config)) -> Self {
        change(&mut self.config);
        self
    }

    /// Changes the HTTP transport's settings.
    pub fn http(mut self, change: impl FnOnce(&mut HttpConfig)) -> Self {
        change(&mut self.http);
        self
    }

    /// Changes the job runtime's settings.
    pub fn jobs(mut self, change: impl FnOnce(&mut JobConfig)) -> Self {
        change(&mut self.jobs);
        self
    }

    /// Job loops fast enough for tests: a 900 ms lease, heartbeats every 150 ms, the reaper
    /// every 100 ms, claims polled every 50 ms, 100 ms suggested between polls, a 500 ms
    /// cancel grace.
    pub fn fast_jobs(self) -> Self {
        self.jobs(|j| {
            j.lease = Duration::from_millis(900);
            j.heartbeat = Some(Duration::from_millis(150));
            j.reap_interval = Duration::from_millis(100);
            j.claim_poll = Duration::from_millis(50);
            j.poll_after = Duration::from_millis(100);
            j.cancel_grace = Duration::from_millis(500);
        })
    }

    /// Static bearer tokens (`TOKEN NAME` lines, as `--auth-tokens` reads them): each request
    /// carries its token's principal, and a job belongs to its principal, as with
    /// `staunch serve --auth bearer`.
    pub fn bearer(mut self, tokens: &str) -> Self {
        let tokens = StaticTokens::parse(tokens, "the test's tokens").expect("valid tokens");
        self.http.auth = Some(AuthConfig::new(AuthMethod::Bearer(tokens)));
        self.jobs_of_principals()
    }

    /// A job belongs to the authenticated principal that started it, as with `--auth` (for a
    /// test that sets the transport's authentication itself, with [`Setup::http`]).
    pub fn jobs_of_principals(mut self) -> Self {
        self.jobs.principal = Some(Arc::new(|ctx: &Context| ctx.principal().map(String::from)));
        self
    }

    /// Serves on this loopback port (a test that must know its URL before the server starts,
    /// such as an OAuth audience); any free one by default.
    pub fn port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }

    /// Metrics on, for the server and its job runtime, scraped at `GET /metrics` on a loopback
    /// port of their own ([`Running::metrics_port`]), as `staunch serve --metrics` serves them.
    pub fn metrics(mut self) -> Self {
        self.metrics = true;
        self
    }

    /// The SQLite file the demo's `import_rows` writes to (`--import-db`): several instances
    /// given one file count each other's rows.
    pub fn import_db(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        self.import_db = Some(path.into());
        self
    }

    /// Registers more tools (or methods) on the server.
    pub fn tools(
        mut self,
        add: impl FnOnce(ServerBuilder) -> ServerBuilder + Send + 'static,
    ) -> Self {
        self.tools.push(Box::new(add));
        self
    }

    /// Builds the server: its store, job runtime (started) and log.
    async fn build(self) -> Built {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let log_path = dir.path().join("lifecycle.jsonl");
        let store = self
            .store
            .unwrap_or_else(|| dir.path().join("staunch.db").display().to_string());
        let stores = staunch_store::open_in(&store, self.schema.as_deref())
            .await
            .unwrap_or_else(|e| panic!("opening the store {store:?}: {e}"));
        let log = LifecycleLog::file(&log_path).expect("the lifecycle log's file");
        let metrics = if self.metrics {
            Metrics::enabled()
        } else {
            Metrics::disabled()
        };
        let mut builder = Server::builder("staunch", "test")
            .config(self.config)
            .lifecycle_log(log)
            .metrics(metrics.clone())
            .state_key(
                StateKey::shared(stores.sessions.as_ref())
                    .await
                    .expect("the input-state key from the store"),
            );
        let job_config = JobConfig {
            metrics: metrics.clone(),
            ..self.jobs
        };
        let jobs = JobRuntime::new(stores.jobs.clone(), job_config).expect("job settings");
        builder = match self.profile {
            Profile::Demo => {
                // `import_rows` writes beside the jobs in a SQLite store's file, as the binary's
                // demo does; elsewhere into a file of the server's directory.
                let file = store.strip_prefix("sqlite:").unwrap_or(&store);
                let import = match self.import_db {
                    Some(path) => path,
                    None if store.contains("://") || store == ":memory:" => {
                        dir.path().join("import.db")
                    }
                    None => file.into(),
                };
                let db = staunch_demo::jobs::open_import_db(Some(&import))
                    .expect("the import_rows database");
                staunch_demo::demo(builder, Some((&jobs, db)))
            }
            Profile::Conformance => staunch_demo::conformance::register(builder, Some(&jobs)),
            Profile::Empty => builder,
        };
        for add in self.tools {
            builder = add(builder);
        }
        let server = builder.build();
        jobs.start().await.expect("starting the job runtime");
        let metrics_port = if self.metrics {
            let listener = ListenerConfig {
                allow: Allow::loopback(),
                max_connections: self.http.max_connections,
                header_read_timeout: self.http.header_read_timeout,
            };
            let addr = ([127, 0, 0, 1], 0).into();
            let jobs_store = Some(stores.jobs.clone());
            let bound = bind_metrics(
                addr,
                &metrics,
                jobs_store,
                listener,
                server.shutdown_token(),
            )
            .await
            .expect("a loopback port for the metrics");
            Some(bound.port())
        } else {
            None
        };
        Built {
            server,
            jobs,
            stores,
            dir,
            log_path,
            http: self.http,
            metrics_port,
        }
    }

    /// Builds the server and serves it on a loopback port; panics on what a test cannot go on
    /// without (a store that does not open, no port).
    pub async fn start(self) -> TestServer {
        let port = self.port;
        let Built {
            server,
            jobs,
            stores,
            dir,
            log_path,
            http,
            metrics_port,
        } = self.build().await;
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .expect("a loopback port");
        let port = listener.local_addr().expect("its address").port();
        let transport = HttpTransport::new(server.clone(), stores.events, stores.sessions, http)
            .with_store_signals(stores.jobs);
        tokio::spawn(transport.serve(listener));
        let mut running = Running::new(Endpoint { port, log_path }, server, jobs, dir);
        running.metrics_port = metrics_port;
        running
    }

    /// Builds the server and serves one stdio session on an in-memory duplex, as
    /// `staunch serve` does on its stdin and stdout.
    pub async fn stdio(self) -> StdioServer {
        let built = self.build().await;
        let client = StdioClient::serve(built.server.clone(), LogSource::File(built.log_path));
        let mut running = Running::new(client, built.server, built.jobs, built.dir);
        running.metrics_port = built.metrics_port;
        running
    }
}

/// What [`Setup::build`] made.
struct Built {
    server: Server,
    jobs: JobRuntime,
    stores: staunch_store::Stores,
    dir: tempfile::TempDir,
    log_path: std::path::PathBuf,
    http: HttpConfig,
    metrics_port: Option<u16>,
}

/// A server [`Setup`] built, running in the test's process until it is dropped (its shutdown
/// token is cancelled then). It derefs to `C`, the client that drives it.
#[derive(Debug)]
pub struct Running<C> {
    client: C,
    server: Server,
    jobs: JobRuntime,
    shutdown: CancellationToken,
    dir: tempfile::TempDir,
    metrics_port: Option<u16>,
}

/// A server serving Streamable HTTP on loopback, driven through its [`Endpoint`].
pub type TestServer = Running<Endpoint>;

/// A server serving one stdio session on an in-memory duplex, driven through its
/// [`StdioClient`].
pub type StdioServer = Running<StdioClient>;

impl TestServer {
    /// The demo tools with every default, started.
    pub async fn start() -> Self {
        Self::setup().start().await
    }

    /// A server to set up before [`Setup::start`] (or [`Setup::stdio`]).
    pub fn setup() -> Setup {
        Setup {
            profile: Profile::Demo,
            store: None,
            schema: None,
            config: Config::default(),
            http: HttpConfig::default(),
            jobs: JobConfig::default(),
            tools: Vec::new(),
            port: 0,
            metrics: false,
            import_db: None,
        }
    }
}

impl<C> Running<C> {
    fn new(client: C, server: Server, jobs: JobRuntime, dir: tempfile::TempDir) -> Self {
        Self {
            client,
            shutdown: server.shutdown_token(),
            server,
            jobs,
            dir,
            metrics_port: None,
        }
    }

    /// The loopback port of its metrics ([`Setup::metrics`]); panics when they are off.
    pub fn metrics_port(&self) -> u16 {
        self.metrics_port
            .expect("metrics are on only with Setup::metrics")
    }

    /// The server served.
    pub fn server(&self) -> &Server {
        &self.server
    }

    /// Its job runtime.
    pub fn jobs(&self) -> &JobRuntime {
        &self.jobs
    }

    /// The directory of its store (`staunch.db`, where `import_rows` writes too, unless the
    /// store is elsewhere), import database and log.
    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }
}

impl<C> Deref for Running<C> {
    type Target = C;

    fn deref(&self) -> &C {
        &self.client
    }
}

impl<C> std::ops::DerefMut for Running<C> {
    fn deref_mut(&mut self) -> &mut C {
        &mut self.client
    }
}

impl<C> Drop for Running<C> {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};
    use staunch_server::{CallToolResult, ToolError, ToolSpec};

    use super::*;

    /// The kit serves what a test adds, and with the empty profile nothing else.
    #[tokio::test]
    async fn the_empty_profile_serves_only_the_tools_a_test_adds() {
        let mut s = TestServer::setup()
            .profile(Profile::Empty)
            .tools(|b| {
                b.tool(
                    ToolSpec::quick("hello", "Says hello."),
                    |_ctx: Context, _args: Value| async {
                        Ok::<_, ToolError>(CallToolResult::text("hello"))
                    },
                )
            })
            .stdio()
            .await;
        s.initialize("2025-11-25").await;
        s.request(json!(1), "tools/list", json!({})).await;
        let list = s.response(&json!(1)).await;
        let names: Vec<&str> = list["result"]["tools"]
            .as_array()
            .expect("a tool list")
            .iter()
            .filter_map(|t| t["name"].as_str())
            .collect();
        assert_eq!(names, ["hello"], "{list}");
        s.call(json!(2), "hello", json!({}), None).await;
        let answer = s.response(&json!(2)).await;
        assert_eq!(answer["result"]["content"][0]["text"], "hello", "{answer}");
    }
}
