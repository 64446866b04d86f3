//! Reading one frame's envelope without building a tree of it.
//!
//! A JSON-RPC frame is an object with at most six keys that matter (`jsonrpc`, `id`,
//! `method`, `params`, `result`, `error`). Parsing the whole frame into a
//! `serde_json::Value` first allocates a map and a string per key, and the `"2.0"` and method
//! strings, only to move the fields out again: on the echo path that was most of the parse.
//! Here one serde visitor walks the top-level object and keeps only what the classification
//! in [`crate::jsonrpc`] needs: the key names are matched where they lie in the input, the
//! version is compared in place, an id is read as what it is, and only `params`, `result` and
//! `error` become values. Keys it does not know are skipped.
//!
//! The visitor never fails on a well-formed frame of the wrong shape: it records what it saw
//! (an array, a scalar, an id that is not a string or an integer, a method that is not a
//! string), and the caller turns that into the right JSON-RPC error, with the id when one was
//! readable. Only text that is not JSON fails the parse. Repeated keys behave as they did
//! with a `Value` (the last one counts).

use std::fmt;
use std::marker::PhantomData;

use serde::de::{
    self, Deserialize, DeserializeOwned, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor,
};
use serde_json::Value;

use crate::request_id::RequestId;

/// What the top level of a frame was.
pub(crate) enum Frame<R> {
    /// An object: its envelope.
    Object(Envelope<R>),
    /// An array (a batch).
    Array,
    /// A string, a number, a boolean or null.
    Scalar,
}

/// The fields of a frame object that the classification reads; `None` where the key was
/// absent. A response's result is read as an `R`: a value tree, or the text it arrived as.
pub(crate) struct Envelope<R> {
    pub(crate) id: Option<IdField>,
    /// Whether `jsonrpc` was the string `"2.0"`.
    pub(crate) version_ok: Option<bool>,
    /// The method when it was a string, `Err` when it was something else.
    pub(crate) method: Option<Result<String, ()>>,
    pub(crate) params: Option<Value>,
    pub(crate) result: Option<R>,
    pub(crate) error: Option<Value>,
}

impl<R> Default for Envelope<R> {
    fn default() -> Self {
        Self {
            id: None,
            version_ok: None,
            method: None,
            params: None,
            result: None,
            error: None,
        }
    }
}

/// An `id` as sent.
pub(crate) enum IdField {
    Valid(RequestId),
    Null,
    /// A float, an integer beyond `i64`, a boolean, an object or an array.
    Invalid,
}

/// Reads one frame. `Err` only for text that is not JSON (or not UTF-8).
pub(crate) fn read<R: DeserializeOwned>(frame: &[u8]) -> Result<Frame<R>, serde_json::Error> {
    // The whole frame is checked for UTF-8 once (fast, and it keeps "not UTF-8 anywhere is a
    // parse error" although skipped values are not decoded), so the parser can read it as str.
    let text = std::str::from_utf8(frame).map_err(|e| {
        <serde_json::Error as de::Error>::custom(format_args!("invalid UTF-8: {e}"))
    })?;
    serde_json::from_str(text)
}

impl<'de, R: DeserializeOwned> Deserialize<'de> for Frame<R> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(FrameVisitor(PhantomData))
    }
}

struct FrameVisitor<R>(PhantomData<R>);

impl<'de, R: DeserializeOwned> Visitor<'de> for FrameVisitor<R> {
    type Value = Frame<R>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON-RPC message")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Frame<R>, A::Error> {
        let mut env = Envelope::default();
        while let Some(key) = map.next_key::<Key>()? {
            match key {
                Key::Jsonrpc => env.version_ok = Some(map.next_value::<IsVersion2>()?.0),
                Key::Id => env.id = Some(map.next_value::<IdField>()?),
                Key::Method => env.method = Some(map.next_value::<MethodField>()?.0),
                Key::Params => env.params = Some(map.next_value()?),
                Key::Result => env.result = Some(map.next_value()?),
                Key::Error => env.error = Some(map.next_value()?),
                Key::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Frame::Object(env))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Frame<R>, A::Error> {
        drain_seq(seq)?;
        Ok(Frame::Array)
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Frame<R>, E> {
        Ok(Frame::Scalar)
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Frame<R>, E> {
        Ok(Frame::Scalar)
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Frame<R>, E> {
        Ok(Frame::Scalar)
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Frame<R>, E> {
        Ok(Frame::Scalar)
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Frame<R>, E> {
        Ok(Frame::Scalar)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Frame<R>, E> {
        Ok(Frame::Scalar)
    }
}

fn drain_seq<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<(), A::Error> {
    while seq.next_element::<IgnoredAny>()?.is_some() {}
    Ok(())
}

fn drain_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<(), A::Error> {
    while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
    Ok(())
}

/// A top-level key, matched without allocating (an escaped key arrives decoded).
enum Key {
    Jsonrpc,
    Id,
    Method,
    Params,
    Result,
    Error,
    Other,
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Key, E> {
                Ok(match s {
                    "jsonrpc" => Key::Jsonrpc,
                    "id" => Key::Id,
                    "method" => Key::Method,
                    "params" => Key::Params,
                    "result" => Key::Result,
                    "error" => Key::Error,
                    _ => Key::Other,
                })
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

/// Implements the visitor methods of a field that takes any JSON value and maps every kind
/// it does not care about to `$other`, skipping nested values.
macro_rules! any_value_is {
    ($other:expr) => {
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok($other)
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok($other)
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok($other)
        }
        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
            drain_map(map)?;
            Ok($other)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
            drain_seq(seq)?;
            Ok($other)
        }
    };
}

/// `jsonrpc`: is it the string `"2.0"`?
struct IsVersion2(bool);

impl<'de> Deserialize<'de> for IsVersion2 {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = IsVersion2;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("\"2.0\"")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<IsVersion2, E> {
                Ok(IsVersion2(s == "2.0"))
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<IsVersion2, E> {
                Ok(IsVersion2(false))
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<IsVersion2, E> {
                Ok(IsVersion2(false))
            }
            any_value_is!(IsVersion2(false));
        }
        d.deserialize_any(V)
    }
}

/// `method`: a string, or something else.
struct MethodField(Result<String, ()>);

impl<'de> Deserialize<'de> for MethodField {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = MethodField;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a method name")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<MethodField, E> {
                Ok(MethodField(Ok(s.to_owned())))
            }
            fn visit_string<E: de::Error>(self, s: String) -> Result<MethodField, E> {
                Ok(MethodField(Ok(s)))
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<MethodField, E> {
                Ok(MethodField(Err(())))
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<MethodField, E> {
                Ok(MethodField(Err(())))
            }
            any_value_is!(MethodField(Err(())));
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for IdField {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = IdField;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string or an integer")
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<IdField, E> {
                Ok(IdField::Valid(RequestId::Number(n)))
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<IdField, E> {
                Ok(i64::try_from(n)
                    .map_or(IdField::Invalid, |n| IdField::Valid(RequestId::Number(n))))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<IdField, E> {
                Ok(IdField::Valid(RequestId::String(s.to_owned())))
            }
            fn visit_string<E: de::Error>(self, s: String) -> Result<IdField, E> {
                Ok(IdField::Valid(RequestId::String(s)))
            }
            // Null is told apart from the other wrong kinds: it gets its own message.
            fn visit_unit<E: de::Error>(self) -> Result<IdField, E> {
                Ok(IdField::Null)
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<IdField, E> {
                Ok(IdField::Invalid)
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<IdField, E> {
                Ok(IdField::Invalid)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<IdField, A::Error> {
                drain_map(map)?;
                Ok(IdField::Invalid)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<IdField, A::Error> {
                drain_seq(seq)?;
                Ok(IdField::Invalid)
            }
        }
        d.deserialize_any(V)
    }
}
