//! Argument templates: how validated arguments become the command's argument vector.
//!
//! Each element of `args` is a template. `{name}` is replaced by argument `name`; `{{` and `}}`
//! are literal braces. The result is always passed to the program as argv, never through a
//! shell, so `; rm -rf /`, `$(…)`, quotes and newlines arrive as the literal characters the
//! client sent, inside one element.
//!
//! An element that is exactly `{name}`:
//! - a string, number or boolean becomes one element (a boolean with a `flag` becomes the
//!   flag when true and disappears when false);
//! - an array of strings becomes one element per item;
//! - an absent optional argument makes the element disappear.
//!
//! An element with text around placeholders (`--since={since}`) becomes one element; if one
//! of its arguments is absent, the element disappears. Arrays must stand alone.
//!
//! A string that starts with `-` in an element of its own would be read by most programs as an
//! option (`--output=/etc/x`, `-rf`): it is refused, unless a literal `"--"` element comes
//! before it (the end of options, for programs that support it). Numbers, and text inside a
//! larger element (`--since={since}`), are never refused.

use std::ffi::OsString;

use serde_json::{Map, Value};

/// One piece of a template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// Literal text (`{{` and `}}` already read as braces).
    Text(String),
    /// A `{name}` placeholder: the argument's name.
    Arg(String),
}

/// One `args` element.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgTemplate {
    pieces: Vec<Piece>,
}

impl ArgTemplate {
    /// Parses an element; errors say what is wrong with the braces.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut pieces = Vec::new();
        let mut text = String::new();
        let mut chars = s.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '{' if chars.peek() == Some(&'{') => {
                    chars.next();
                    text.push('{');
                }
                '}' if chars.peek() == Some(&'}') => {
                    chars.next();
                    text.push('}');
                }
                '{' => {
                    let mut name = String::new();
                    loop {
                        match chars.next() {
                            Some('}') => break,
                            Some(c) if c.is_ascii_alphanumeric() || c == '_' || c == '-' => {
                                name.push(c)
                            }
                            Some(c) => {
                                return Err(format!(
                                    "{c:?} cannot appear in a placeholder; write {{name}} (use \
                                     {{{{ for a literal brace)"
                                ));
                            }
                            None => return Err("a placeholder is not closed with }".into()),
                        }
                    }
                    if name.is_empty() {
                        return Err("an empty placeholder {}; name an argument".into());
                    }
                    if !text.is_empty() {
                        pieces.push(Piece::Text(std::mem::take(&mut text)));
                    }
                    pieces.push(Piece::Arg(name));
                }
                '}' => return Err("a lone } (write }} for a literal brace)".into()),
                c => text.push(c),
            }
        }
        if !text.is_empty() || pieces.is_empty() {
            pieces.push(Piece::Text(text));
        }
        Ok(Self { pieces })
    }

    /// The argument names it uses.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.pieces.iter().filter_map(|p| match p {
            Piece::Arg(n) => Some(n.as_str()),
            Piece::Text(_) => None,
        })
    }

    /// Whether the element is exactly one placeholder.
    pub fn is_whole(&self) -> bool {
        matches!(self.pieces.as_slice(), [Piece::Arg(_)])
    }

    /// Renders into `out`. `flag_of` gives a boolean parameter's flag.
    pub fn render(
        &self,
        args: &Map<String, Value>,
        flag_of: &dyn Fn(&str) -> Option<String>,
        out: &mut Vec<OsString>,
        options_ended: bool,
    ) -> Result<(), String> {
        if let [Piece::Arg(name)] = self.pieces.as_slice() {
            let whole = |v: &Value| {
                if !options_ended && matches!(v, Value::String(t) if t.starts_with('-')) {
                    return Err(format!(
                        "`{name}` starts with \"-\", which the program would read as an \
                         option; pass a value that does not (this tool's args put no \"--\" \
                         before it)"
                    ));
                }
                scalar(name, v)
            };
            match args.get(name) {
                None | Some(Value::Null) => {}
                Some(Value::Array(items)) => {
                    for item in items {
                        out.push(whole(item)?.into());
                    }
                }
                Some(Value::Bool(b)) => match flag_of(name) {
                    Some(flag) => {
                        if *b {
                            out.push(flag.into());
                        }
                    }
                    None => out.push(b.to_string().into()),
                },
                Some(v) => out.push(whole(v)?.into()),
            }
            return Ok(());
        }
        let mut s = String::new();
        for p in &self.pieces {
            match p {
                Piece::Text(t) => s.push_str(t),
                Piece::Arg(name) => match args.get(name) {
                    None | Some(Value::Null) => return Ok(()),
                    Some(v) => s.push_str(&scalar(name, v)?),
                },
            }
        }
        out.push(s.into());
        Ok(())
    }
}

/// The text of one scalar value (an object or array inside text becomes its JSON).
fn scalar(name: &str, v: &Value) -> Result<String, String> {
    let s = match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        other => other.to_string(),
    };
    if s.contains('\0') {
        return Err(format!("`{name}` contains a NUL character"));
    }
    Ok(s)
}

/// Renders a whole argument vector.
pub fn render_all(
    templates: &[ArgTemplate],
    args: &Map<String, Value>,
    flag_of: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<OsString>, String> {
    let mut out = Vec::with_capacity(templates.len());
    let mut options_ended = false;
    for t in templates {
        t.render(args, flag_of, &mut out, options_ended)?;
        options_ended |= t.pieces == [Piece::Text("--".into())];
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn render(ts: &[&str], args: Value) -> Vec<String> {
        let ts: Vec<ArgTemplate> = ts.iter().map(|t| ArgTemplate::parse(t).unwrap()).collect();
        let flag = |n: &str| (n == "verbose").then(|| "--verbose".to_string());
        render_all(&ts, args.as_object().unwrap(), &flag)
            .unwrap()
            .into_iter()
            .map(|o| o.into_string().unwrap())
            .collect()
    }

    #[test]
    fn placeholders_fill_whole_elements_and_text() {
        let out = render(
            &[
                "copy",
                "--from={src}",
                "{verbose}",
                "{files}",
                "{missing}",
                "{{x}}",
                "{n}",
            ],
            json!({"src": "a b; rm -rf /", "verbose": true, "files": ["1", "$(id)"], "n": 3}),
        );
        assert_eq!(
            out,
            [
                "copy",
                "--from=a b; rm -rf /",
                "--verbose",
                "1",
                "$(id)",
                "{x}",
                "3"
            ]
        );
        let out = render(&["{verbose}", "--at={missing}"], json!({"verbose": false}));
        assert!(out.is_empty(), "{out:?}");
    }

    #[test]
    fn a_leading_dash_is_refused_unless_options_have_ended() {
        let ts = |ts: &[&str]| -> Vec<ArgTemplate> {
            ts.iter().map(|t| ArgTemplate::parse(t).unwrap()).collect()
        };
        let flag = |_: &str| None;
        let args = json!({"f": "--output=/etc/passwd", "fs": ["a", "-rf"], "n": -3});
        let args = args.as_object().unwrap();
        for t in [&["cat", "{f}"][..], &["cat", "{fs}"]] {
            let e = render_all(&ts(t), args, &flag).unwrap_err();
            assert!(e.contains("read as an option"), "{e}");
        }
        // After a literal `--`, inside text, and as a number: passed as given.
        let out = render_all(&ts(&["cat", "--", "{f}", "{fs}"]), args, &flag).unwrap();
        assert_eq!(out.len(), 5);
        assert!(render_all(&ts(&["x", "--at={f}", "{n}"]), args, &flag).is_ok());
    }

    #[test]
    fn bad_braces_are_refused() {
        assert!(ArgTemplate::parse("{").is_err());
        assert!(ArgTemplate::parse("{}").is_err());
        assert!(ArgTemplate::parse("}").is_err());
        assert!(ArgTemplate::parse("{a b}").is_err());
        assert_eq!(
            ArgTemplate::parse("x{a}")
                .unwrap()
                .names()
                .collect::<Vec<_>>(),
            ["a"]
        );
        assert!(ArgTemplate::parse("").unwrap().names().next().is_none());
    }
}
