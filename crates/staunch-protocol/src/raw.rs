//! JSON passed on rather than read: a response's result kept as the text it arrived as
//! ([`RawResponse`]), and an object read one level deep ([`RawObject`]).
//!
//! A proxy answers with what its upstream answered. Reading that answer into a
//! `serde_json::Value` tree and writing the tree out again costs a map and a string per key
//! on the way in and a walk on the way out, and it changes what it passes on: the keys come
//! out sorted, and an integer beyond 64 bits or a number written `1e+21` comes out as the
//! float serde_json makes of it. Kept as text, the result reaches the client as the upstream
//! wrote it; where a key must change (a `resultType`, the protocol's own `_meta` keys), the
//! object is read one level deep and only the keys are touched.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::{ErrorObject, Message, RequestId, Response};

/// A message as a reader that passes results on sees it ([`crate::parse_incoming`]).
#[derive(Debug)]
pub enum Incoming {
    /// A response, its result kept as text.
    Response(RawResponse),
    /// A request or a notification.
    Other(Message),
}

/// A response whose result is the text it arrived as.
#[derive(Debug, Clone)]
pub struct RawResponse {
    /// The id of the request this answers.
    pub id: RequestId,
    /// The result, as sent, or the error.
    pub outcome: Result<Box<RawValue>, ErrorObject>,
}

impl RawResponse {
    /// As a [`Response`] whose result is a value.
    pub fn into_response(self) -> Response {
        Response {
            id: self.id,
            outcome: self.outcome.map(|r| to_value(&r)),
        }
    }
}

/// The value of JSON text that was read once already (so it is JSON; `null` is never reached).
pub fn to_value(raw: &RawValue) -> Value {
    serde_json::from_str(raw.get()).unwrap_or(Value::Null)
}

/// A JSON object read one level deep: each key, and each value as the text it arrived as, in
/// the order they came. It is written out (it is `Serialize`) the same way, so an object
/// passes through with only the keys that were removed or replaced changed.
#[derive(Debug, Default, Clone)]
pub struct RawObject<'a> {
    fields: Vec<(Cow<'a, str>, Cow<'a, RawValue>)>,
}

impl<'a> RawObject<'a> {
    /// Reads `raw` as an object; `None` when it is not one.
    pub fn parse(raw: &'a RawValue) -> Option<Self> {
        serde_json::from_str::<Fields<'a>>(raw.get())
            .ok()
            .map(|f| RawObject { fields: f.0 })
    }

    /// The value of `key` (the last one, as a value tree would keep it).
    pub fn get(&self, key: &str) -> Option<&RawValue> {
        self.fields
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_ref())
    }

    /// How many keys there are (a repeated key counts each time).
    pub fn len(&self) -> usize {
        self.fields.len()
    }

    /// Whether there is no key.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// Removes every `key`; returns whether there was one.
    pub fn remove(&mut self, key: &str) -> bool {
        let before = self.fields.len();
        self.fields.retain(|(k, _)| k != key);
        self.fields.len() != before
    }

    /// Keeps only the keys `keep` says yes to.
    pub fn retain(&mut self, mut keep: impl FnMut(&str) -> bool) {
        self.fields.retain(|(k, _)| keep(k));
    }

    /// Sets `key` to `value` (replacing the key's value when it is there, last otherwise).
    pub fn set(&mut self, key: &'a str, value: Cow<'a, RawValue>) {
        match self.fields.iter().position(|(k, _)| k == key) {
            Some(at) => {
                self.fields[at].1 = value;
                // A repeated key keeps only the place of its first.
                let mut seen = 0;
                self.fields.retain(|(k, _)| {
                    seen += usize::from(k == key);
                    k != key || seen == 1
                });
            }
            None => self.fields.push((Cow::Borrowed(key), value)),
        }
    }

    /// The object as JSON text.
    pub fn to_raw(&self) -> Box<RawValue> {
        // Keys are strings and values were JSON already: serialising cannot fail.
        serde_json::value::to_raw_value(self).unwrap_or_default()
    }
}

impl Serialize for RawObject<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.fields.len()))?;
        for (k, v) in &self.fields {
            map.serialize_entry(k.as_ref(), v.as_ref())?;
        }
        map.end()
    }
}

/// The fields of an object, borrowed from the text where they can be.
struct Fields<'a>(Vec<(Cow<'a, str>, Cow<'a, RawValue>)>);

impl<'de: 'a, 'a> Deserialize<'de> for Fields<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct FieldsVisitor;
        impl<'de> Visitor<'de> for FieldsVisitor {
            type Value = Fields<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Fields<'de>, A::Error> {
                let mut fields = Vec::with_capacity(map.size_hint().unwrap_or(4));
                while let Some(ObjectKey(k)) = map.next_key::<ObjectKey<'de>>()? {
                    let v: &'de RawValue = map.next_value()?;
                    fields.push((k, Cow::Borrowed(v)));
                }
                Ok(Fields(fields))
            }
        }
        d.deserialize_map(FieldsVisitor)
    }
}

/// A key, borrowed unless it had escapes.
struct ObjectKey<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for ObjectKey<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct ObjectKeyVisitor;
        impl<'de> Visitor<'de> for ObjectKeyVisitor {
            type Value = ObjectKey<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<ObjectKey<'de>, E> {
                Ok(ObjectKey(Cow::Borrowed(s)))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<ObjectKey<'de>, E> {
                Ok(ObjectKey(Cow::Owned(s.to_string())))
            }
            fn visit_string<E: de::Error>(self, s: String) -> Result<ObjectKey<'de>, E> {
                Ok(ObjectKey(Cow::Owned(s)))
            }
        }
        d.deserialize_str(ObjectKeyVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.to_string()).unwrap()
    }

    #[test]
    fn an_object_passes_through_as_it_came_but_for_the_keys_changed() {
        let text = r#"{"zeta":1,"big":123456789012345678901234567890,"e":1e+21,"esc\"aped":{"b":2,"a":[1, 2]},"alpha":true}"#;
        let r = raw(text);
        let obj = RawObject::parse(&r).unwrap();
        assert_eq!(obj.to_raw().get(), text);
        assert_eq!(
            obj.get("big").unwrap().get(),
            "123456789012345678901234567890"
        );
        assert_eq!(obj.get("esc\"aped").unwrap().get(), r#"{"b":2,"a":[1, 2]}"#);

        let mut obj = obj;
        assert!(obj.remove("e"));
        assert!(!obj.remove("e"));
        obj.retain(|k| k != "alpha");
        obj.set("zeta", Cow::Owned(raw("\"z\"")));
        assert_eq!(
            obj.to_raw().get(),
            r#"{"zeta":"z","big":123456789012345678901234567890,"esc\"aped":{"b":2,"a":[1, 2]}}"#
        );
        assert!(!obj.is_empty());
        assert_eq!(obj.len(), 3);
    }

    #[test]
    fn only_an_object_is_read_as_one_and_the_last_repeated_key_counts() {
        for not in ["[1]", "\"x\"", "3", "null"] {
            assert!(RawObject::parse(&raw(not)).is_none(), "{not}");
        }
        let r = raw(r#"{"a":1,"a":2}"#);
        assert_eq!(RawObject::parse(&r).unwrap().get("a").unwrap().get(), "2");
        assert!(RawObject::parse(&raw("{}")).unwrap().is_empty());

        let r = raw(r#"{"a":1,"b":0,"a":2}"#);
        let mut obj = RawObject::parse(&r).unwrap();
        obj.set("a", Cow::Owned(raw("3")));
        assert_eq!(obj.to_raw().get(), r#"{"a":3,"b":0}"#);
    }

    #[test]
    fn a_raw_response_reads_into_the_value_it_holds() {
        let r = RawResponse {
            id: RequestId::Number(3),
            outcome: Ok(raw(r#"{"content":[]}"#)),
        };
        let resp = r.into_response();
        assert_eq!(resp.outcome.unwrap(), serde_json::json!({"content": []}));
    }
}
