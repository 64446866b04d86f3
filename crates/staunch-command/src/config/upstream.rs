//! `[[upstream]]`: the servers `staunch proxy` (and `staunch serve --config`) fronts, and the
//! shape of each of their tools. Validated like the rest of the file: every mistake with its
//! line and field (`upstream[0] "files".tools.export.shape`).
//!
//! ```toml
//! [[upstream]]
//! name = "files"
//! command = ["python", "server.py", "stdio"]     # or: url = "https://…/mcp"
//! prefix = "files_"
//! header_env = { Authorization = "FILES_AUTH" }  # HTTP: header values from the environment
//! default_shape = "quick"
//! isolate = false
//! protocol = "auto"                              # or "2025-11-25", "2026-07-28"
//! kill_after_cancel = "2s"   # the stop policy (command upstreams): a process per call,
//!                            # its group killed if still running this long after a cancel
//! question_wait = "10m"      # how long a call waits, parked, for a 2026-07-28 client's
//!                            # answer to the upstream's question (default 10m)
//! [upstream.tools.export]
//! shape = "job"
//! deadline = "30m"
//! ```

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use staunch_server::Shape;
use toml::Spanned;

use super::error::Errors;
use super::units;
use super::units::NumOrText;

/// One `[[upstream]]` as written.
#[derive(Debug, Deserialize)]
pub(super) struct RawUpstream {
    pub name: Spanned<String>,
    pub command: Option<Spanned<Vec<String>>>,
    pub url: Option<Spanned<String>>,
    #[serde(default)]
    pub headers: BTreeMap<String, Spanned<String>>,
    #[serde(default)]
    pub header_env: BTreeMap<String, Spanned<String>>,
    #[serde(default)]
    pub env: BTreeMap<String, Spanned<String>>,
    pub cwd: Option<Spanned<String>>,
    pub prefix: Option<Spanned<String>>,
    pub default_shape: Option<Spanned<String>>,
    pub isolate: Option<Spanned<bool>>,
    pub protocol: Option<Spanned<String>>,
    pub kill_after_cancel: Option<Spanned<NumOrText>>,
    pub question_wait: Option<Spanned<NumOrText>>,
    #[serde(default)]
    pub tools: BTreeMap<String, Spanned<RawUpstreamTool>>,
}

/// `[upstream.tools.NAME]` as written.
#[derive(Debug, Deserialize)]
pub(super) struct RawUpstreamTool {
    pub shape: Option<Spanned<String>>,
    pub deadline: Option<Spanned<NumOrText>>,
    pub retry_safe: Option<Spanned<bool>>,
    pub side_effects: Option<Spanned<bool>>,
    pub kill_after_cancel: Option<Spanned<NumOrText>>,
}

/// Where an upstream is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpstreamTarget {
    /// A stdio command (argv), with extra environment and a working directory.
    Command {
        /// The program and its arguments.
        argv: Vec<String>,
        /// Variables set on top of staunch's environment.
        env: Vec<(String, String)>,
        /// Working directory, relative to the config file's directory; staunch's own when None.
        cwd: Option<PathBuf>,
    },
    /// A Streamable HTTP URL, with headers (values resolved from the environment at load).
    Url {
        /// The MCP endpoint, an http(s) URL.
        url: String,
        /// Sent with every request; `header_env` values are already read from the environment.
        headers: Vec<(String, String)>,
    },
}

/// The shape of one upstream tool.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UpstreamToolRule {
    /// Its shape; the upstream's `default_shape` when None.
    pub shape: Option<Shape>,
    /// Its deadline; the server's default for the shape when None.
    pub deadline: Option<Duration>,
    /// Running it again is harmless (default false).
    pub retry_safe: bool,
    /// Job tools: whether it changes anything (default true).
    pub side_effects: Option<bool>,
    /// The stop policy's grace for this tool (the upstream's when `None`).
    pub kill_after_cancel: Option<Duration>,
}

/// A validated `[[upstream]]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamConfig {
    /// Names the upstream in logs and errors; unique in the file.
    pub name: String,
    /// A command (stdio) or a URL.
    pub target: UpstreamTarget,
    /// Put before each of its tool and prompt names (empty: none).
    pub prefix: String,
    /// The shape of its tools that have no rule (default quick).
    pub default_shape: Shape,
    /// One connection (process) per downstream session instead of one shared.
    pub isolate: bool,
    /// The protocol spoken to it (`None`: auto).
    pub protocol: Option<String>,
    /// The stop policy (command upstreams only): each call in a process of its own, whose
    /// group is killed if it still runs this long after the call's cancel.
    pub kill_after_cancel: Option<Duration>,
    /// How long a call waits, parked, for a 2026-07-28 client's answer to the upstream's
    /// question (`None`: the proxy's default).
    pub question_wait: Option<Duration>,
    /// Per-tool rules (`[upstream.tools.NAME]`), by the upstream's own tool name.
    pub tools: BTreeMap<String, UpstreamToolRule>,
}

/// A stop policy's grace: a duration; 0 is allowed (killed at once after the cancel).
fn grace(
    d: Option<&Spanned<NumOrText>>,
    field: String,
    errors: &mut Errors<'_>,
) -> Option<Duration> {
    let d = d?;
    match units::duration(d.get_ref()) {
        Ok(v) => Some(v),
        Err(m) => {
            errors.at(d.span(), field, m);
            None
        }
    }
}

/// A duration that must be longer than 0 (`zero` says why).
fn longer_than_zero(
    d: Option<&Spanned<NumOrText>>,
    field: String,
    zero: &str,
    errors: &mut Errors<'_>,
) -> Option<Duration> {
    let d = d?;
    match units::duration(d.get_ref()) {
        Ok(v) if v.is_zero() => {
            errors.at(d.span(), field, zero);
            None
        }
        Ok(v) => Some(v),
        Err(m) => {
            errors.at(d.span(), field, m);
            None
        }
    }
}

fn shape(s: &Spanned<String>, field: String, errors: &mut Errors<'_>) -> Option<Shape> {
    Some(match s.get_ref().as_str() {
        "quick" => Shape::Quick,
        "streaming" => Shape::Streaming,
        "atomic" => Shape::Atomic,
        "job" => Shape::Job,
        other => {
            errors.at(
                s.span(),
                field,
                format!("{other:?} is not a shape: quick, streaming, job or atomic"),
            );
            return None;
        }
    })
}

/// Validates every `[[upstream]]`; `env` looks up `header_env` values.
pub(crate) fn upstreams(
    raw: &[Spanned<RawUpstream>],
    base: &Path,
    env: &dyn Fn(&str) -> Option<String>,
    errors: &mut Errors<'_>,
) -> Vec<UpstreamConfig> {
    let mut out = Vec::new();
    let mut names = HashSet::new();
    for (i, u) in raw.iter().enumerate() {
        let u_ref = u.get_ref();
        let label = format!("upstream[{i}] {:?}", u_ref.name.get_ref());
        let f = |field: &str| format!("{label}.{field}");
        let before = errors.list.len();
        let name = u_ref.name.get_ref().trim().to_string();
        if name.is_empty() {
            errors.at(u_ref.name.span(), f("name"), "an upstream needs a name");
        } else if !names.insert(name.clone()) {
            errors.at(
                u_ref.name.span(),
                f("name"),
                format!("the upstream name {name:?} is taken"),
            );
        }
        let target = match (&u_ref.command, &u_ref.url) {
            (Some(c), None) if c.get_ref().is_empty() || c.get_ref()[0].is_empty() => {
                errors.at(
                    c.span(),
                    f("command"),
                    "the command needs at least a program",
                );
                None
            }
            (Some(c), None) => {
                if !u_ref.headers.is_empty() || !u_ref.header_env.is_empty() {
                    errors.at(u.span(), f("headers"), "headers are for a url upstream");
                }
                Some(UpstreamTarget::Command {
                    argv: c.get_ref().clone(),
                    env: u_ref
                        .env
                        .iter()
                        .map(|(k, v)| (k.clone(), v.get_ref().clone()))
                        .collect(),
                    cwd: u_ref.cwd.as_ref().map(|d| base.join(d.get_ref())),
                })
            }
            (None, Some(url)) => {
                let text = url.get_ref();
                if !(text.starts_with("http://") || text.starts_with("https://")) {
                    errors.at(
                        url.span(),
                        f("url"),
                        format!("{text:?} is not an http(s) URL"),
                    );
                }
                if !u_ref.env.is_empty() || u_ref.cwd.is_some() {
                    errors.at(u.span(), f("env"), "env and cwd are for a command upstream");
                }
                let mut headers: Vec<(String, String)> = u_ref
                    .headers
                    .iter()
                    .map(|(k, v)| (k.clone(), v.get_ref().clone()))
                    .collect();
                for (k, var) in &u_ref.header_env {
                    match env(var.get_ref()) {
                        Some(v) => headers.push((k.clone(), v)),
                        None => errors.at(
                            var.span(),
                            f(&format!("header_env.{k}")),
                            format!("the environment variable {:?} is not set", var.get_ref()),
                        ),
                    }
                }
                Some(UpstreamTarget::Url {
                    url: text.clone(),
                    headers,
                })
            }
            (Some(_), Some(url)) => {
                errors.at(url.span(), f("url"), "give either command or url, not both");
                None
            }
            (None, None) => {
                errors.at(
                    u_ref.name.span(),
                    f("command"),
                    "give a command (a stdio server) or a url",
                );
                None
            }
        };
        let default_shape = u_ref
            .default_shape
            .as_ref()
            .and_then(|s| shape(s, f("default_shape"), errors))
            .unwrap_or(Shape::Quick);
        let protocol = u_ref.protocol.as_ref().and_then(|p| {
            match staunch_server::protocol::version::parse_choice(p.get_ref()) {
                Ok(choice) => choice.map(str::to_string),
                Err(why) => {
                    errors.at(p.span(), f("protocol"), why);
                    None
                }
            }
        });
        let kill_after_cancel = grace(
            u_ref.kill_after_cancel.as_ref(),
            f("kill_after_cancel"),
            errors,
        );
        let question_wait = longer_than_zero(
            u_ref.question_wait.as_ref(),
            f("question_wait"),
            "a question_wait of 0 would give up every question at once",
            errors,
        );
        let mut stop_policy_at = u_ref
            .kill_after_cancel
            .as_ref()
            .map(|d| (d.span(), f("kill_after_cancel")));
        let mut tools = BTreeMap::new();
        for (tool, rule) in &u_ref.tools {
            let r = rule.get_ref();
            let tf = |field: &str| f(&format!("tools.{tool}.{field}"));
            let deadline = longer_than_zero(
                r.deadline.as_ref(),
                tf("deadline"),
                "a deadline of 0 would stop every call at once",
                errors,
            );
            tools.insert(
                tool.clone(),
                UpstreamToolRule {
                    shape: r.shape.as_ref().and_then(|s| shape(s, tf("shape"), errors)),
                    deadline,
                    retry_safe: r.retry_safe.as_ref().is_some_and(|v| *v.get_ref()),
                    side_effects: r.side_effects.as_ref().map(|v| *v.get_ref()),
                    kill_after_cancel: grace(
                        r.kill_after_cancel.as_ref(),
                        tf("kill_after_cancel"),
                        errors,
                    ),
                },
            );
            if let Some(d) = &r.kill_after_cancel {
                stop_policy_at.get_or_insert((d.span(), tf("kill_after_cancel")));
            }
        }
        if let (Some(UpstreamTarget::Url { .. }), Some((span, field))) = (&target, stop_policy_at) {
            errors.at(
                span,
                field,
                "kill_after_cancel needs a command upstream (a process of its own per call), \
                 not a url",
            );
        }
        if errors.list.len() != before {
            continue;
        }
        if let Some(target) = target {
            out.push(UpstreamConfig {
                name,
                target,
                prefix: u_ref
                    .prefix
                    .as_ref()
                    .map(|p| p.get_ref().clone())
                    .unwrap_or_default(),
                default_shape,
                isolate: u_ref.isolate.as_ref().is_some_and(|v| *v.get_ref()),
                protocol,
                kill_after_cancel,
                question_wait,
                tools,
            });
        }
    }
    out
}
