//! The client on a command line (the `cli` feature): how it connects to a server — the
//! protocol asked for, the headers sent, whether a started server's stderr is shown; flags
//! `staunch call`, `tools` and `probe` share, and any other command built on this client can —
//! and what it shows while a call runs ([`view`]).

pub mod view;

use clap::Args;

use crate::{ConnectOptions, EraChoice, HttpOptions, StderrMode, parse_header};

/// The connection's flags.
#[derive(Debug, Clone, Args)]
pub struct ConnectArgs {
    /// An HTTP header for every request (`Name: value`), e.g. Authorization.
    #[arg(long = "header", value_parser = parse_header)]
    pub headers: Vec<(String, String)>,
    /// The protocol: `auto` (server/discover, then initialize), `2026-07-28`, or a 2025
    /// version (`2025-11-25`, `2025-06-18`, `2025-03-26`).
    #[arg(long, default_value = "auto", value_parser = EraChoice::parse)]
    pub protocol: (EraChoice, Option<String>),
    /// Show the started server's stderr as it is written (by default it is held back).
    #[arg(long)]
    pub server_stderr: bool,
}

impl ConnectArgs {
    /// The options these flags ask for; a started server's stderr is kept (and shown when the
    /// connection fails) unless it is shown as written.
    pub fn options(&self) -> ConnectOptions {
        let (era, session_version) = self.protocol.clone();
        let mut connect = ConnectOptions {
            era,
            stderr: if self.server_stderr {
                StderrMode::Inherit
            } else {
                StderrMode::Capture
            },
            http: HttpOptions {
                headers: self.headers.clone(),
                ..HttpOptions::default()
            },
            ..ConnectOptions::default()
        };
        if let Some(v) = session_version {
            connect.protocol_version = v;
        }
        connect
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Flags {
        #[command(flatten)]
        connect: ConnectArgs,
    }

    #[test]
    fn the_flags_become_the_connection_options() {
        let flags = Flags::try_parse_from([
            "call",
            "--header",
            "Authorization: Bearer t",
            "--protocol",
            "2025-06-18",
        ])
        .unwrap();
        let opts = flags.connect.options();
        assert_eq!(
            opts.http.headers,
            [("Authorization".to_string(), "Bearer t".to_string())]
        );
        assert_eq!(opts.protocol_version, "2025-06-18");
        assert!(matches!(opts.stderr, StderrMode::Capture));
        assert!(Flags::try_parse_from(["call", "--protocol", "2099-01-01"]).is_err());
        assert!(Flags::try_parse_from(["call", "--header", "no-colon"]).is_err());
    }
}
