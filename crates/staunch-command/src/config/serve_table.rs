//! `[serve]`: defaults for the flags of `staunch serve`, one key per flag.
//!
//! The flags belong to the binary: their definitions also make `--help`, the environment
//! variables and the generated reference. So this crate does not list them; it takes them as a
//! [`ServeFlags`] and checks each key and value against them, reporting every mistake at its
//! line like the rest of the file. What comes out is each key's flag value(s) as text, for the
//! binary to parse exactly as it parses the command line.

use std::collections::BTreeMap;
use std::path::Path;

use toml::{Spanned, Value};

use super::error::Errors;

/// How a flag takes its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlagArity {
    /// A switch (`--no-log`): `true` or `false` in the file.
    Switch,
    /// One value (`--store FILE`): a string or a number in the file.
    One,
    /// A flag that may be repeated (`--allow-host`): an array, or one value.
    Many,
}

/// One flag, as the `[serve]` table needs to know it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlagShape {
    /// How it takes its value.
    pub arity: FlagArity,
    /// Its value names a file: a relative one is taken relative to the configuration file
    /// (`:memory:` and URLs are left alone).
    pub path: bool,
}

/// The flags the `[serve]` table may set, as the program that reads the file defines them.
pub trait ServeFlags {
    /// Every key the table takes (a flag's name with `_` for `-`), in the order of `--help`.
    fn keys(&self) -> Vec<String>;
    /// The flag `key` stands for, or `None` if there is none of that name.
    fn shape(&self, key: &str) -> Option<FlagShape>;
    /// Checks `values` as the command line would parse them; why not, if it would refuse them.
    fn check(&self, key: &str, values: &[String]) -> Result<(), String>;
}

/// One key of `[serve]`: the flag it sets and its value(s) as the command line spells them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServeSetting {
    /// The key (the flag's name with `_` for `-`).
    pub key: String,
    /// The value(s); empty for a switch set to `true` (a switch set to `false` is not kept).
    pub values: Vec<String>,
}

impl ServeSetting {
    /// The key `key` with `values` (none: a switch set to `true`).
    pub fn new(key: &str, values: &[&str]) -> Self {
        Self {
            key: key.into(),
            values: values.iter().map(|v| v.to_string()).collect(),
        }
    }
}

/// The `[serve]` table, checked: each setting a flag takes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServeSettings {
    /// In the order of the file's keys.
    pub settings: Vec<ServeSetting>,
}

impl ServeSettings {
    /// The setting of `key`, if the table has it.
    pub fn get(&self, key: &str) -> Option<&ServeSetting> {
        self.settings.iter().find(|s| s.key == key)
    }
}

/// The table as read: each key and value with where it is.
pub(super) type RawServe = BTreeMap<Spanned<String>, Spanned<Value>>;

/// Checks `raw` against `flags`; relative paths are resolved against `base`.
pub(super) fn settings(
    raw: &RawServe,
    flags: &dyn ServeFlags,
    base: &Path,
    errors: &mut Errors<'_>,
) -> ServeSettings {
    let mut out = ServeSettings::default();
    for (key, value) in raw {
        let name = key.get_ref();
        let field = format!("serve.{name}");
        if name == "config" {
            errors.at(
                key.span(),
                field,
                "a configuration file cannot name one: give --config on the command line",
            );
            continue;
        }
        let Some(shape) = flags.shape(name) else {
            errors.at(key.span(), field, unknown(name, &flags.keys()));
            continue;
        };
        let values = match texts(value.get_ref(), shape.arity) {
            Ok(Some(values)) => values,
            Ok(None) => continue,
            Err(why) => {
                errors.at(value.span(), field, why);
                continue;
            }
        };
        if let Err(why) = flags.check(name, &values) {
            errors.at(value.span(), field, why);
            continue;
        }
        let values = if shape.path {
            values.iter().map(|v| resolve(v, base)).collect()
        } else {
            values
        };
        out.settings.push(ServeSetting {
            key: name.clone(),
            values,
        });
    }
    out
}

/// The message for a key no flag has: the nearest key when it looks like a slip, else the list.
fn unknown(name: &str, keys: &[String]) -> String {
    let near = keys
        .iter()
        .map(|k| (strsim::jaro_winkler(name, k), k))
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0));
    match near {
        Some((_, k)) => format!("unknown key; did you mean {k:?}?"),
        None => format!(
            "unknown key: no flag of staunch serve has this name (this table takes: {})",
            keys.join(", ")
        ),
    }
}

/// A value as the flag's text(s); `None` for a switch set to `false`.
fn texts(value: &Value, arity: FlagArity) -> Result<Option<Vec<String>>, String> {
    match (arity, value) {
        (FlagArity::Switch, Value::Boolean(true)) => Ok(Some(Vec::new())),
        (FlagArity::Switch, Value::Boolean(false)) => Ok(None),
        (FlagArity::Switch, _) => Err("a switch: true or false".into()),
        (FlagArity::One, Value::Array(_)) => Err("takes one value, not an array".into()),
        (FlagArity::Many, Value::Array(items)) => {
            items.iter().map(scalar).collect::<Result<_, _>>().map(Some)
        }
        (_, v) => scalar(v).map(|t| Some(vec![t])),
    }
}

/// A string, number or boolean as the command line would spell it.
fn scalar(value: &Value) -> Result<String, String> {
    match value {
        Value::String(s) => Ok(s.clone()),
        Value::Integer(i) => Ok(i.to_string()),
        Value::Float(f) => Ok(f.to_string()),
        Value::Boolean(b) => Ok(b.to_string()),
        Value::Datetime(_) | Value::Array(_) | Value::Table(_) => {
            Err("a string or a number, as the flag takes it".into())
        }
    }
}

/// A file named relative to the configuration file. `:memory:` and URLs (a store's
/// `postgres://…`) are not files; a store's `sqlite:` prefix is dropped, as the flag drops it.
fn resolve(value: &str, base: &Path) -> String {
    if value == ":memory:" || value.contains("://") {
        return value.to_string();
    }
    let file = value.strip_prefix("sqlite:").unwrap_or(value);
    base.join(file).display().to_string()
}

/// No flags: for tests of files without a `[serve]` table.
#[cfg(test)]
pub(crate) struct NoFlags;

#[cfg(test)]
impl ServeFlags for NoFlags {
    fn keys(&self) -> Vec<String> {
        Vec::new()
    }
    fn shape(&self, _: &str) -> Option<FlagShape> {
        None
    }
    fn check(&self, _: &str, _: &[String]) -> Result<(), String> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_become_the_flags_texts() {
        let one = |v| texts(&v, FlagArity::One);
        assert_eq!(one(Value::Integer(7)), Ok(Some(vec!["7".into()])));
        assert_eq!(one(Value::String("2s".into())), Ok(Some(vec!["2s".into()])));
        assert!(one(Value::Array(vec![])).is_err());
        let many = texts(
            &Value::Array(vec![Value::String("a".into()), Value::Integer(1)]),
            FlagArity::Many,
        );
        assert_eq!(many, Ok(Some(vec!["a".into(), "1".into()])));
        assert_eq!(
            texts(&Value::String("a".into()), FlagArity::Many),
            Ok(Some(vec!["a".into()]))
        );
        assert_eq!(
            texts(&Value::Boolean(true), FlagArity::Switch),
            Ok(Some(vec![]))
        );
        assert_eq!(texts(&Value::Boolean(false), FlagArity::Switch), Ok(None));
        assert!(texts(&Value::String("yes".into()), FlagArity::Switch).is_err());
    }

    #[test]
    fn files_are_relative_to_the_configuration_but_urls_are_not() {
        let base = Path::new("/etc/staunch");
        assert_eq!(resolve("state.db", base), "/etc/staunch/state.db");
        assert_eq!(resolve("sqlite:state.db", base), "/etc/staunch/state.db");
        assert_eq!(resolve("/var/state.db", base), "/var/state.db");
        assert_eq!(resolve(":memory:", base), ":memory:");
        assert_eq!(resolve("postgres://db/x", base), "postgres://db/x");
    }
}
