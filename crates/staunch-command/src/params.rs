//! A tool's input: typed parameters ([`Params::Typed`]), which give both the JSON Schema shown
//! in `tools/list` and a strict validation of every call, or a hand-written JSON Schema
//! ([`Params::Schema`]), of which the call's top-level `required` and property `type`s are
//! checked (the command should validate the rest itself).
//!
//! Validation happens before anything runs or is recorded; a call that does not fit gets a
//! tool error naming the argument.

use serde_json::{Map, Value, json};

/// Longest accepted string argument (characters) when a parameter sets no `max_length`.
pub const DEFAULT_MAX_STRING: usize = 16 * 1024;
/// Most items of an array argument when a parameter sets no `max_items`.
pub const DEFAULT_MAX_ITEMS: usize = 1024;

/// A parameter's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A string (`type = "string"`).
    String,
    /// An integer (`type = "integer"`).
    Integer,
    /// A number (`type = "number"`).
    Number,
    /// A boolean (`type = "boolean"`).
    Boolean,
    /// An array of strings: as a whole argv element, each item becomes one element.
    StringArray,
}

impl Kind {
    pub(crate) fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "string" => Kind::String,
            "integer" => Kind::Integer,
            "number" => Kind::Number,
            "boolean" => Kind::Boolean,
            "array" | "string_array" => Kind::StringArray,
            _ => return None,
        })
    }

    fn json_type(self) -> &'static str {
        match self {
            Kind::String => "string",
            Kind::Integer => "integer",
            Kind::Number => "number",
            Kind::Boolean => "boolean",
            Kind::StringArray => "array",
        }
    }

    /// Whether `v` has this type.
    pub(crate) fn admits(self, v: &Value) -> bool {
        match self {
            Kind::String => v.is_string(),
            Kind::Integer => v.is_i64() || v.is_u64(),
            Kind::Number => v.is_number(),
            Kind::Boolean => v.is_boolean(),
            Kind::StringArray => v.as_array().is_some_and(|a| a.iter().all(Value::is_string)),
        }
    }
}

/// One typed parameter.
#[derive(Debug, Clone)]
pub struct Param {
    /// The argument's name: a key of the call's `arguments`, and a `{name}` placeholder.
    pub name: String,
    /// The type the argument must have (`type`).
    pub kind: Kind,
    /// Shown to clients in the input schema.
    pub description: Option<String>,
    /// A call must give it (default: true unless it has a default).
    pub required: bool,
    /// Used when a call leaves it out or passes null.
    pub default: Option<Value>,
    /// The only values accepted (`enum`).
    pub choices: Option<Vec<Value>>,
    /// The smallest number accepted.
    pub minimum: Option<f64>,
    /// The largest number accepted.
    pub maximum: Option<f64>,
    /// Longest string accepted, in characters; for an array, of each item (default
    /// [`DEFAULT_MAX_STRING`]).
    pub max_length: usize,
    /// Most items of an array accepted (default [`DEFAULT_MAX_ITEMS`]).
    pub max_items: usize,
    /// For booleans: what `{name}` becomes when true.
    pub flag: Option<String>,
}

/// A tool's input declaration.
#[derive(Debug, Clone)]
pub enum Params {
    /// Typed parameters, one `[tool.params.NAME]` table each.
    Typed(Vec<Param>),
    /// A JSON Schema as written.
    Schema(Value),
}

impl Params {
    /// The input schema for `tools/list`.
    pub fn schema(&self) -> Value {
        match self {
            Params::Schema(s) => s.clone(),
            Params::Typed(params) => {
                let mut props = Map::new();
                let mut required = Vec::new();
                for p in params {
                    let mut s = json!({"type": p.kind.json_type()});
                    if p.kind == Kind::StringArray {
                        s["items"] = json!({"type": "string", "maxLength": p.max_length});
                        s["maxItems"] = json!(p.max_items);
                    }
                    if p.kind == Kind::String {
                        s["maxLength"] = json!(p.max_length);
                    }
                    if let Some(d) = &p.description {
                        s["description"] = json!(d);
                    }
                    if let Some(d) = &p.default {
                        s["default"] = d.clone();
                    }
                    if let Some(c) = &p.choices {
                        s["enum"] = json!(c);
                    }
                    if let Some(m) = p.minimum {
                        s["minimum"] = json!(m);
                    }
                    if let Some(m) = p.maximum {
                        s["maximum"] = json!(m);
                    }
                    if p.required {
                        required.push(json!(p.name));
                    }
                    props.insert(p.name.clone(), s);
                }
                json!({
                    "type": "object",
                    "properties": props,
                    "required": required,
                    "additionalProperties": false,
                })
            }
        }
    }

    /// Names of the top-level arguments a placeholder may use, with their kind when known.
    pub fn names(&self) -> Vec<(String, Option<Kind>)> {
        match self {
            Params::Typed(ps) => ps.iter().map(|p| (p.name.clone(), Some(p.kind))).collect(),
            Params::Schema(s) => s
                .get("properties")
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| {
                            let kind = v.get("type").and_then(Value::as_str).and_then(Kind::parse);
                            (k.clone(), kind)
                        })
                        .collect()
                })
                .unwrap_or_default(),
        }
    }

    /// Validates a call's arguments; returns them with defaults filled in.
    pub fn validate(&self, args: &Value) -> Result<Map<String, Value>, String> {
        let Some(obj) = args.as_object() else {
            return Err("invalid arguments: expected a JSON object".into());
        };
        match self {
            Params::Typed(ps) => validate_typed(ps, obj),
            Params::Schema(s) => validate_loose(s, obj),
        }
    }
}

fn validate_typed(ps: &[Param], obj: &Map<String, Value>) -> Result<Map<String, Value>, String> {
    if let Some(unknown) = obj.keys().find(|k| !ps.iter().any(|p| &p.name == *k)) {
        let known: Vec<&str> = ps.iter().map(|p| p.name.as_str()).collect();
        return Err(format!(
            "invalid arguments: unknown argument `{unknown}` (this tool takes: {})",
            if known.is_empty() {
                "nothing".to_string()
            } else {
                known.join(", ")
            }
        ));
    }
    let mut out = Map::new();
    for p in ps {
        let v = match obj.get(&p.name) {
            Some(Value::Null) | None => match &p.default {
                Some(d) => d.clone(),
                None if p.required => {
                    return Err(format!("invalid arguments: missing argument `{}`", p.name));
                }
                None => continue,
            },
            Some(v) => v.clone(),
        };
        check_value(p, &v).map_err(|m| format!("invalid arguments: `{}`: {m}", p.name))?;
        out.insert(p.name.clone(), v);
    }
    Ok(out)
}

fn check_value(p: &Param, v: &Value) -> Result<(), String> {
    if !p.kind.admits(v) {
        return Err(format!("expected {}, got {}", describe(p.kind), short(v)));
    }
    if let Some(choices) = &p.choices
        && !choices.contains(v)
    {
        let list: Vec<String> = choices.iter().map(Value::to_string).collect();
        return Err(format!("{} is not one of {}", short(v), list.join(", ")));
    }
    if let Some(n) = v.as_f64() {
        if p.minimum.is_some_and(|m| n < m) {
            return Err(format!(
                "{n} is below the minimum {}",
                p.minimum.unwrap_or_default()
            ));
        }
        if p.maximum.is_some_and(|m| n > m) {
            return Err(format!(
                "{n} is above the maximum {}",
                p.maximum.unwrap_or_default()
            ));
        }
    }
    let strings: Vec<&str> = match v {
        Value::String(s) => vec![s.as_str()],
        Value::Array(a) => {
            if a.len() > p.max_items {
                return Err(format!(
                    "{} items; at most {} are accepted",
                    a.len(),
                    p.max_items
                ));
            }
            a.iter().filter_map(Value::as_str).collect()
        }
        _ => vec![],
    };
    for s in strings {
        if s.contains('\0') {
            return Err("contains a NUL character, which no argument can hold".into());
        }
        if s.chars().count() > p.max_length {
            return Err(format!("longer than {} characters", p.max_length));
        }
    }
    Ok(())
}

fn validate_loose(schema: &Value, obj: &Map<String, Value>) -> Result<Map<String, Value>, String> {
    let props = schema.get("properties").and_then(Value::as_object);
    if let Some(req) = schema.get("required").and_then(Value::as_array) {
        for r in req.iter().filter_map(Value::as_str) {
            if !obj.contains_key(r) {
                return Err(format!("invalid arguments: missing argument `{r}`"));
            }
        }
    }
    if schema.get("additionalProperties") == Some(&Value::Bool(false))
        && let Some(k) = obj
            .keys()
            .find(|k| !props.is_some_and(|p| p.contains_key(*k)))
    {
        return Err(format!("invalid arguments: unknown argument `{k}`"));
    }
    for (k, v) in obj {
        let kind = props
            .and_then(|p| p.get(k))
            .and_then(|d| d.get("type"))
            .and_then(Value::as_str)
            .and_then(Kind::parse);
        if let Some(kind) = kind
            && !kind.admits(v)
        {
            return Err(format!(
                "invalid arguments: `{k}`: expected {}, got {}",
                describe(kind),
                short(v)
            ));
        }
        if v.as_str().is_some_and(|s| s.contains('\0')) {
            return Err(format!("invalid arguments: `{k}` contains a NUL character"));
        }
    }
    Ok(obj.clone())
}

fn describe(k: Kind) -> &'static str {
    match k {
        Kind::String => "a string",
        Kind::Integer => "an integer",
        Kind::Number => "a number",
        Kind::Boolean => "true or false",
        Kind::StringArray => "an array of strings",
    }
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 40 {
        format!("{}…", s.chars().take(40).collect::<String>())
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(name: &str, kind: Kind, required: bool) -> Param {
        Param {
            name: name.into(),
            kind,
            description: None,
            required,
            default: None,
            choices: None,
            minimum: None,
            maximum: None,
            max_length: 10,
            max_items: 3,
            flag: None,
        }
    }

    #[test]
    fn typed_validation_names_the_argument() {
        let mut pages = p("pages", Kind::Integer, false);
        pages.default = Some(json!(2));
        pages.minimum = Some(1.0);
        let ps = Params::Typed(vec![p("name", Kind::String, true), pages]);
        let ok = ps.validate(&json!({"name": "x"})).unwrap();
        assert_eq!(ok["pages"], json!(2), "the default is filled in");
        let e = ps.validate(&json!({})).unwrap_err();
        assert!(e.contains("missing argument `name`"), "{e}");
        let e = ps.validate(&json!({"name": 3})).unwrap_err();
        assert!(e.contains("`name`: expected a string"), "{e}");
        let e = ps.validate(&json!({"name": "x", "pages": 0})).unwrap_err();
        assert!(e.contains("below the minimum"), "{e}");
        let e = ps.validate(&json!({"name": "x", "other": 1})).unwrap_err();
        assert!(e.contains("unknown argument `other`"), "{e}");
        let e = ps.validate(&json!({"name": "0123456789abc"})).unwrap_err();
        assert!(e.contains("longer than 10"), "{e}");
        let e = ps.validate(&json!({"name": "a\u{0}b"})).unwrap_err();
        assert!(e.contains("NUL"), "{e}");
        assert!(ps.validate(&json!([1])).is_err());
        let schema = ps.schema();
        assert_eq!(schema["required"], json!(["name"]));
        assert_eq!(schema["properties"]["pages"]["default"], json!(2));
    }

    #[test]
    fn a_hand_written_schema_checks_required_and_types() {
        let ps = Params::Schema(json!({
            "type": "object",
            "properties": {"q": {"type": "string"}},
            "required": ["q"],
            "additionalProperties": false
        }));
        assert!(ps.validate(&json!({"q": "x"})).is_ok());
        assert!(ps.validate(&json!({})).unwrap_err().contains("`q`"));
        assert!(
            ps.validate(&json!({"q": 1}))
                .unwrap_err()
                .contains("expected a string")
        );
        assert!(
            ps.validate(&json!({"q": "x", "z": 1}))
                .unwrap_err()
                .contains("`z`")
        );
    }
}
