//! Configuration errors that name where they are: the file, line and column, and the field
//! (`tool[2].args[1]`, `serve.http`) — what `staunch check` prints.

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// One mistake in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// 1-based line, when the mistake has a place in the file.
    pub line: Option<usize>,
    /// 1-based column (in characters).
    pub column: Option<usize>,
    /// The field, as a path (`tool[0] "export".deadline`); empty for the file as a whole.
    pub field: String,
    /// What is wrong and, where it helps, what would be right.
    pub message: String,
}

/// Every mistake found in one file (validation goes on after the first, so one `check` shows
/// them all).
#[derive(Debug, Clone, thiserror::Error)]
pub struct ConfigErrors {
    /// The file the mistakes are in.
    pub path: PathBuf,
    /// The mistakes, by line and column.
    pub errors: Vec<ConfigError>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.line, self.column) {
            (Some(l), Some(c)) => write!(f, "{l}:{c}: ")?,
            (Some(l), None) => write!(f, "{l}: ")?,
            _ => {}
        }
        if !self.field.is_empty() {
            write!(f, "{}: ", self.field)?;
        }
        f.write_str(&self.message)
    }
}

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.errors.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{}:{e}", self.path.display())?;
        }
        Ok(())
    }
}

/// Why a configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why it could not be read.
        source: std::io::Error,
    },
    /// The file is not valid.
    #[error("{0}")]
    Invalid(ConfigErrors),
}

/// Collects errors while validating one file, turning byte spans into lines and columns.
pub(crate) struct Errors<'a> {
    source: &'a str,
    pub(crate) list: Vec<ConfigError>,
}

impl<'a> Errors<'a> {
    pub(crate) fn new(source: &'a str) -> Self {
        Self {
            source,
            list: Vec::new(),
        }
    }

    /// A mistake at `span` in field `field`.
    pub(crate) fn at(
        &mut self,
        span: Range<usize>,
        field: impl Into<String>,
        message: impl Into<String>,
    ) {
        let (line, column) = line_col(self.source, span.start);
        self.list.push(ConfigError {
            line: Some(line),
            column: Some(column),
            field: field.into(),
            message: message.into(),
        });
    }

    /// The mistakes in the order they appear in the file.
    pub(crate) fn into_errors(mut self, path: &Path) -> ConfigErrors {
        self.list.sort_by_key(|e| (e.line, e.column));
        ConfigErrors {
            path: path.to_path_buf(),
            errors: self.list,
        }
    }

    pub(crate) fn finish(self, path: &Path) -> Result<(), ConfigErrors> {
        if self.list.is_empty() {
            Ok(())
        } else {
            Err(self.into_errors(path))
        }
    }
}

/// 1-based line and column of byte `offset` in `source`.
pub(crate) fn line_col(source: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(source.len());
    let before = source.get(..offset).unwrap_or(source);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_and_columns_count_from_one() {
        let s = "a = 1\nbb = 2\n";
        assert_eq!(line_col(s, 0), (1, 1));
        assert_eq!(line_col(s, 6), (2, 1));
        assert_eq!(line_col(s, 9), (2, 4));
        assert_eq!(line_col(s, 999), (3, 1));
    }
}
