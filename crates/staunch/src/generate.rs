//! What is generated from the command line's own definitions, so that it cannot drift from
//! what the commands parse: shell completions (`staunch completions SHELL`), man pages (the
//! hidden `staunch man --out DIR`, used by `scripts/dist`) and the book's page of every command
//! and flag (`docs/src/reference/cli-generated.md`, rendered and kept current by a test).

#[cfg(test)]
use std::path::Path;
use std::path::PathBuf;

use clap::{Args, Command, CommandFactory};

use crate::cli::Cli;

const COMPLETIONS_HELP: &str = "\
Examples:
  staunch completions bash > ~/.local/share/bash-completion/completions/staunch
  staunch completions zsh > ~/.zfunc/_staunch
  staunch completions fish > ~/.config/fish/completions/staunch.fish

Exit status:
  0  the script was printed
  2  usage error (an unknown shell)";

/// Options of `staunch completions`.
#[derive(Debug, Args)]
#[command(after_help = COMPLETIONS_HELP)]
pub struct CompletionsArgs {
    /// The shell to complete in.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// Options of `staunch man` (hidden: for packagers).
#[derive(Debug, Args)]
#[command(
    after_help = "Exit status:\n  0  the pages were written\n  1  a page could not be written"
)]
pub struct ManArgs {
    /// The directory the pages are written to (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

/// Prints the completion script for `args.shell` on stdout.
pub fn completions(args: CompletionsArgs) -> anyhow::Result<i32> {
    let mut cmd = Cli::command();
    clap_complete::generate(args.shell, &mut cmd, "staunch", &mut std::io::stdout());
    Ok(0)
}

/// Writes `staunch.1` and one page per command (`staunch-serve.1`, `staunch-jobs-list.1`, …).
pub fn man(args: ManArgs) -> anyhow::Result<i32> {
    std::fs::create_dir_all(&args.out)?;
    let mut root = Cli::command();
    root.build();
    let mut written = 0;
    for (name, cmd) in pages(&root, "staunch") {
        let path = args.out.join(format!("{name}.1"));
        let mut out = Vec::new();
        clap_mangen::Man::new(cmd.clone().name(name.clone())).render(&mut out)?;
        std::fs::write(&path, out)?;
        written += 1;
    }
    eprintln!("staunch man: {written} pages in {}", args.out.display());
    Ok(0)
}

/// Every visible command under `cmd` (itself first), with its page name.
fn pages(cmd: &Command, name: &str) -> Vec<(String, Command)> {
    let mut out = vec![(name.to_string(), cmd.clone())];
    for sub in visible_subcommands(cmd) {
        out.extend(pages(sub, &format!("{name}-{}", sub.get_name())));
    }
    out
}

fn visible_subcommands(cmd: &Command) -> impl Iterator<Item = &Command> {
    cmd.get_subcommands()
        .filter(|c| !c.is_hide_set() && c.get_name() != "help")
}

#[cfg(test)]
/// The book's page of every command and flag, in Markdown.
pub fn reference() -> String {
    let mut root = Cli::command();
    root.build();
    let mut out = String::from(
        "# Every command and flag\n\n\
         <!-- Generated from the command line's definitions by \
         `STAUNCH_BLESS=1 cargo test -p staunch --bin staunch reference`; do not edit. -->\n\n\
         The same text as `staunch COMMAND --help`, on one page. Every flag of `serve` (and of \
         `proxy`, which takes them all) can also be set by the environment variable shown, and \
         by the key shown in the `[serve]` table of the `--config` file (a switch as `true`, a \
         repeatable flag as an array); a flag wins over its variable, which wins over the \
         file.\n",
    );
    for (name, cmd) in pages(&root, "staunch").into_iter().skip(1) {
        command_section(&mut out, &name.replace('-', " "), &cmd);
    }
    out
}

#[cfg(test)]
fn command_section(out: &mut String, name: &str, cmd: &Command) {
    let about = cmd
        .get_long_about()
        .or(cmd.get_about())
        .map(|s| one_line(&s.to_string()))
        .unwrap_or_default();
    let usage = cmd
        .clone()
        .name(name.to_string())
        .render_usage()
        .to_string();
    let usage = usage.trim_start_matches("Usage: ").trim();
    out.push_str(&format!(
        "\n## `{name}`\n\n{about}\n\n```text\n{usage}\n```\n"
    ));
    let positional: Vec<&clap::Arg> = cmd.get_positionals().filter(|a| !a.is_hide_set()).collect();
    if !positional.is_empty() {
        out.push_str("\n| argument | meaning |\n|---|---|\n");
        for a in positional {
            let value = a
                .get_value_names()
                .map(|v| v.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(" "))
                .unwrap_or_else(|| a.get_id().as_str().to_uppercase());
            out.push_str(&format!("| `{value}` | {} |\n", cell(&help_of(a))));
        }
    }
    // The keys of staunch.toml's `[serve]` table: serve's flags, which proxy takes too.
    let file_keys = if matches!(name, "staunch serve" | "staunch proxy") {
        use staunch_command::config::ServeFlags as _;
        crate::serve_args::settable_flags().keys()
    } else {
        Vec::new()
    };
    let mut headings: Vec<Option<&str>> = Vec::new();
    for a in
        cmd.get_opts().chain(cmd.get_arguments().filter(|a| {
            a.get_long().is_some() && !a.get_num_args().is_some_and(|n| n.takes_values())
        }))
    {
        if !headings.contains(&a.get_help_heading()) {
            headings.push(a.get_help_heading());
        }
    }
    for heading in headings {
        let flags: Vec<&clap::Arg> = cmd
            .get_arguments()
            .filter(|a| {
                a.get_long().is_some()
                    && !a.is_hide_set()
                    && a.get_help_heading() == heading
                    && !matches!(a.get_id().as_str(), "help" | "version")
            })
            .collect();
        if flags.is_empty() {
            continue;
        }
        let (file_head, file_rule) = if file_keys.is_empty() {
            ("", "")
        } else {
            (" staunch.toml |", "---|")
        };
        out.push_str(&format!(
            "\n### {}\n\n| flag | variable |{file_head} default | meaning |\n|---|---|{file_rule}---|---|\n",
            heading.unwrap_or("Options")
        ));
        for a in flags {
            let env = a
                .get_env()
                .map(|e| format!("`{}`", e.to_string_lossy()))
                .unwrap_or_default();
            let file = if file_keys.is_empty() {
                String::new()
            } else {
                let id = a.get_id().as_str();
                let key = file_keys.iter().any(|k| k == id);
                format!(
                    " {} |",
                    if key {
                        format!("`{id}`")
                    } else {
                        String::new()
                    }
                )
            };
            out.push_str(&format!(
                "| {} | {env} |{file} {} | {} |\n",
                flag_cell(a),
                default_cell(a),
                cell(&help_of(a))
            ));
        }
    }
    if let Some(after) = cmd.get_after_long_help().or(cmd.get_after_help()) {
        out.push_str(&format!(
            "\n```text\n{}\n```\n",
            after.to_string().trim_end()
        ));
    }
}

#[cfg(test)]
fn flag_cell(a: &clap::Arg) -> String {
    let mut s = String::new();
    if let Some(short) = a.get_short() {
        s.push_str(&format!("`-{short}`, "));
    }
    s.push_str(&format!("`--{}", a.get_long().unwrap_or_default()));
    let takes_value = a.get_num_args().is_some_and(|n| n.takes_values())
        && !matches!(
            a.get_action(),
            clap::ArgAction::SetTrue | clap::ArgAction::Count
        );
    if takes_value {
        let value = a
            .get_value_names()
            .and_then(|v| v.first())
            .map(|v| v.to_string())
            .unwrap_or_else(|| a.get_id().as_str().to_uppercase());
        s.push_str(&format!(" {value}"));
    }
    s.push('`');
    s
}

#[cfg(test)]
fn default_cell(a: &clap::Arg) -> String {
    if matches!(a.get_action(), clap::ArgAction::SetTrue) {
        return String::new();
    }
    let values: Vec<String> = a
        .get_default_values()
        .iter()
        .map(|v| v.to_string_lossy().into_owned())
        .filter(|v| !v.is_empty())
        .collect();
    if values.is_empty() {
        String::new()
    } else {
        format!("`{}`", values.join(","))
    }
}

#[cfg(test)]
fn help_of(a: &clap::Arg) -> String {
    a.get_long_help()
        .or(a.get_help())
        .map(|s| one_line(&s.to_string()))
        .unwrap_or_default()
}

#[cfg(test)]
/// Paragraphs and wrapped lines joined into one line, for a table cell.
fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
fn cell(s: &str) -> String {
    s.replace('|', "\\|")
}

#[cfg(test)]
/// Where the generated page lives in the repository.
fn reference_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/src/reference/cli-generated.md")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_page_is_current() {
        let want = reference();
        let path = reference_path();
        if std::env::var_os("STAUNCH_BLESS").is_some() {
            std::fs::write(&path, &want).unwrap();
            return;
        }
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            have == want,
            "docs/src/reference/cli-generated.md is stale: run \
             `STAUNCH_BLESS=1 cargo test -p staunch --bin staunch reference`"
        );
    }

    #[test]
    fn the_reference_names_every_serve_flag_with_its_variable() {
        let page = reference();
        let serve = Cli::command().find_subcommand("serve").unwrap().clone();
        for a in serve.get_arguments().filter(|a| !a.is_hide_set()) {
            let (Some(long), Some(env)) = (a.get_long(), a.get_env()) else {
                continue;
            };
            assert!(page.contains(&format!("`--{long}")), "--{long} missing");
            assert!(
                page.contains(&format!("`{}`", env.to_string_lossy())),
                "{env:?} missing"
            );
        }
    }

    /// The configuration page's table of groups lists each `serve` heading, in `--help`'s
    /// order, with exactly its flags in their order: it is written by hand, so it is checked.
    #[test]
    fn the_configuration_pages_groups_are_the_help_headings() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../docs/src/operations/configuration.md");
        let page = std::fs::read_to_string(&path).unwrap();
        let table = page
            .split("## Groups")
            .nth(1)
            .and_then(|t| t.split("\n## ").next())
            .expect("a Groups section");
        let documented: Vec<(String, Vec<String>)> = table
            .lines()
            .filter(|l| l.starts_with("| ") && !l.starts_with("| heading"))
            .map(|l| {
                let cells: Vec<&str> = l.split(" | ").collect();
                let flags = cells[1]
                    .split(", ")
                    .map(|f| f.trim_matches('`').to_string())
                    .collect();
                (cells[0].trim_start_matches("| ").to_string(), flags)
            })
            .collect();
        let serve = Cli::command().find_subcommand("serve").unwrap().clone();
        let mut headings: Vec<(String, Vec<String>)> = Vec::new();
        for a in serve.get_arguments() {
            let (Some(h), Some(long)) = (a.get_help_heading(), a.get_long()) else {
                continue;
            };
            let flag = format!("--{long}");
            match headings.iter_mut().find(|(name, _)| name == h) {
                Some((_, flags)) => flags.push(flag),
                None => headings.push((h.to_string(), vec![flag])),
            }
        }
        let row = |(h, flags): &(String, Vec<String>)| {
            let flags: Vec<String> = flags.iter().map(|f| format!("`{f}`")).collect();
            format!("| {h} | {} |", flags.join(", "))
        };
        let want: Vec<String> = headings.iter().map(row).collect();
        let have: Vec<String> = documented.iter().map(row).collect();
        assert_eq!(
            have, want,
            "docs/src/operations/configuration.md's groups differ from `staunch serve --help`"
        );
    }

    #[test]
    fn man_pages_cover_every_visible_command() {
        let mut root = Cli::command();
        root.build();
        let names: Vec<String> = pages(&root, "staunch").into_iter().map(|p| p.0).collect();
        for want in [
            "staunch",
            "staunch-serve",
            "staunch-proxy",
            "staunch-jobs-list",
        ] {
            assert!(names.iter().any(|n| n == want), "{want} in {names:?}");
        }
        assert!(
            !names.iter().any(|n| n == "staunch-man"),
            "hidden stays hidden"
        );
    }
}
