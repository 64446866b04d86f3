//! Command tools: any script or CLI as a cancellable, durable MCP tool, declared in
//! `staunch.toml`.
//!
//! - [`config`]: the file format, validated with line and field for every mistake
//!   ([`config::load`]; `staunch check --config`).
//! - [`template`]: arguments → argv. Never a shell: what the client sends arrives as literal
//!   argument elements.
//! - [`params`]: typed parameters → JSON Schema and strict validation.
//! - [`confine`]: a path rendered from arguments that staunch itself opens (`result_file`)
//!   stays inside the tool's `cwd`.
//! - [`supervise`]: one command to its end — its own process group, bounded output
//!   ([`output`]), progress lines ([`progress_line`]), cancel as SIGTERM to the group then
//!   SIGKILL after the grace, nothing left behind ([`group`]), the parent-death signal
//!   ([`spawn`]), and the sweep of what a dead staunch left ([`sweep`]).
//! - [`register`]: the tools on a `ServerBuilder` — `quick`/`streaming`/`atomic` as request
//!   tools, `job` as durable jobs of staunch-jobs — and [`CommandTools::reload`] for SIGHUP
//!   (adds, replaces and removes request-shaped tools on the running server; new job tools
//!   need a restart), which [`reload::reload_on_sighup`] runs on each SIGHUP.

// Public items are documented, and `pub` means public: what no other crate can reach is
// `pub(crate)`.
#![warn(missing_docs, unreachable_pub)]
pub mod catalog;
#[cfg(feature = "cli")]
pub mod cli;
pub mod config;
pub mod confine;
pub mod group;
mod handler;
pub mod output;
pub mod params;
pub mod progress_line;
mod register;
pub mod reload;
pub mod runner;
pub mod spawn;
pub mod supervise;
pub mod sweep;
pub mod template;
pub mod verdict;

pub use catalog::{Catalog, ReloadReport, ServedChanges};
pub use config::{CommandConfig, CommandTool, ConfigError, ConfigErrors, LoadError, load, parse};
pub use handler::{CommandHandler, CommandJob};
pub use register::{CommandTools, RegisterError, register};
