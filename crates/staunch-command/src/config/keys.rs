//! Unknown keys, every one of them, each with its line and field path.
//!
//! The parser could refuse an unknown key by itself (`deny_unknown_fields`), but it stops at
//! the first, which hides every other mistake in the file. Instead the file is read once more
//! as a plain tree of spanned tables, and each table's keys are compared with the fields of the
//! struct that reads it. Those field lists come from the structs themselves (what their
//! `Deserialize` asks for), so a new field cannot be forgotten here.

use serde::Deserialize;
use serde::de::{self, Visitor};
use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::error::Errors;
use super::raw::{RawEnv, RawFile, RawParam, RawTool};
use super::upstream::{RawUpstream, RawUpstreamTool};

/// Keys a table must have (the rest are optional), named where the reader learns why.
const TOOL_NEEDS: &[(&str, &str)] = &[
    ("name", "every tool needs a name"),
    (
        "description",
        "every tool needs a description: it is what the model reads",
    ),
    ("program", "every tool needs the program it runs"),
];
const PARAM_NEEDS: &[(&str, &str)] = &[("type", "every parameter needs a type")];
const UPSTREAM_NEEDS: &[(&str, &str)] = &[("name", "every upstream needs a name")];

/// Reports every key of `source` that no struct reads, and every required key that is
/// missing; returns how many mistakes it found. A file that does not parse is left to the
/// parser, which says where.
pub(crate) fn report_unknown(source: &str, errors: &mut Errors) -> usize {
    let Ok(root) = DeTable::parse(source) else {
        return 0;
    };
    let before = errors.list.len();
    let root = root.get_ref();
    check(root, fields_of::<RawFile>(), "", errors);
    for (i, (tool, at)) in tables(root, "tool").enumerate() {
        let label = labelled("tool", i, tool);
        check(tool, fields_of::<RawTool>(), &label, errors);
        require(tool, at, TOOL_NEEDS, &label, errors);
        if let Some(env) = table(tool, "env") {
            check(env, fields_of::<RawEnv>(), &format!("{label}.env"), errors);
        }
        if let Some(params) = table(tool, "params") {
            for (name, param) in params {
                if let DeValue::Table(table) = param.get_ref() {
                    let path = format!("{label}.params.{}", name.get_ref());
                    check(table, fields_of::<RawParam>(), &path, errors);
                    require(table, param.span(), PARAM_NEEDS, &path, errors);
                }
            }
        }
    }
    for (i, (upstream, at)) in tables(root, "upstream").enumerate() {
        let label = labelled("upstream", i, upstream);
        check(upstream, fields_of::<RawUpstream>(), &label, errors);
        require(upstream, at, UPSTREAM_NEEDS, &label, errors);
        if let Some(rules) = table(upstream, "tools") {
            for (name, rule) in rules {
                if let DeValue::Table(rule) = rule.get_ref() {
                    let path = format!("{label}.tools.{}", name.get_ref());
                    check(rule, fields_of::<RawUpstreamTool>(), &path, errors);
                }
            }
        }
    }
    errors.list.len() - before
}

/// Each key of `needs` that `t` lacks, as a mistake at the table (`at`).
fn require(
    t: &DeTable<'_>,
    at: std::ops::Range<usize>,
    needs: &[(&str, &str)],
    path: &str,
    errors: &mut Errors,
) {
    for (key, why) in needs {
        if !t.contains_key(*key) {
            errors.at(
                at.clone(),
                format!("{path}.{key}"),
                format!("missing; {why}"),
            );
        }
    }
}

/// Each key of `t` that is not in `known`, as a mistake at the key, with the nearest known
/// name when one is close enough to be a typo.
fn check(t: &DeTable<'_>, known: &[&str], path: &str, errors: &mut Errors) {
    for key in t.keys() {
        let name: &str = key.get_ref();
        if known.contains(&name) {
            continue;
        }
        let near = known
            .iter()
            .map(|k| (strsim::jaro_winkler(name, k), *k))
            .filter(|(score, _)| *score > 0.8)
            .max_by(|a, b| a.0.total_cmp(&b.0));
        let message = match near {
            Some((_, k)) => format!("unknown key; did you mean {k:?}?"),
            None => format!("unknown key (this table takes: {})", known.join(", ")),
        };
        let field = if path.is_empty() {
            name.to_string()
        } else {
            format!("{path}.{name}")
        };
        errors.at(key.span(), field, message);
    }
}

fn table<'a, 'i>(t: &'a DeTable<'i>, key: &str) -> Option<&'a DeTable<'i>> {
    match t.get(key).map(Spanned::get_ref) {
        Some(DeValue::Table(inner)) => Some(inner),
        _ => None,
    }
}

/// The tables of an array of tables (`[[tool]]`), each with where it is.
fn tables<'a, 'i>(
    t: &'a DeTable<'i>,
    key: &str,
) -> impl Iterator<Item = (&'a DeTable<'i>, std::ops::Range<usize>)> {
    let items = match t.get(key).map(Spanned::get_ref) {
        Some(DeValue::Array(items)) => Some(items),
        _ => None,
    };
    items
        .into_iter()
        .flatten()
        .filter_map(|v| match v.get_ref() {
            DeValue::Table(inner) => Some((inner, v.span())),
            _ => None,
        })
}

/// `tool[2] "export"`, as the other mistakes name a tool.
fn labelled(kind: &str, i: usize, t: &DeTable<'_>) -> String {
    match t.get("name").map(Spanned::get_ref) {
        Some(DeValue::String(name)) => format!("{kind}[{i}] {:?}", name.as_ref()),
        _ => format!("{kind}[{i}]"),
    }
}

/// The keys a struct's `Deserialize` reads: the field list serde hands the deserializer.
pub(crate) fn fields_of<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
    let mut fields: &'static [&'static str] = &[];
    let _ = T::deserialize(FieldNames(&mut fields));
    fields
}

/// A deserializer that only records the fields a struct asks for, then stops.
struct FieldNames<'a>(&'a mut &'static [&'static str]);

#[derive(Debug)]
struct Stop;

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("field names recorded")
    }
}

impl std::error::Error for Stop {}

impl de::Error for Stop {
    fn custom<M: std::fmt::Display>(_: M) -> Self {
        Stop
    }
}

impl<'de> de::Deserializer<'de> for FieldNames<'_> {
    type Error = Stop;

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, Stop> {
        *self.0 = fields;
        Err(Stop)
    }

    fn deserialize_any<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, Stop> {
        Err(Stop)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_lists_come_from_the_structs() {
        let tool = fields_of::<RawTool>();
        assert!(
            tool.contains(&"deadline") && tool.contains(&"program"),
            "{tool:?}"
        );
        let file = fields_of::<RawFile>();
        assert!(
            file.contains(&"tool") && file.contains(&"upstream"),
            "{file:?}"
        );
        assert!(
            fields_of::<RawParam>().contains(&"type"),
            "the renamed field"
        );
    }

    #[test]
    fn required_keys_are_fields_of_their_struct() {
        for (key, _) in TOOL_NEEDS {
            assert!(fields_of::<RawTool>().contains(key), "{key}");
        }
        for (key, _) in PARAM_NEEDS {
            assert!(fields_of::<RawParam>().contains(key), "{key}");
        }
        for (key, _) in UPSTREAM_NEEDS {
            assert!(fields_of::<RawUpstream>().contains(key), "{key}");
        }
    }
}
