//! The file as written: serde types over `staunch.toml`, every field wrapped in
//! [`Spanned`] so that validation can name the line of each mistake. Unknown keys are
//! ignored here and reported, all of them, by `keys` (a typo such as `dealine` included).

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

use super::units::NumOrText;

/// The whole file.
#[derive(Debug, Deserialize)]
pub(super) struct RawFile {
    /// Format version; only 1 exists.
    pub version: Option<Spanned<i64>>,
    /// Defaults for `staunch serve`'s flags, one key per flag.
    pub serve: Option<super::serve_table::RawServe>,
    /// The command tools, one `[[tool]]` table each.
    #[serde(default, rename = "tool")]
    pub tools: Vec<Spanned<RawTool>>,
    /// The servers `staunch proxy` fronts, one `[[upstream]]` table each.
    #[serde(default, rename = "upstream")]
    pub upstreams: Vec<Spanned<super::upstream::RawUpstream>>,
}

/// One `[[tool]]`.
#[derive(Debug, Deserialize)]
pub(super) struct RawTool {
    pub name: Spanned<String>,
    pub title: Option<Spanned<String>>,
    pub description: Spanned<String>,
    pub shape: Option<Spanned<String>>,
    pub program: Spanned<String>,
    #[serde(default)]
    pub args: Vec<Spanned<String>>,
    pub cwd: Option<Spanned<String>>,
    pub env: Option<RawEnv>,
    /// Typed parameters, by name.
    pub params: Option<BTreeMap<Spanned<String>, Spanned<RawParam>>>,
    /// A JSON Schema instead of `params` (written as a TOML table, or a JSON string).
    pub input_schema: Option<Spanned<toml::Value>>,
    pub deadline: Option<Spanned<NumOrText>>,
    pub grace: Option<Spanned<NumOrText>>,
    pub max_stdout: Option<Spanned<NumOrText>>,
    pub stdout_overflow: Option<Spanned<String>>,
    pub stderr_tail: Option<Spanned<NumOrText>>,
    pub concurrency: Option<Spanned<i64>>,
    pub retry_safe: Option<Spanned<bool>>,
    pub side_effects: Option<Spanned<bool>>,
    pub max_attempts: Option<Spanned<i64>>,
    pub dedupe_inflight: Option<Spanned<bool>>,
    pub result: Option<Spanned<String>>,
    pub result_file: Option<Spanned<String>>,
    pub max_result: Option<Spanned<NumOrText>>,
    pub elapsed_progress: Option<Spanned<NumOrText>>,
    pub ok_exit_codes: Option<Spanned<Vec<i64>>>,
}

/// `[tool.env]`: what the command's environment holds (it starts empty).
#[derive(Debug, Default, Deserialize)]
pub(super) struct RawEnv {
    /// Variables passed through from staunch's own environment, when set.
    #[serde(default)]
    pub allow: Vec<Spanned<String>>,
    /// Fixed values.
    #[serde(default)]
    pub set: BTreeMap<Spanned<String>, Spanned<String>>,
    /// Secrets: `NAME = "STAUNCH_SIDE_NAME"` copies a variable of staunch's environment under
    /// another name. Required: a missing one fails the check. Values are never logged.
    #[serde(default)]
    pub secrets: BTreeMap<Spanned<String>, Spanned<String>>,
}

/// `[tool.params.NAME]`.
#[derive(Debug, Deserialize)]
pub(super) struct RawParam {
    #[serde(rename = "type")]
    pub kind: Spanned<String>,
    pub description: Option<Spanned<String>>,
    pub required: Option<Spanned<bool>>,
    pub default: Option<Spanned<toml::Value>>,
    #[serde(rename = "enum")]
    pub choices: Option<Spanned<Vec<toml::Value>>>,
    pub minimum: Option<Spanned<f64>>,
    pub maximum: Option<Spanned<f64>>,
    pub max_length: Option<Spanned<i64>>,
    pub max_items: Option<Spanned<i64>>,
    /// For a boolean: the argument `{name}` becomes this flag when true, nothing when false.
    pub flag: Option<Spanned<String>>,
}
