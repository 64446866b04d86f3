//! `staunch.toml`: reading ([`load`], [`parse`]) and validating it into a [`CommandConfig`].
//!
//! Every mistake is reported with its line, column and field (`tool[1] "export".deadline`),
//! and validation goes on after the first one, so `staunch check` lists them all. The format
//! is documented in the book ("Command tools") and in `examples/`.
//!
//! Modules: `raw` (the file as written), `keys` (unknown and missing keys), `units` (durations
//! and sizes), `process` (a tool's program and environment), `param_check` (its parameters),
//! `upstream` (the `[[upstream]]` tables), `serve_table` (`[serve]`, checked against the flags
//! the binary defines), `model` (the validated result), `error`.

mod error;
mod keys;
mod model;
mod param_check;
mod process;
mod raw;
mod serve_table;
mod units;
mod upstream;

use std::collections::{BTreeMap, HashSet};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use staunch_server::Shape;
use toml::Spanned;

pub use error::{ConfigError, ConfigErrors, LoadError};
pub use model::{
    BASE_ENV, CommandConfig, CommandTool, EnvPolicy, OutputLimits, Overflow, ResultMode,
};
#[cfg(test)]
pub(crate) use serve_table::NoFlags;
pub use serve_table::{FlagArity, FlagShape, ServeFlags, ServeSetting, ServeSettings};
pub use upstream::{UpstreamConfig, UpstreamTarget, UpstreamToolRule};

use crate::params::Kind;
use crate::template::ArgTemplate;
use error::Errors;
use param_check::params;
use process::{env, program};
use raw::{RawFile, RawTool};
use units::NumOrText;

/// Default grace between SIGTERM and SIGKILL.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(5);
/// Default bound on standard output kept for the result.
pub const DEFAULT_MAX_STDOUT: u64 = 1 << 20;
/// Default bound on the stderr tail kept for errors.
pub const DEFAULT_STDERR_TAIL: u64 = 4 << 10;
/// Default concurrency per tool.
pub const DEFAULT_CONCURRENCY: usize = 8;
/// Default interval of elapsed-time progress.
pub const DEFAULT_ELAPSED_PROGRESS: Duration = Duration::from_secs(2);

/// Reads and validates the file at `path`; its `[serve]` table is checked against `flags`.
pub fn load(path: &Path, flags: &dyn ServeFlags) -> Result<CommandConfig, LoadError> {
    let source = std::fs::read_to_string(path).map_err(|source| LoadError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse(&source, path, flags).map_err(LoadError::Invalid)
}

/// Validates `source` as if read from `path` (relative programs and directories are resolved
/// against `path`'s directory); its `[serve]` table is checked against `flags`.
pub fn parse(
    source: &str,
    path: &Path,
    flags: &dyn ServeFlags,
) -> Result<CommandConfig, ConfigErrors> {
    let mut errors = Errors::new(source);
    let raw: RawFile = match toml::from_str(source) {
        Ok(r) => r,
        Err(e) => {
            // The reader stops at its first problem. The key pass still names every unknown
            // key, and a missing required key with its table's path, which says it better
            // than the reader's "missing field"; any other problem is the reader's to say.
            let found = keys::report_unknown(source, &mut errors);
            if found == 0 || !e.message().starts_with("missing field") {
                let span = e.span().unwrap_or(0..0);
                errors.at(span, "", e.message().to_string());
            }
            return Err(errors.into_errors(path));
        }
    };
    keys::report_unknown(source, &mut errors);
    let base = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    let base = std::path::absolute(&base).unwrap_or(base);
    if let Some(v) = &raw.version
        && *v.get_ref() != 1
    {
        errors.at(v.span(), "version", "only version = 1 exists");
    }
    let serve = raw
        .serve
        .as_ref()
        .map(|s| serve_table::settings(s, flags, &base, &mut errors))
        .unwrap_or_default();
    let mut tools = Vec::new();
    let mut names: HashSet<String> = HashSet::new();
    for (i, t) in raw.tools.iter().enumerate() {
        let raw_tool = t.get_ref();
        let label = format!("tool[{i}] {:?}", raw_tool.name.get_ref());
        // Names are claimed even by a tool with mistakes, so a duplicate is reported too.
        let mut own = vec![raw_tool.name.get_ref().clone()];
        if raw_tool
            .shape
            .as_ref()
            .is_some_and(|s| s.get_ref() == "job")
        {
            for face in ["start", "get", "cancel"] {
                own.push(format!("{face}_{}", raw_tool.name.get_ref()));
            }
        }
        if let Some(dup) = own.iter().find(|n| names.contains(*n)) {
            errors.at(
                raw_tool.name.span(),
                format!("{label}.name"),
                format!(
                    "the tool name {dup:?} is taken (job tools also get start_, get_ and \
                     cancel_ tools)"
                ),
            );
        }
        names.extend(own);
        if let Some(tool) = tool(raw_tool, &label, &base, &mut errors) {
            tools.push(Arc::new(tool));
        }
    }
    let env = |k: &str| std::env::var(k).ok();
    let upstreams = upstream::upstreams(&raw.upstreams, &base, &env, &mut errors);
    errors.finish(path)?;
    Ok(CommandConfig {
        path: path.to_path_buf(),
        serve,
        tools,
        upstreams,
    })
}

fn tool(t: &RawTool, label: &str, base: &Path, errors: &mut Errors<'_>) -> Option<CommandTool> {
    let before = errors.list.len();
    let f = |field: &str| format!("{label}.{field}");
    let name = t.name.get_ref().clone();
    if name.is_empty()
        || name.len() > 64
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
    {
        errors.at(
            t.name.span(),
            f("name"),
            "a tool name is 1 to 64 of A-Z a-z 0-9 _ - .",
        );
    }
    if t.description.get_ref().trim().is_empty() {
        errors.at(
            t.description.span(),
            f("description"),
            "say what the tool does: the model reads it to choose the tool",
        );
    }
    let shape = match t.shape.as_ref().map(|s| (s.get_ref().as_str(), s.span())) {
        None | Some(("quick", _)) => Shape::Quick,
        Some(("streaming", _)) => Shape::Streaming,
        Some(("job", _)) => Shape::Job,
        Some(("atomic", _)) => Shape::Atomic,
        Some((other, span)) => {
            errors.at(
                span,
                f("shape"),
                format!("{other:?} is not a shape: quick, streaming, job or atomic"),
            );
            Shape::Quick
        }
    };
    let params = params(t, label, errors);
    // Placeholders are checked against the declared names even when a parameter has a
    // mistake of its own (so each is reported once, where it is).
    let names: BTreeMap<String, Option<Kind>> = match (&params, &t.params) {
        (Some(p), _) => p.names().into_iter().collect(),
        (None, Some(raw)) => raw
            .iter()
            .map(|(k, v)| (k.get_ref().clone(), Kind::parse(v.get_ref().kind.get_ref())))
            .collect(),
        (None, None) => BTreeMap::new(),
    };
    let mut args = Vec::new();
    for (i, a) in t.args.iter().enumerate() {
        match template(a, &format!("{label}.args[{i}]"), &names, errors) {
            Some(tpl) => args.push(tpl),
            None => continue,
        }
    }
    let cwd = match &t.cwd {
        None => base.to_path_buf(),
        Some(c) => {
            let dir = base.join(c.get_ref());
            if !dir.is_dir() {
                errors.at(
                    c.span(),
                    f("cwd"),
                    format!("{} is not a directory", dir.display()),
                );
            }
            dir
        }
    };
    let program = program(&t.program, &f("program"), base, errors);
    let env = env(t, label, errors);
    let dur = |v: &Option<Spanned<NumOrText>>, field: &str, errors: &mut Errors<'_>| {
        let v = v.as_ref()?;
        match units::duration(v.get_ref()) {
            Ok(d) => Some(d),
            Err(m) => {
                errors.at(v.span(), f(field), m);
                None
            }
        }
    };
    let deadline = dur(&t.deadline, "deadline", errors);
    if deadline == Some(Duration::ZERO)
        && let Some(d) = &t.deadline
    {
        errors.at(
            d.span(),
            f("deadline"),
            "a deadline of 0 would stop every call at once",
        );
    }
    let grace = dur(&t.grace, "grace", errors).unwrap_or(DEFAULT_GRACE);
    let elapsed_progress = match &t.elapsed_progress {
        Some(v) if matches!(v.get_ref(), NumOrText::Text(s) if s == "off") => None,
        _ => Some(
            dur(&t.elapsed_progress, "elapsed_progress", errors)
                .unwrap_or(DEFAULT_ELAPSED_PROGRESS)
                .max(Duration::from_millis(100)),
        ),
    };
    let size = |v: &Option<Spanned<NumOrText>>, field: &str, dflt: u64, errors: &mut Errors<'_>| {
        let Some(v) = v.as_ref() else {
            return dflt;
        };
        match units::size(v.get_ref()) {
            Ok(0) => {
                errors.at(v.span(), f(field), "must be more than 0 bytes");
                dflt
            }
            Ok(n) => n,
            Err(m) => {
                errors.at(v.span(), f(field), m);
                dflt
            }
        }
    };
    let result = match (t.result.as_ref(), t.result_file.as_ref()) {
        (None, None) => ResultMode::Text,
        (Some(r), file) => match (r.get_ref().as_str(), file) {
            ("text", None) => ResultMode::Text,
            ("json", None) => ResultMode::Json,
            ("file", Some(path)) => template(path, &f("result_file"), &names, errors)
                .filter(|tpl| result_file_stays_inside(tpl, path, &f("result_file"), errors))
                .map_or(ResultMode::Text, ResultMode::File),
            ("file", None) => {
                errors.at(r.span(), f("result"), "result = \"file\" needs result_file");
                ResultMode::Text
            }
            ("text" | "json", Some(p)) => {
                errors.at(p.span(), f("result_file"), "only with result = \"file\"");
                ResultMode::Text
            }
            (other, _) => {
                errors.at(
                    r.span(),
                    f("result"),
                    format!("{other:?} is not a result: text, json or file"),
                );
                ResultMode::Text
            }
        },
        (None, Some(p)) => {
            errors.at(p.span(), f("result_file"), "only with result = \"file\"");
            ResultMode::Text
        }
    };
    let overflow = match t.stdout_overflow.as_ref() {
        None if result == ResultMode::Json => Overflow::Fail,
        None => Overflow::Truncate,
        Some(o) => match o.get_ref().as_str() {
            "truncate" => Overflow::Truncate,
            "fail" => Overflow::Fail,
            other => {
                errors.at(
                    o.span(),
                    f("stdout_overflow"),
                    format!("{other:?}: write \"truncate\" or \"fail\""),
                );
                Overflow::Truncate
            }
        },
    };
    let limits = OutputLimits {
        max_stdout: size(&t.max_stdout, "max_stdout", DEFAULT_MAX_STDOUT, errors),
        overflow,
        stderr_tail: size(&t.stderr_tail, "stderr_tail", DEFAULT_STDERR_TAIL, errors),
        max_result: size(&t.max_result, "max_result", DEFAULT_MAX_STDOUT, errors),
    };
    let concurrency = match &t.concurrency {
        None => DEFAULT_CONCURRENCY,
        Some(c) if *c.get_ref() >= 1 => *c.get_ref() as usize,
        Some(c) => {
            errors.at(c.span(), f("concurrency"), "must be at least 1");
            DEFAULT_CONCURRENCY
        }
    };
    let job_only = |v: Option<Range<usize>>, field: &str, errors: &mut Errors<'_>| {
        if let Some(span) = v
            && shape != Shape::Job
        {
            errors.at(span, f(field), "only job tools (shape = \"job\") take this");
        }
    };
    job_only(
        t.max_attempts.as_ref().map(|v| v.span()),
        "max_attempts",
        errors,
    );
    job_only(
        t.dedupe_inflight.as_ref().map(|v| v.span()),
        "dedupe_inflight",
        errors,
    );
    let retry_safe = t.retry_safe.as_ref().is_some_and(|v| *v.get_ref());
    let max_attempts = match &t.max_attempts {
        Some(v) if *v.get_ref() < 1 || *v.get_ref() > 100 => {
            errors.at(v.span(), f("max_attempts"), "must be 1 to 100");
            None
        }
        Some(v) => {
            if !retry_safe {
                errors.at(
                    v.span(),
                    f("max_attempts"),
                    "only a retry_safe tool is run more than once; set retry_safe = true",
                );
            }
            Some(*v.get_ref() as u32)
        }
        None => None,
    };
    let ok_exit_codes = match &t.ok_exit_codes {
        None => vec![0],
        Some(v) => {
            if v.get_ref().is_empty() || v.get_ref().iter().any(|c| !(0..=255).contains(c)) {
                errors.at(
                    v.span(),
                    f("ok_exit_codes"),
                    "exit codes are 0 to 255, at least one",
                );
            }
            v.get_ref().iter().map(|c| *c as i32).collect()
        }
    };
    if errors.list.len() > before {
        return None;
    }
    Some(CommandTool {
        name,
        title: t.title.as_ref().map(|v| v.get_ref().clone()),
        description: t.description.get_ref().clone(),
        shape,
        program: program?,
        args,
        cwd,
        env,
        params: params?,
        deadline,
        grace,
        limits,
        concurrency,
        retry_safe,
        side_effects: t
            .side_effects
            .as_ref()
            .map_or(matches!(shape, Shape::Job | Shape::Atomic), |v| {
                *v.get_ref()
            }),
        max_attempts,
        dedupe_inflight: t.dedupe_inflight.as_ref().map(|v| *v.get_ref()),
        result,
        elapsed_progress,
        ok_exit_codes,
    })
}

fn template(
    a: &Spanned<String>,
    field: &str,
    names: &BTreeMap<String, Option<Kind>>,
    errors: &mut Errors<'_>,
) -> Option<ArgTemplate> {
    let tpl = match ArgTemplate::parse(a.get_ref()) {
        Ok(t) => t,
        Err(m) => {
            errors.at(a.span(), field, m);
            return None;
        }
    };
    let mut ok = true;
    for n in tpl.names() {
        match names.get(n) {
            None => {
                let known: Vec<&str> = names.keys().map(String::as_str).collect();
                errors.at(
                    a.span(),
                    field,
                    format!(
                        "{{{n}}} names no parameter (declared: {})",
                        if known.is_empty() {
                            "none".into()
                        } else {
                            known.join(", ")
                        }
                    ),
                );
                ok = false;
            }
            Some(Some(Kind::StringArray)) if !tpl.is_whole() => {
                errors.at(
                    a.span(),
                    field,
                    format!("the array {{{n}}} must be a whole element (\"{{{n}}}\")"),
                );
                ok = false;
            }
            Some(_) => {}
        }
    }
    ok.then_some(tpl)
}

/// Whether `result_file`'s literal text keeps it inside the tool's `cwd`: it is read there
/// ([`crate::confine`]), so a template that is absolute or climbs with `..` whatever the
/// arguments could never be read, and is a mistake to report now rather than at every call.
fn result_file_stays_inside(
    tpl: &ArgTemplate,
    raw: &Spanned<String>,
    field: &str,
    errors: &mut Errors<'_>,
) -> bool {
    // Each placeholder stands for a plain name here: what the arguments make of it is checked
    // at each call.
    let plain: serde_json::Map<String, Value> = tpl
        .names()
        .map(|n| (n.to_string(), Value::String("x".into())))
        .collect();
    let mut parts = Vec::new();
    if tpl.render(&plain, &|_| None, &mut parts, true).is_err() {
        return true;
    }
    let Some(literal) = parts.first().map(Path::new) else {
        return true;
    };
    let why = if literal.is_absolute() {
        "is absolute"
    } else if literal
        .components()
        .any(|c| c == std::path::Component::ParentDir)
    {
        "climbs out with `..`"
    } else {
        return true;
    };
    errors.at(
        raw.span(),
        field,
        format!(
            "{:?} {why}: result_file is read inside the tool's working directory (cwd); write \
             it relative to cwd, and set cwd to the directory the command writes to",
            raw.get_ref()
        ),
    );
    false
}
