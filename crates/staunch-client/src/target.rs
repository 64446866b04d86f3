//! Where a server is: a Streamable HTTP URL, or a command to start and speak to over stdio.

use crate::{Client, ClientError, ConnectOptions, StdioCommand};

/// Where a server is.
#[derive(Debug, Clone)]
pub enum Target {
    /// Its Streamable HTTP endpoint (either era).
    Http(String),
    /// A command speaking MCP on its stdin and stdout.
    Stdio(StdioCommand),
}

impl Target {
    /// The URL, or the command line, for messages.
    pub fn describe(&self) -> String {
        match self {
            Self::Http(u) => u.clone(),
            Self::Stdio(c) => c.display(),
        }
    }

    /// Connects (starting the command first).
    pub async fn connect(&self, opts: &ConnectOptions) -> Result<Client, ClientError> {
        match self {
            Self::Http(url) => Client::connect_http(url, opts).await,
            Self::Stdio(cmd) => Client::connect_stdio(cmd, opts).await,
        }
    }

    /// The server a command line names: the command after `--` when there is one, else a
    /// leading `http://` or `https://` URL among `words`; with the words that remain.
    pub fn from_words<'a>(
        words: &'a [String],
        command: &[String],
    ) -> Result<(Target, &'a [String]), String> {
        if let Some(cmd) = StdioCommand::from_argv(command) {
            return Ok((Target::Stdio(cmd), words));
        }
        match words.split_first() {
            Some((url, rest)) if url.starts_with("http://") || url.starts_with("https://") => {
                Ok((Target::Http(url.clone()), rest))
            }
            _ => Err("give a server URL first, or the server command after `--`".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_after_the_dashes_wins_and_else_the_first_word_must_be_a_url() {
        let words = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let given = words(&["echo", "text=hi"]);
        let (target, rest) = Target::from_words(&given, &words(&["staunch", "serve"])).unwrap();
        assert_eq!(target.describe(), "staunch serve");
        assert_eq!(rest, &given[..]);
        let given = words(&["http://127.0.0.1:9/mcp", "echo"]);
        let (target, rest) = Target::from_words(&given, &[]).unwrap();
        assert!(matches!(target, Target::Http(ref u) if u == "http://127.0.0.1:9/mcp"));
        assert_eq!(rest, &given[1..]);
        assert!(Target::from_words(&words(&["echo"]), &[]).is_err());
    }
}
