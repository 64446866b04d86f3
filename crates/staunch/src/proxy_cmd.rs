//! `staunch proxy`: any MCP server behind staunch's guarantees. The downstream side is
//! `staunch serve` (every flag of it applies: `--http`, `--store`, auth, limits, the log);
//! the tools are the upstreams' (crates/staunch-proxy).

use std::ffi::OsString;
use std::path::PathBuf;

use anyhow::{Context as _, bail};
use clap::Args;
use serde_json::Value;
use staunch_proxy::{Target, ToolRule, UpstreamSpec};
use staunch_server::Shape;
use staunch_server::units::parse_duration;

use crate::serve_args::ServeArgs;
use staunch_server::cli::heading::UPSTREAM;

/// Examples and exit codes under `staunch proxy --help`.
pub const PROXY_AFTER_HELP: &str = "\
Examples:
  staunch proxy -- python server.py               a stdio server, served on stdio
  staunch proxy --tool export=job -- npx -y some-mcp-server
                                                  one of its tools as a durable job
  staunch proxy --upstream https://mcp.example/mcp --http 127.0.0.1:8080
                                                  an HTTP server, served over HTTP
  staunch proxy --mcp-servers claude_desktop_config.json
                                                  every server of a client's config

The upstream command goes after `--`; the proxy's own flags and every `serve` flag before it.

Exit status:
  0  shut down cleanly (stdin closed, SIGTERM, Ctrl-C)
  1  failed at start (upstream unreachable, bad value, store unreachable, port in use)
  2  usage error";

#[derive(Debug, Args)]
pub struct ProxyArgs {
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
    #[arg(long, value_name = "GRACE", value_parser = crate::args::parse_duration, help_heading = UPSTREAM)]
    pub kill_after_cancel: Option<std::time::Duration>,
    /// How long a call waits for a 2026-07-28 client's answer to a question the upstream asks
    /// in the middle of it (elicitation, sampling, roots).
    ///
    /// A session-era upstream asks within the call; such a client answers in a request of its
    /// own, so the upstream call waits, parked, until then. Unanswered this long, it is
    /// cancelled upstream.
    #[arg(long, value_name = "WAIT", default_value = "10m", value_parser = parse_question_wait, help_heading = UPSTREAM)]
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
    #[command(flatten)]
    pub serve: ServeArgs,
    /// The upstream command and its arguments (after `--`).
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<OsString>,
}

fn parse_question_wait(s: &str) -> Result<std::time::Duration, String> {
    match crate::args::parse_duration(s)? {
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
fn parse_rule(s: &str) -> anyhow::Result<(Option<String>, String, ToolRule)> {
    let (lhs, rhs) = s
        .split_once('=')
        .with_context(|| format!("--tool {s:?}: expected NAME=SHAPE[:DEADLINE]"))?;
    let (server, name) = match lhs.split_once('/') {
        Some((srv, n)) => (Some(srv.to_string()), n.to_string()),
        None => (None, lhs.to_string()),
    };
    let (shape, deadline) = match rhs.split_once(':') {
        Some((sh, d)) => (sh, Some(parse_duration(d).map_err(anyhow::Error::msg)?)),
        None => (rhs, None),
    };
    let shape = parse_shape(shape).map_err(|e| anyhow::anyhow!("--tool {s:?}: {e}"))?;
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

fn parse_header(h: &str) -> anyhow::Result<(String, String)> {
    let (k, v) = h
        .split_once(':')
        .with_context(|| format!("--header {:?}: expected `Name: value`", redact(h)))?;
    Ok((k.trim().to_string(), v.trim().to_string()))
}

/// A header for messages: its name only.
fn redact(h: &str) -> String {
    match h.split_once(':') {
        Some((k, _)) => format!("{k}: …"),
        None => "…".into(),
    }
}

/// The upstreams the flags describe.
pub fn specs(args: &ProxyArgs) -> anyhow::Result<Vec<UpstreamSpec>> {
    let mut specs = Vec::new();
    match (&args.upstream, args.command.is_empty(), &args.mcp_servers) {
        (Some(_), false, _) => bail!("give either --upstream URL or a command after --, not both"),
        // The configuration file may hold the upstreams ([[upstream]]).
        (None, true, None) if args.serve.config.is_some() => {}
        (None, true, None) => bail!(
            "nothing to proxy: give a command after -- (staunch proxy -- python server.py), \
             --upstream URL, or --mcp-servers FILE"
        ),
        _ => {}
    }
    let headers = args
        .headers
        .iter()
        .map(|h| parse_header(h))
        .collect::<anyhow::Result<Vec<_>>>()?;
    if let Some(url) = &args.upstream {
        specs.push(UpstreamSpec::new(
            args.name.clone(),
            Target::Http {
                url: url.clone(),
                headers,
            },
        ));
    } else if let Some((program, rest)) = args.command.split_first() {
        if !headers.is_empty() {
            bail!("--header is for an HTTP upstream (--upstream URL)");
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
                .with_context(|| format!("--tool {r:?}: no upstream named {srv:?}"))?,
            None if several => bail!("--tool {r:?}: several upstreams; write SERVER/{name}=…"),
            None => &mut specs[0],
        };
        target.tools.insert(name, rule);
    }
    Ok(specs)
}

/// The `mcpServers` object of a client configuration file.
fn import_mcp_servers(file: &std::path::Path) -> anyhow::Result<Vec<UpstreamSpec>> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let doc: Value =
        serde_json::from_str(&text).with_context(|| format!("{} is not JSON", file.display()))?;
    let servers = doc
        .get("mcpServers")
        .or_else(|| doc.get("servers"))
        .and_then(Value::as_object)
        .with_context(|| format!("{}: no \"mcpServers\" object", file.display()))?;
    let several = servers.len() > 1;
    let mut out = Vec::new();
    for (name, s) in servers {
        let target = if let Some(cmd) = s.get("command").and_then(Value::as_str) {
            let args = s["args"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(OsString::from)
                .collect();
            let env = s["env"]
                .as_object()
                .into_iter()
                .flatten()
                .filter_map(|(k, v)| v.as_str().map(|v| (OsString::from(k), OsString::from(v))))
                .collect();
            Target::Stdio {
                program: cmd.into(),
                args,
                env,
                cwd: s["cwd"].as_str().map(PathBuf::from),
            }
        } else if let Some(url) = s
            .get("url")
            .or_else(|| s.get("serverUrl"))
            .and_then(Value::as_str)
        {
            if s["type"].as_str() == Some("sse") {
                bail!(
                    "{name}: the old HTTP+SSE transport (type \"sse\") is not supported; use the server's Streamable HTTP endpoint"
                );
            }
            let headers = s["headers"]
                .as_object()
                .into_iter()
                .flatten()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                .collect();
            Target::Http {
                url: url.to_string(),
                headers,
            }
        } else {
            bail!(
                "{}: server {name:?} has neither \"command\" nor \"url\"",
                file.display()
            );
        };
        let mut spec = UpstreamSpec::new(name.clone(), target);
        if several {
            spec.prefix = format!("{name}_");
        }
        out.push(spec);
    }
    Ok(out)
}

/// `proxy`; `commands` as for [`crate::serve::run`].
pub async fn run(
    args: ProxyArgs,
    commands: Option<crate::command_tools::Loaded>,
) -> anyhow::Result<i32> {
    let specs = specs(&args)?;
    crate::serve::run_with(args.serve, specs, commands).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn durations_take_units_and_refuse_the_rest() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("1500ms"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_duration("45"), Ok(Duration::from_secs(45)));
        assert_eq!(parse_duration("5d"), Ok(Duration::from_secs(5 * 86_400)));
        assert!(parse_duration("soon").is_err());
        assert!(
            parse_duration("5x")
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

    #[test]
    fn mcp_servers_json_becomes_upstreams() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("c.json");
        std::fs::write(
            &f,
            r#"{"mcpServers": {
                "files": {"command": "python", "args": ["s.py"], "env": {"K": "v"}},
                "remote": {"url": "http://127.0.0.1:9/mcp", "headers": {"X-Key": "k"}}
            }}"#,
        )
        .unwrap();
        let specs = import_mcp_servers(&f).unwrap();
        assert_eq!(specs.len(), 2);
        let files = specs.iter().find(|s| s.name == "files").unwrap();
        assert_eq!(files.prefix, "files_");
        match &files.target {
            Target::Stdio {
                program, args, env, ..
            } => {
                assert_eq!(program, "python");
                assert_eq!(args, &[OsString::from("s.py")]);
                assert_eq!(env, &[(OsString::from("K"), OsString::from("v"))]);
            }
            other => panic!("{other:?}"),
        }
        let remote = specs.iter().find(|s| s.name == "remote").unwrap();
        match &remote.target {
            Target::Http { url, headers } => {
                assert_eq!(url, "http://127.0.0.1:9/mcp");
                assert_eq!(headers, &[("X-Key".to_string(), "k".to_string())]);
            }
            other => panic!("{other:?}"),
        }
        std::fs::write(
            &f,
            r#"{"mcpServers": {"old": {"type": "sse", "url": "http://h/sse"}}}"#,
        )
        .unwrap();
        assert!(
            import_mcp_servers(&f)
                .unwrap_err()
                .to_string()
                .contains("not supported")
        );
        std::fs::write(&f, r#"{"other": {}}"#).unwrap();
        assert!(
            import_mcp_servers(&f)
                .unwrap_err()
                .to_string()
                .contains("mcpServers")
        );
    }
}
