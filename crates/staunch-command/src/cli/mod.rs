//! staunch.toml on the command line (the `cli` feature): its `[serve]` table applied as flags
//! ([`SettableFlags`], [`with_settings`]), and `staunch check` ([`check`]).
//!
//! Each key of `[serve]` is a flag of the command that reads the file (its id: the flag's name
//! with `_` for `-`), so a setting is defined once, by its clap argument, which also makes
//! `--help`, the environment variable, the man page and the generated reference. A value is
//! parsed by that flag's own parser, so the file takes what the flag takes (`"1.5s"`, `64`,
//! `["a", "b"]`). A flag given on the command line or in its environment variable wins over
//! the file.

pub mod check;

use std::ffi::OsString;

use clap::parser::ValueSource;
use clap::{Arg, ArgAction, Args, Parser, ValueHint};

use crate::config::{FlagArity, FlagShape, ServeFlags, ServeSetting};

/// Flags the file cannot set: `config` names the file itself.
const NOT_FROM_FILE: &[&str] = &["config", "help", "version"];

/// A command's flags, as the `[serve]` table sees them.
#[derive(Debug, Clone)]
pub struct SettableFlags {
    /// The command, with no environment variables: checking the file's value of a flag must
    /// not read that flag's variable (a bad variable is not the file's mistake).
    serve: clap::Command,
}

impl SettableFlags {
    /// The flags of `A` (`staunch serve`'s, for the binary).
    pub fn of<A: Args>() -> Self {
        let serve = A::augment_args(clap::Command::new("serve")).mut_args(|a| a.env(None));
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

/// `cli` (parsed from `argv`, a program whose first word names its command) with `settings`
/// applied: each one whose flag `argv` and the
/// environment do not give goes in as if written right after the command's name, and the
/// line is parsed again, so a value and its flag's conflicts are checked as on the command line.
pub fn with_settings<P: Parser>(
    cli: P,
    argv: Vec<OsString>,
    settings: &[ServeSetting],
    flags: &SettableFlags,
) -> Result<P, String> {
    let matches = P::command()
        .try_get_matches_from(&argv)
        .map_err(|e| clap_message(&e))?;
    let Some((_, sub)) = matches.subcommand() else {
        return Ok(cli);
    };
    let given = |key: &str| {
        sub.try_get_raw(key).is_ok()
            && sub
                .value_source(key)
                .is_some_and(|s| s != ValueSource::DefaultValue)
    };
    let words: Vec<OsString> = settings
        .iter()
        .filter(|s| !given(&s.key))
        .flat_map(|s| flags.words(s))
        .collect();
    if words.is_empty() {
        return Ok(cli);
    }
    // The program has no options of its own, so the command's name is the first word after it.
    let mut argv = argv;
    argv.splice(2..2, words);
    let matches = P::command()
        .try_get_matches_from(argv)
        .map_err(|e| clap_message(&e))?;
    P::from_arg_matches(&matches).map_err(|e| clap_message(&e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Parser)]
    struct Program {
        #[command(subcommand)]
        command: Sub,
    }

    #[derive(Debug, clap::Subcommand)]
    enum Sub {
        Serve(Flags),
    }

    #[derive(Debug, Clone, Args)]
    struct Flags {
        #[arg(long)]
        config: Option<String>,
        #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..))]
        workers: u32,
        #[arg(long = "allow-host")]
        allow_hosts: Vec<String>,
        #[arg(long, conflicts_with = "log_file")]
        no_log: bool,
        #[arg(long, value_hint = ValueHint::FilePath)]
        log_file: Option<String>,
    }

    fn argv(words: &[&str]) -> Vec<OsString> {
        words.iter().map(OsString::from).collect()
    }

    #[test]
    fn every_flag_but_config_is_a_key_of_its_shape_checked_by_its_parser() {
        let flags = SettableFlags::of::<Flags>();
        assert_eq!(
            flags.keys(),
            ["workers", "allow_hosts", "no_log", "log_file"]
        );
        assert_eq!(flags.shape("no_log").unwrap().arity, FlagArity::Switch);
        assert_eq!(flags.shape("allow_hosts").unwrap().arity, FlagArity::Many);
        assert!(flags.shape("log_file").unwrap().path);
        assert!(flags.shape("config").is_none());
        assert_eq!(flags.check("workers", &["3".into()]), Ok(()));
        assert!(
            flags
                .check("workers", &["0".into()])
                .unwrap_err()
                .contains("--workers")
        );
        assert_eq!(
            flags.words(&ServeSetting::new("allow_hosts", &["a", "b"])),
            argv(&["--allow-host=a", "--allow-host=b"])
        );
    }

    #[test]
    fn the_command_line_wins_and_a_conflict_is_refused_in_claps_words() {
        let flags = SettableFlags::of::<Flags>();
        let words = argv(&["prog", "serve", "--workers", "2"]);
        let parsed = Program::try_parse_from(&words).unwrap();
        let table = [
            ServeSetting::new("workers", &["5"]),
            ServeSetting::new("allow_hosts", &["x"]),
        ];
        let Sub::Serve(got) = with_settings(parsed, words, &table, &flags)
            .unwrap()
            .command;
        assert_eq!((got.workers, got.allow_hosts), (2, vec!["x".to_string()]));
        let words = argv(&["prog", "serve", "--log-file", "l"]);
        let parsed = Program::try_parse_from(&words).unwrap();
        let err =
            with_settings(parsed, words, &[ServeSetting::new("no_log", &[])], &flags).unwrap_err();
        assert!(
            err.contains("--no-log") && err.contains("--log-file"),
            "{err}"
        );
    }
}
