//! The flags that describe `staunch proxy`'s upstreams (the `cli` feature): where each is (a
//! command, a URL, a client's `mcpServers` file), how its tools are shaped, how it is stopped.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::Args;
use staunch_server::Shape;
use staunch_server::cli::heading::UPSTREAM;
use staunch_server::units::{format_duration, parse_duration};

use crate::import::{described, import_mcp_servers};
use crate::{ProxyError, QUESTION_WAIT, Target, ToolRule, UpstreamSpec};

/// The flags that describe the upstreams of `staunch proxy`.
#[derive(Debug, Clone, Args)]
pub struct UpstreamArgs {
    /// A Streamable HTTP upstream (either protocol era), instead of a command after `--`.
    ///
    /// http:// or https://; https trusts the system's roots or SSL_CERT_FILE.
    #[arg(long, value_name = "URL", env = "STAUNCH_UPSTREAM", help_heading = UPSTREAM)]
    pub upstream: Option<String>,
    /// A header sent to the HTTP upstream with every request (`Name: value`; repeatable).
    ///
    /// E.g. its credentials. Values are never logged.
    #[arg(long = "header", value_name = "NAME: VALUE", help_heading = UPSTREAM)]
    pub headers: Vec<String>,
    /// The upstream's name in logs and errors.
    #[arg(long = "name", default_value = "upstream", value_name = "NAME", help_heading = UPSTREAM)]
    pub name: String,
    /// Prepended to every upstream tool and prompt name.
    #[arg(long, default_value = "", value_name = "PREFIX", help_heading = UPSTREAM)]
    pub prefix: String,
    /// The shape of upstream tools without a `--tool` rule: quick, streaming, atomic or job.
    ///
    /// quick: deadline --quick-deadline-ms, shorter than a client's usual 60 s timeout;
    /// atomic: cancels never forwarded; job: durable, needs the store.
    #[arg(long, default_value = "quick", value_parser = parse_shape, value_name = "SHAPE", help_heading = UPSTREAM)]
    pub default_shape: Shape,
    /// A rule for one upstream tool, e.g. `export=job`, `search=streaming:10m`. Repeatable.
    ///
    /// `NAME=SHAPE[:DEADLINE]` (`write_row=atomic`); with --mcp-servers, `SERVER/NAME=…`.
    #[arg(long = "tool", value_name = "NAME=SHAPE[:DEADLINE]", help_heading = UPSTREAM)]
    pub tools: Vec<String>,
    /// The tools given with --tool are safe to run again (`retry_safe`).
    ///
    /// A job-shaped one runs again after an instance died instead of ending
    /// `failed(lease_lost)`; any other is served with `idempotentHint` (its token-less 2025
    /// answers go out as plain JSON, not on a stored, resumable stream).
    #[arg(long, help_heading = UPSTREAM)]
    pub retry_safe: bool,
    /// One upstream connection (process) per downstream session instead of one shared.
    #[arg(long, help_heading = UPSTREAM)]
    pub isolate: bool,
    /// The stop policy, for an upstream command that ignores cancels: each call runs in an
    /// upstream process of its own, and when a call is cancelled its process gets GRACE to
    /// exit after its stdin closes, then its process group is killed.
    ///
    /// Logged (`upstream.stopped`) and counted (`staunch_upstream_stopped_total`). A process
    /// serves one call only, so no other call is hit. Costs a process start per call. With
    /// --isolate, each session's process serves its calls and is the one stopped (then
    /// replaced for the session's next call), unless it serves another call in flight.
    #[arg(long, value_name = "GRACE", value_parser = parse_duration, help_heading = UPSTREAM)]
    pub kill_after_cancel: Option<std::time::Duration>,
    /// How long a call waits for a 2026-07-28 client's answer to a question the upstream asks
    /// in the middle of it (elicitation, sampling, roots).
    ///
    /// A session-era upstream asks within the call; such a client answers in a request of its
    /// own, so the upstream call waits, parked, until then. Unanswered this long, it is
    /// cancelled upstream.
    #[arg(long, value_name = "WAIT", default_value = format_duration(QUESTION_WAIT), value_parser = parse_question_wait, help_heading = UPSTREAM)]
    pub question_wait: std::time::Duration,
    /// The protocol spoken to the upstream: auto, a session-era version, or 2026-07-28.
    ///
    /// auto: `server/discover`, then `initialize` for a server that does not speak
    /// 2026-07-28. A session-era version is 2025-11-25 or an earlier one. Both eras are
    /// served downstream either way.
    #[arg(long, value_name = "PROTOCOL", default_value = "auto", value_parser = parse_protocol, help_heading = UPSTREAM)]
    pub upstream_protocol: String,
    /// Import a client's `mcpServers` JSON: every server in it becomes an upstream.
    ///
    /// Claude Desktop, Cursor and VS Code style; with several servers, each server's tools get
    /// the prefix `NAME_`.
    #[arg(long, value_name = "FILE", help_heading = UPSTREAM)]
    pub mcp_servers: Option<PathBuf>,
}

impl UpstreamArgs {
    /// The upstreams the flags describe, with `command` (the words after `--`); `in_file`: the
    /// configuration file (`[[upstream]]`) may describe them instead.
    pub fn specs(
        &self,
        command: &[OsString],
        in_file: bool,
    ) -> Result<Vec<UpstreamSpec>, ProxyError> {
        let args = self;
        let mut specs = Vec::new();
        match (&args.upstream, command.is_empty(), &args.mcp_servers) {
            (Some(_), false, _) => {
                return Err(described(
                    "give either --upstream URL or a command after --, not both".into(),
                ));
            }
            (None, true, None) if in_file => {}
            (None, true, None) => {
                return Err(described(
                "nothing to proxy: give a command after -- (staunch proxy -- python server.py), \
                 --upstream URL, or --mcp-servers FILE"
                    .into(),
            ));
            }
            _ => {}
        }
        let headers = args
            .headers
            .iter()
            .map(|h| parse_header(h))
            .collect::<Result<Vec<_>, _>>()?;
        if let Some(url) = &args.upstream {
            specs.push(UpstreamSpec::new(
                args.name.clone(),
                Target::Http {
                    url: url.clone(),
                    headers,
                },
            ));
        } else if let Some((program, rest)) = command.split_first() {
            if !headers.is_empty() {
                return Err(described(
                    "--header is for an HTTP upstream (--upstream URL)".into(),
                ));
            }
            specs.push(UpstreamSpec::new(
                args.name.clone(),
                Target::Stdio {
                    program: program.clone(),
                    args: rest.to_vec(),
                    env: Vec::new(),
                    cwd: None,
                },
            ));
        }
        if let Some(file) = &args.mcp_servers {
            specs.extend(import_mcp_servers(file)?);
        }
        let several = specs.len() > 1;
        for s in &mut specs {
            s.default_shape = args.default_shape;
            s.isolate = args.isolate;
            s.kill_after_cancel = args.kill_after_cancel;
            s.question_wait = args.question_wait;
            s.protocol = (args.upstream_protocol != "auto").then(|| args.upstream_protocol.clone());
            if !args.prefix.is_empty() && !several {
                s.prefix = args.prefix.clone();
            }
        }
        for r in &args.tools {
            let (server, name, mut rule) = parse_rule(r)?;
            rule.retry_safe = args.retry_safe;
            let target = match &server {
                Some(srv) => specs
                    .iter_mut()
                    .find(|s| &s.name == srv)
                    .ok_or_else(|| described(format!("--tool {r:?}: no upstream named {srv:?}")))?,
                None if several => {
                    return Err(described(format!(
                        "--tool {r:?}: several upstreams; write SERVER/{name}=…"
                    )));
                }
                None => &mut specs[0],
            };
            target.tools.insert(name, rule);
        }
        Ok(specs)
    }
}

fn parse_question_wait(s: &str) -> Result<std::time::Duration, String> {
    match parse_duration(s)? {
        d if d.is_zero() => Err("must be longer than 0 (0 would give up every question)".into()),
        d => Ok(d),
    }
}

fn parse_protocol(s: &str) -> Result<String, String> {
    staunch_client::EraChoice::parse(s).map(|_| s.trim().to_string())
}

fn parse_shape(s: &str) -> Result<Shape, String> {
    Ok(match s {
        "quick" => Shape::Quick,
        "streaming" => Shape::Streaming,
        "atomic" => Shape::Atomic,
        "job" => Shape::Job,
        other => {
            return Err(format!(
                "unknown shape {other:?}: quick, streaming, atomic or job"
            ));
        }
    })
}

/// `[SERVER/]NAME=SHAPE[:DEADLINE]`.
fn parse_rule(s: &str) -> Result<(Option<String>, String, ToolRule), ProxyError> {
    let (lhs, rhs) = s
        .split_once('=')
        .ok_or_else(|| described(format!("--tool {s:?}: expected NAME=SHAPE[:DEADLINE]")))?;
    let (server, name) = match lhs.split_once('/') {
        Some((srv, n)) => (Some(srv.to_string()), n.to_string()),
        None => (None, lhs.to_string()),
    };
    let (shape, deadline) = match rhs.split_once(':') {
        Some((sh, d)) => (
            sh,
            Some(parse_duration(d).map_err(|e| described(format!("--tool {s:?}: {e}")))?),
        ),
        None => (rhs, None),
    };
    let shape = parse_shape(shape).map_err(|e| described(format!("--tool {s:?}: {e}")))?;
    Ok((
        server,
        name,
        ToolRule {
            shape: Some(shape),
            deadline,
            ..ToolRule::default()
        },
    ))
}

/// `--header NAME: VALUE` (the client's grammar; a refusal does not echo the value).
fn parse_header(h: &str) -> Result<(String, String), ProxyError> {
    staunch_client::parse_header(h).map_err(|e| described(format!("--header: {e}")))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn durations_take_units_and_refuse_the_rest() {
        assert_eq!(
            staunch_server::units::parse_duration("30s"),
            Ok(Duration::from_secs(30))
        );
        assert_eq!(
            staunch_server::units::parse_duration("1500ms"),
            Ok(Duration::from_millis(1500))
        );
        assert_eq!(
            staunch_server::units::parse_duration("5m"),
            Ok(Duration::from_secs(300))
        );
        assert_eq!(
            staunch_server::units::parse_duration("2h"),
            Ok(Duration::from_secs(7200))
        );
        assert_eq!(
            staunch_server::units::parse_duration("45"),
            Ok(Duration::from_secs(45))
        );
        assert_eq!(
            staunch_server::units::parse_duration("5d"),
            Ok(Duration::from_secs(5 * 86_400))
        );
        assert!(staunch_server::units::parse_duration("soon").is_err());
        assert!(
            staunch_server::units::parse_duration("5x")
                .unwrap_err()
                .contains("is not a duration")
        );
    }

    #[test]
    fn rules_name_an_optional_server_a_tool_a_shape_and_a_deadline() {
        let (srv, name, rule) = parse_rule("files/export=job:30m").unwrap();
        assert_eq!(srv.as_deref(), Some("files"));
        assert_eq!(name, "export");
        assert_eq!(rule.shape, Some(Shape::Job));
        assert_eq!(rule.deadline, Some(Duration::from_secs(1800)));
        let (srv, name, rule) = parse_rule("write_row=atomic").unwrap();
        assert_eq!(
            (srv, name.as_str(), rule.shape),
            (None, "write_row", Some(Shape::Atomic))
        );
        assert!(parse_rule("export").is_err());
        assert!(
            parse_rule("export=jobb")
                .unwrap_err()
                .to_string()
                .contains("unknown shape")
        );
    }

    #[test]
    fn a_header_without_a_colon_is_refused_without_echoing_its_value() {
        assert_eq!(
            parse_header("Authorization: Bearer abc").unwrap(),
            ("Authorization".into(), "Bearer abc".into())
        );
        let e = parse_header("Bearer-secret-token").unwrap_err().to_string();
        assert!(!e.contains("secret"), "{e}");
    }
}
