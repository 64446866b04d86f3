//! The server's settings as command-line flags (the `cli` feature): `staunch serve` flattens
//! [`ServerArgs`] into its own flags, and so can any binary that embeds the server.
//!
//! Each setting is defined here once — its flag, environment variable, help text and unit —
//! and its default is the library's own ([`Config::default`], [`HttpConfig::default`]), so a
//! flag left alone and a library user who never heard of it get one value. `staunch.toml`'s
//! `[serve]` table and the book's configuration reference are read from these definitions.
//!
//! ```
//! use clap::Parser;
//! use staunch_server::Server;
//! use staunch_server::cli::ServerArgs;
//!
//! /// my-server: a flag of its own, and every flag of staunch's server.
//! #[derive(Parser)]
//! struct Cli {
//!     /// Serve Streamable HTTP on this address (stdio without it).
//!     #[arg(long)]
//!     http: Option<std::net::SocketAddr>,
//!     #[command(flatten)]
//!     server: ServerArgs,
//! }
//!
//! let cli = Cli::parse_from(["my-server", "--max-in-flight", "64", "--cancel-grace-ms", "1.5s"]);
//! let builder = Server::builder("my-server", "1.0.0").config(cli.server.config());
//! let http = cli.server.http_config(); // for `HttpTransport::new`
//! assert_eq!(cli.server.config().max_in_flight, 64);
//! assert_eq!(http.endpoint, "/mcp"); // a flag left alone: the library's default
//! # drop(builder);
//! ```

mod auth;
pub mod heading;
mod http;
mod limits;
mod parse;
mod request;

use clap::Args;

pub use auth::{AuthArgs, AuthKind, TOKENS_ENV};
pub use http::HttpArgs;
pub use limits::LimitArgs;
pub use parse::{millis, parse_at_least_one, parse_listen_addr, parse_millis, parse_secs, secs};
pub use request::RequestArgs;

use crate::Config;
use crate::transport::http::HttpConfig;

/// Every flag of the server: the request core, the HTTP transport, the limits.
#[derive(Debug, Clone, Args)]
pub struct ServerArgs {
    /// The request core.
    #[command(flatten)]
    pub request: RequestArgs,
    /// The HTTP transport.
    #[command(flatten)]
    pub http: HttpArgs,
    /// Limits and back-pressure.
    #[command(flatten)]
    pub limits: LimitArgs,
}

impl ServerArgs {
    /// The request core's settings.
    pub fn config(&self) -> Config {
        let mut config = Config::default();
        self.request.apply(&mut config);
        config.list_ttl_ms = self.http.list_ttl_ms;
        self.limits.apply_server(&mut config);
        config
    }

    /// The HTTP transport's settings (authentication aside: it reads files).
    pub fn http_config(&self) -> HttpConfig {
        let mut cfg = HttpConfig {
            max_body_bytes: self.request.max_message_bytes,
            ..HttpConfig::default()
        };
        self.http.apply(&mut cfg);
        self.limits.apply_http(&mut cfg);
        cfg
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Flags {
        #[command(flatten)]
        server: ServerArgs,
    }

    fn parse(words: &[&str]) -> ServerArgs {
        Flags::try_parse_from(std::iter::once("serve").chain(words.iter().copied()))
            .expect("flags parse")
            .server
    }

    /// A library user who takes `Config::default()` and `HttpConfig::default()` gets what the
    /// flags give when none is set: each default is one value.
    #[test]
    fn no_flags_give_the_librarys_defaults() {
        let args = parse(&[]);
        assert_eq!(
            format!("{:?}", args.config()),
            format!("{:?}", Config::default())
        );
        assert_eq!(
            format!("{:?}", args.http_config()),
            format!("{:?}", HttpConfig::default())
        );
    }

    /// Each flag reaches its field, in its unit, and a limit of zero means one.
    #[test]
    fn flags_reach_their_settings() {
        let args = parse(&[
            "--cancel-grace-ms=1.5s",
            "--max-message-bytes=1000",
            "--list-ttl-ms=7",
            "--session-idle-secs=2m",
            "--allow-host=example.org",
            "--max-in-flight-per-session=0",
            "--max-connection-backlog=3",
        ]);
        let config = args.config();
        assert_eq!(config.cancel_grace, std::time::Duration::from_millis(1500));
        assert_eq!(config.list_ttl_ms, 7);
        assert_eq!(config.max_in_flight_per_session, 1);
        let http = args.http_config();
        assert_eq!(http.max_body_bytes, 1000);
        assert_eq!(http.session_idle, std::time::Duration::from_secs(120));
        assert_eq!(http.connection_backlog, 3);
        assert!(format!("{:?}", http.allow).contains("example.org"));
        assert!(Flags::try_parse_from(["serve", "--max-in-flight=0"]).is_err());
    }
}
