//! `staunch`: serve MCP tools that stop when told; call, probe and audit MCP servers.

// Denied, not forbidden: release_memory.rs asks the allocators to return free memory (glibc's
// `malloc_trim`, jemalloc's `mallctl`), each call with its safety argument; everything else
// stays safe code.
#![deny(unsafe_code)]

mod args;
mod audit_cmd;
mod call;
mod cli;
mod generate;
mod probe_cmd;
mod proxy_cmd;
mod release_memory;
mod serve;
mod serve_args;
mod tools_cmd;
mod traces;

use clap::Parser;

/// jemalloc rather than the C library's allocator: a proxied HTTP call makes about a hundred
/// allocations, and with jemalloc the call costs about 10 % fewer instructions; what a load
/// peak leaves behind is returned as glibc's is (release_memory.rs), and the memory per
/// in-flight call stays within a few percent of glibc's (benches/README.md, "The proxy's
/// overhead").
#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read once when it starts. `tcache_gc_incr_bytes`: each thread's cache
/// is garbage-collected after 4 MiB of allocations instead of 64 KiB. At the default a proxied
/// HTTP call paid about 2 % of its instructions for those collections; the memory per in-flight
/// call and after a load peak stayed the same (benches/README.md, "The proxy's overhead").
/// `_RJEM_MALLOC_CONF` in the environment still overrides it.
// SAFETY: jemalloc reads this symbol as a `const char *` to a NUL-terminated string; a
// reference to a byte array is that pointer, and the bytes end with NUL.
#[allow(unsafe_code)]
#[unsafe(export_name = "_rjem_malloc_conf")]
static MALLOC_CONF: &[u8; 29] = b"tcache_gc_incr_bytes:4194304\0";

/// The exit code of a command that could not do its work (a start-up error, a store that
/// cannot be opened); each command's `--help` lists its own codes besides.
const EXIT_FAILED: i32 = 1;

fn main() {
    let cli = cli::Cli::parse();
    init_diagnostics();
    let code = match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("staunch: error: {}", error_line(&e));
            // A backtrace only when asked for one by the variable meant for errors (not
            // RUST_BACKTRACE, which many set for panics and which would follow every typo).
            if std::env::var_os("RUST_LIB_BACKTRACE").is_some_and(|v| v != "0") {
                eprintln!("{}", e.backtrace());
            }
            EXIT_FAILED
        }
    };
    std::process::exit(code);
}

fn run(cli: cli::Cli) -> anyhow::Result<i32> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let code = runtime.block_on(cli::run(cli));
    // Blocking-pool threads of aborted handlers must not keep the process alive.
    runtime.shutdown_timeout(std::time::Duration::from_millis(200));
    code
}

/// An error and its causes on one line, each said once: a cause whose text the line already
/// holds (an error that prints its source in its own message) is not repeated.
fn error_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        let text = text.trim();
        if text.is_empty() || line.contains(text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(text);
    }
    line
}

/// Diagnostics (not the lifecycle log) go to stderr as JSON lines at `warn` unless `RUST_LOG`
/// says otherwise; a panic in a handler is one line too, since the runtime answers it.
fn init_diagnostics() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .json()
        .with_writer(std::io::stderr)
        .with_env_filter(filter)
        .init();
    std::panic::set_hook(Box::new(|info| {
        tracing::error!(panic = %info, "panic");
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error that prints its source in its own message, as many libraries' errors do.
    #[derive(Debug)]
    struct Repeats(std::io::Error);

    impl std::fmt::Display for Repeats {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "unable to open database file: {}", self.0)
        }
    }

    impl std::error::Error for Repeats {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn an_error_is_one_line_with_each_cause_once() {
        let io = std::io::Error::other("permission denied");
        let e = anyhow::Error::new(Repeats(io)).context("opening the store \"/x.db\"");
        assert_eq!(
            error_line(&e),
            "opening the store \"/x.db\": unable to open database file: permission denied"
        );
        let plain = anyhow::anyhow!("no store").context("staunch jobs");
        assert_eq!(error_line(&plain), "staunch jobs: no store");
    }
}
