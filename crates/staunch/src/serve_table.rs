//! The `[serve]` table of `--config`, applied as flags. Each key is a flag of `staunch serve`
//! (its id: the flag's name with `_` for `-`), so a setting is defined once, by its clap
//! argument, which also makes `--help`, the environment variable, the man page and the
//! generated reference. A value is parsed by that flag's own parser, so the file takes what the
//! flag takes (`"1.5s"`, `64`, `["a", "b"]`). A flag given on the command line or in its
//! environment variable wins over the file.

use std::ffi::OsString;

use clap::{Arg, ArgAction, Args, ValueHint};
use staunch_command::config::{FlagArity, FlagShape, ServeFlags, ServeSetting};

use crate::serve_args::ServeArgs;

/// Flags the file cannot set: `config` names the file itself.
const NOT_FROM_FILE: &[&str] = &["config", "help", "version"];

/// The flags of `staunch serve`, as the `[serve]` table sees them.
pub struct SettableFlags {
    /// `serve`'s command, with no environment variables: checking the file's value of a flag
    /// must not read that flag's variable (a bad variable is not the file's mistake).
    serve: clap::Command,
}

impl SettableFlags {
    /// `staunch serve`'s flags.
    pub fn new() -> Self {
        let serve = ServeArgs::augment_args(clap::Command::new("serve")).mut_args(|a| a.env(None));
        Self { serve }
    }

    fn arg(&self, key: &str) -> Option<&Arg> {
        if NOT_FROM_FILE.contains(&key) {
            return None;
        }
        self.serve
            .get_arguments()
            .find(|a| a.get_id() == key && a.get_long().is_some())
    }

    /// The command-line words that say `setting` (`--allow-host=a --allow-host=b`).
    pub fn words(&self, setting: &ServeSetting) -> Vec<OsString> {
        let Some(long) = self.arg(&setting.key).and_then(Arg::get_long) else {
            return Vec::new();
        };
        if setting.values.is_empty() {
            return vec![format!("--{long}").into()];
        }
        setting
            .values
            .iter()
            .map(|v| format!("--{long}={v}").into())
            .collect()
    }
}

impl ServeFlags for SettableFlags {
    fn keys(&self) -> Vec<String> {
        self.serve
            .get_arguments()
            .filter(|a| a.get_long().is_some())
            .map(|a| a.get_id().to_string())
            .filter(|id| !NOT_FROM_FILE.contains(&id.as_str()))
            .collect()
    }

    fn shape(&self, key: &str) -> Option<FlagShape> {
        let arg = self.arg(key)?;
        let arity = match arg.get_action() {
            ArgAction::SetTrue | ArgAction::SetFalse => FlagArity::Switch,
            ArgAction::Append => FlagArity::Many,
            _ => FlagArity::One,
        };
        let path = matches!(
            arg.get_value_hint(),
            ValueHint::AnyPath | ValueHint::FilePath | ValueHint::DirPath
        );
        Some(FlagShape { arity, path })
    }

    fn check(&self, key: &str, values: &[String]) -> Result<(), String> {
        let setting = ServeSetting {
            key: key.to_string(),
            values: values.to_vec(),
        };
        let argv = std::iter::once(OsString::from("serve")).chain(self.words(&setting));
        match self.serve.clone().try_get_matches_from(argv) {
            Ok(_) => Ok(()),
            Err(e) => Err(clap_message(&e)),
        }
    }
}

/// A clap error's first line without its `error: ` prefix: the file's mistake, not the usage.
pub fn clap_message(e: &clap::Error) -> String {
    let text = e.to_string();
    let first = text.lines().next().unwrap_or_default();
    first.strip_prefix("error: ").unwrap_or(first).to_string()
}

/// A setting as the file would give it (tests).
#[cfg(test)]
pub(crate) fn setting(key: &str, values: &[&str]) -> ServeSetting {
    ServeSetting {
        key: key.into(),
        values: values.iter().map(|v| v.to_string()).collect(),
    }
}

/// Command-line words (tests).
#[cfg(test)]
pub(crate) fn argv(words: &[&str]) -> Vec<OsString> {
    words.iter().map(OsString::from).collect()
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;
    use crate::cli::Cli;

    /// One definition per setting: every flag of `serve` but `--config` is a key, shaped as
    /// its clap argument says.
    #[test]
    fn every_serve_flag_but_config_is_a_key_of_its_shape() {
        let flags = SettableFlags::new();
        let keys = flags.keys();
        let serve = Cli::command().find_subcommand("serve").unwrap().clone();
        for arg in serve.get_arguments().filter(|a| a.get_long().is_some()) {
            let id = arg.get_id().as_str();
            assert_eq!(
                keys.iter().any(|k| k == id),
                !NOT_FROM_FILE.contains(&id),
                "{id}"
            );
        }
        assert!(keys.len() > 60, "{keys:?}");
        let shape = |k: &str| flags.shape(k).unwrap();
        assert_eq!(shape("no_log").arity, FlagArity::Switch);
        assert_eq!(shape("allow_hosts").arity, FlagArity::Many);
        assert_eq!(shape("max_in_flight").arity, FlagArity::One);
        assert!(shape("store").path && shape("log_file").path);
        assert!(!shape("endpoint").path);
        assert!(flags.shape("config").is_none());
        assert!(flags.shape("max_inflight").is_none());
    }

    /// A value goes through its flag's own parser: what the flag refuses, the file does too,
    /// in the flag's words.
    #[test]
    fn a_value_is_checked_by_its_flags_parser() {
        let flags = SettableFlags::new();
        assert_eq!(flags.check("cancel_grace_ms", &["1.5s".into()]), Ok(()));
        assert_eq!(flags.check("max_in_flight", &["64".into()]), Ok(()));
        let refused = flags.check("max_in_flight", &["0".into()]).unwrap_err();
        assert!(refused.contains("--max-in-flight"), "{refused}");
        let refused = flags.check("http", &["nowhere".into()]).unwrap_err();
        assert!(refused.contains("--http"), "{refused}");
        assert_eq!(
            flags.words(&setting("allow_hosts", &["a", "b"])),
            argv(&["--allow-host=a", "--allow-host=b"])
        );
        assert_eq!(flags.words(&setting("no_log", &[])), argv(&["--no-log"]));
    }
}
