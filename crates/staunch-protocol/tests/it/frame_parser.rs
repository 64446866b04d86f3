//! The envelope parser against the rules it implements, written the slow way: parse the whole
//! frame into a `serde_json::Value`, then classify it. Both must agree on every frame — the
//! message, or the error's code and id — over a grid of envelopes (every kind of id, version,
//! method, params, result and error, unknown keys, repeated and escaped keys) and the fuzz
//! corpus.

use serde_json::{Map, Value};
use staunch_protocol::{
    ErrorObject, FrameError, Message, Notification, Request, RequestId, Response, codes,
    parse_message,
};

/// What a frame parses to, compared across the two parsers.
#[derive(Debug, PartialEq)]
enum Verdict {
    Message(Message),
    Error { code: i64, id: Option<RequestId> },
}

fn verdict(r: Result<Message, FrameError>) -> Verdict {
    match r {
        Ok(m) => Verdict::Message(m),
        Err(e) => Verdict::Error {
            code: e.to_error().code,
            id: e.id().cloned(),
        },
    }
}

/// The rules as a tree walk (the parser staunch used before the envelope visitor).
fn reference(frame: &[u8]) -> Verdict {
    let Ok(value) = serde_json::from_slice::<Value>(frame) else {
        return Verdict::Error {
            code: codes::PARSE_ERROR,
            id: None,
        };
    };
    let invalid = |id: Option<RequestId>| Verdict::Error {
        code: codes::INVALID_REQUEST,
        id,
    };
    let mut obj: Map<String, Value> = match value {
        Value::Object(o) => o,
        _ => return invalid(None),
    };
    let id = match obj.remove("id") {
        None => None,
        Some(Value::String(s)) => Some(RequestId::String(s)),
        Some(Value::Number(n)) => match n.as_i64() {
            Some(n) => Some(RequestId::Number(n)),
            None => return invalid(None),
        },
        Some(_) => return invalid(None),
    };
    if obj.get("jsonrpc") != Some(&Value::from("2.0")) {
        return invalid(id);
    }
    let params = match obj.remove("params") {
        None | Some(Value::Null) => None,
        Some(p @ (Value::Object(_) | Value::Array(_))) => Some(p),
        Some(_) => return invalid(id),
    };
    match obj.remove("method") {
        Some(Value::String(method)) => Verdict::Message(match id {
            Some(id) => Message::Request(Request { id, method, params }),
            None => Message::Notification(Notification { method, params }),
        }),
        Some(_) => invalid(id),
        None => {
            let Some(id) = id else { return invalid(None) };
            match (obj.remove("result"), obj.remove("error")) {
                (Some(result), None) => Verdict::Message(Message::Response(Response {
                    id,
                    outcome: Ok(result),
                })),
                (None, Some(error)) => match serde_json::from_value::<ErrorObject>(error) {
                    Ok(e) => Verdict::Message(Message::Response(Response {
                        id,
                        outcome: Err(e),
                    })),
                    Err(_) => invalid(Some(id)),
                },
                _ => invalid(Some(id)),
            }
        }
    }
}

fn agree(frame: &str) {
    let got = verdict(parse_message(frame.as_bytes()));
    let want = reference(frame.as_bytes());
    assert_eq!(got, want, "frame: {frame}");
}

/// Every combination of the envelope's fields, each absent or in one of its interesting
/// forms.
#[test]
fn agrees_with_the_tree_walk_on_every_envelope_shape() {
    let ids = [
        None,
        Some("1"),
        Some("-5"),
        Some("\"a\""),
        Some("\"\\u0061\\n\""),
        Some("null"),
        Some("1.5"),
        Some("1e2"),
        Some("9223372036854775807"),
        Some("9223372036854775808"),
        Some("true"),
        Some("{\"x\":1}"),
        Some("[1]"),
    ];
    let versions = [
        None,
        Some("\"2.0\""),
        Some("\"1.0\""),
        Some("2.0"),
        Some("null"),
        Some("[\"2.0\"]"),
    ];
    let methods = [
        None,
        Some("\"ping\""),
        Some("\"tools/\\u0063all\""),
        Some("5"),
        Some("null"),
        Some("{}"),
    ];
    let params = [
        None,
        Some("null"),
        Some("{}"),
        Some("[]"),
        Some("3"),
        Some("\"x\""),
        Some(
            "{\"name\":\"echo\",\"arguments\":{\"text\":\"h\\u00e9\",\"n\":[1,2.5,{\"b\":null}]}}",
        ),
    ];
    let answers = [
        None,
        Some("\"result\":{\"a\":1}"),
        Some("\"result\":null"),
        Some("\"error\":{\"code\":-1,\"message\":\"x\",\"data\":[1]}"),
        Some("\"error\":\"bad\""),
        Some("\"result\":1,\"error\":{\"code\":1,\"message\":\"\"}"),
    ];
    let extras = [None, Some("\"x-extra\":{\"deep\":[{\"a\":\"\\\"\"}]}")];
    let mut n = 0;
    for id in &ids {
        for v in &versions {
            for m in &methods {
                for p in &params {
                    for a in &answers {
                        for x in &extras {
                            let mut fields = Vec::new();
                            if let Some(x) = x {
                                fields.push(x.to_string());
                            }
                            if let Some(v) = v {
                                fields.push(format!("\"jsonrpc\":{v}"));
                            }
                            if let Some(id) = id {
                                fields.push(format!("\"id\":{id}"));
                            }
                            if let Some(m) = m {
                                fields.push(format!("\"method\":{m}"));
                            }
                            if let Some(p) = p {
                                fields.push(format!("\"params\":{p}"));
                            }
                            if let Some(a) = a {
                                fields.push(a.to_string());
                            }
                            agree(&format!("{{{}}}", fields.join(",")));
                            n += 1;
                        }
                    }
                }
            }
        }
    }
    assert_eq!(n, 13 * 6 * 6 * 7 * 6 * 2);
}

#[test]
fn agrees_on_repeated_escaped_and_misplaced_keys_and_on_non_objects() {
    for frame in [
        // The last of a repeated key counts.
        r#"{"jsonrpc":"2.0","id":1,"id":"b","method":"ping"}"#,
        r#"{"jsonrpc":"1.0","jsonrpc":"2.0","id":1,"method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":5,"method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":3,"params":{}}"#,
        // Keys spelled with escapes are the same keys.
        r#"{"\u006asonrpc":"2.0","\u0069d":2,"m\u0065thod":"ping"}"#,
        // Keys in other cases are not.
        r#"{"jsonrpc":"2.0","ID":2,"Method":"ping"}"#,
        "[]",
        r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#,
        "42",
        "\"str\"",
        "true",
        "null",
        "",
        "{",
        "nope",
        "{\"jsonrpc\":\"2.0\",}",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"} trailing",
        "  {\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n",
        "\u{0}",
    ] {
        agree(frame);
    }
}

#[test]
fn agrees_on_the_fuzz_corpus() {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/frame_parser");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).expect("the fuzz corpus is in the repository") {
        let bytes = std::fs::read(entry.expect("a corpus entry").path()).expect("readable");
        assert_eq!(
            verdict(parse_message(&bytes)),
            reference(&bytes),
            "corpus frame {:?}",
            String::from_utf8_lossy(&bytes)
        );
        seen += 1;
    }
    assert!(seen > 0, "no corpus in {}", dir.display());
}

/// Text that is not UTF-8 is not JSON, wherever it is — also inside a value the envelope
/// parser skips rather than decodes.
#[test]
fn invalid_utf8_anywhere_is_a_parse_error() {
    let mut frame = br#"{"jsonrpc":"2.0","id":1,"method":"ping","x":""}"#.to_vec();
    let at = frame.len() - 2;
    frame.insert(at, 0xff);
    let e = parse_message(&frame).unwrap_err();
    assert_eq!(e.to_error().code, codes::PARSE_ERROR);
    assert_eq!(reference(&frame), verdict(Err(e)));
}

/// The one place the two differ, on purpose: a lone UTF-16 surrogate escape (`"\ud800"`) in
/// a key the server ignores is skipped, not decoded, so it is not an error; where the value is
/// read (the method, params) it still is.
#[test]
fn a_lone_surrogate_is_refused_only_where_it_is_read() {
    let ignored = r#"{"jsonrpc":"2.0","id":1,"method":"ping","x":"\ud800"}"#;
    assert!(matches!(
        parse_message(ignored.as_bytes()),
        Ok(Message::Request(_))
    ));
    for read in [
        r#"{"jsonrpc":"2.0","id":1,"method":"p\ud800"}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":"\ud800"}}"#,
    ] {
        let e = parse_message(read.as_bytes()).unwrap_err();
        assert_eq!(e.to_error().code, codes::PARSE_ERROR, "{read}");
    }
}
