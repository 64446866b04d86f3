//! A tool's typed parameters as written: each one's type, default, choices and bounds checked,
//! and turned into the schema the model reads and the validation each call gets.

use serde_json::Value;
use toml::Spanned;

use super::error::Errors;
use super::raw::{RawParam, RawTool};
use crate::params::{DEFAULT_MAX_ITEMS, DEFAULT_MAX_STRING, Kind, Param, Params};

pub(super) fn params(t: &RawTool, label: &str, errors: &mut Errors<'_>) -> Option<Params> {
    match (&t.params, &t.input_schema) {
        (Some(_), Some(s)) => {
            errors.at(
                s.span(),
                format!("{label}.input_schema"),
                "give params or input_schema, not both",
            );
            None
        }
        (None, None) => Some(Params::Typed(Vec::new())),
        (None, Some(s)) => {
            let field = format!("{label}.input_schema");
            let v: Value = match s.get_ref() {
                toml::Value::String(text) => match serde_json::from_str(text) {
                    Ok(v) => v,
                    Err(e) => {
                        errors.at(s.span(), field, format!("not JSON: {e}"));
                        return None;
                    }
                },
                other => match serde_json::to_value(other) {
                    Ok(v) => v,
                    Err(e) => {
                        errors.at(s.span(), field, format!("cannot be JSON: {e}"));
                        return None;
                    }
                },
            };
            if v.get("type").and_then(Value::as_str) != Some("object") {
                errors.at(
                    s.span(),
                    field,
                    "an input schema must have type = \"object\"",
                );
                return None;
            }
            Some(Params::Schema(v))
        }
        (Some(ps), None) => {
            let before = errors.list.len();
            let mut out = Vec::new();
            for (name, p) in ps {
                let field = format!("{label}.params.{}", name.get_ref());
                if let Some(param) = param(name, p.get_ref(), &field, errors) {
                    out.push(param);
                }
            }
            (errors.list.len() == before).then_some(Params::Typed(out))
        }
    }
}

fn param(
    name: &Spanned<String>,
    p: &RawParam,
    field: &str,
    errors: &mut Errors<'_>,
) -> Option<Param> {
    let n = name.get_ref();
    if n.is_empty()
        || !n
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        errors.at(name.span(), field, "a parameter name is A-Z a-z 0-9 _ -");
        return None;
    }
    if n == staunch_jobs::ARG_KEY {
        errors.at(
            name.span(),
            field,
            "idempotency_key is staunch's own argument of job tools",
        );
        return None;
    }
    let Some(kind) = Kind::parse(p.kind.get_ref()) else {
        errors.at(
            p.kind.span(),
            format!("{field}.type"),
            format!(
                "{:?} is not a type: string, integer, number, boolean or array (of strings)",
                p.kind.get_ref()
            ),
        );
        return None;
    };
    let json = |v: &toml::Value| serde_json::to_value(v).unwrap_or(Value::Null);
    let default = p.default.as_ref().map(|d| (json(d.get_ref()), d.span()));
    if let Some((d, span)) = &default
        && !kind.admits(d)
    {
        errors.at(
            span.clone(),
            format!("{field}.default"),
            format!("{d} is not of type {}", p.kind.get_ref()),
        );
    }
    if let Some(flag) = &p.flag
        && kind != Kind::Boolean
    {
        errors.at(
            flag.span(),
            format!("{field}.flag"),
            "only a boolean has a flag",
        );
    }
    let choices = p
        .choices
        .as_ref()
        .map(|c| c.get_ref().iter().map(json).collect::<Vec<_>>());
    if let (Some(c), Some(span)) = (&choices, p.choices.as_ref().map(|c| c.span()))
        && (c.is_empty() || c.iter().any(|v| !kind.admits(v)))
    {
        errors.at(
            span,
            format!("{field}.enum"),
            format!("every choice must be of type {}", p.kind.get_ref()),
        );
    }
    let count = |v: &Option<Spanned<i64>>, sub: &str, dflt: usize, errors: &mut Errors<'_>| match v
    {
        None => dflt,
        Some(v) if *v.get_ref() >= 1 => *v.get_ref() as usize,
        Some(v) => {
            errors.at(v.span(), format!("{field}.{sub}"), "must be at least 1");
            dflt
        }
    };
    Some(Param {
        name: n.clone(),
        kind,
        description: p.description.as_ref().map(|d| d.get_ref().clone()),
        required: p
            .required
            .as_ref()
            .map_or(default.is_none(), |r| *r.get_ref()),
        default: default.map(|(d, _)| d),
        choices,
        minimum: p.minimum.as_ref().map(|v| *v.get_ref()),
        maximum: p.maximum.as_ref().map(|v| *v.get_ref()),
        max_length: count(&p.max_length, "max_length", DEFAULT_MAX_STRING, errors),
        max_items: count(&p.max_items, "max_items", DEFAULT_MAX_ITEMS, errors),
        flag: p.flag.as_ref().map(|f| f.get_ref().clone()),
    })
}
