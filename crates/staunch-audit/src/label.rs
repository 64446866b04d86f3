//! What the audit groups a request under, and the time between two of its lines: the small
//! vocabulary every finding shares.

use std::sync::Arc;

use staunch_lifecycle::Millis;

/// What a request is grouped under: its tool, or its method when it is not a tool call.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Label {
    tool: Option<Arc<str>>,
    method: Option<Arc<str>>,
}

impl Label {
    pub(crate) fn new(tool: Option<Arc<str>>, method: Option<Arc<str>>) -> Self {
        match tool {
            Some(t) => Self {
                tool: Some(t),
                method: None,
            },
            None => Self { tool: None, method },
        }
    }

    pub(crate) fn parts(&self) -> (Option<String>, Option<String>) {
        (
            self.tool.as_deref().map(str::to_owned),
            self.method.as_deref().map(str::to_owned),
        )
    }
}

/// A gap between two lines' timestamps. Lines from different threads can carry timestamps a
/// hair out of order; a negative gap means "no time at all", not a huge unsigned number.
pub(crate) fn non_negative(ms: Millis) -> u64 {
    u64::try_from(ms).unwrap_or(0)
}
