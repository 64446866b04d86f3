//! [`NoArgs`]: the arguments of a tool that takes none (an empty object; its schema says so).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// No arguments.
#[derive(Serialize, Deserialize, JsonSchema)]
pub(crate) struct NoArgs {}
