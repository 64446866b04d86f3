//! The request id: a string or an integer, kept exactly as sent. Its own module because both
//! the frame reader and the message types name it.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A request id: a string or an integer, kept exactly as sent (`5` and `"5"` differ).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RequestId {
    /// An integer id.
    Number(i64),
    /// A string id.
    String(String),
}

impl RequestId {
    /// Reads an id from JSON; `None` for null, floats, objects and the like.
    pub fn from_value(v: &Value) -> Option<Self> {
        match v {
            Value::String(s) => Some(Self::String(s.clone())),
            Value::Number(n) => n.as_i64().map(Self::Number),
            _ => None,
        }
    }

    /// The id as a JSON value.
    pub fn to_value(&self) -> Value {
        match self {
            Self::Number(n) => Value::from(*n),
            Self::String(s) => Value::from(s.as_str()),
        }
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Number(n) => write!(f, "{n}"),
            Self::String(s) => write!(f, "{s:?}"),
        }
    }
}
