//! Reading workload files (datasets and traces): errors that name the file, the line and the
//! field; `--skip-invalid` (skip bad records, count them, keep the first error to show); and
//! the field checks every parser shares (positive token counts, timestamps, strings).
//!
//! Files are read as bytes and split into lines, so a line that is not UTF-8 is an error about
//! that line, never a failure to read the file.

use std::fmt;
use std::path::Path;

use serde_json::{Map, Value};

use super::lengths::MAX_LENGTH;

/// A bad record: where it is and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct RecordError {
    /// The file.
    pub path: String,
    /// 1-based line number.
    pub line: usize,
    /// The field at fault (`(json)`, `(csv)` or `(encoding)` when the whole line is bad).
    pub field: String,
    /// What is wrong, and what was expected.
    pub message: String,
}

impl fmt::Display for RecordError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}: field `{}`: {}",
            self.path, self.line, self.field, self.message
        )
    }
}

/// A workload file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadFileError {
    /// The file cannot be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Cause.
        source: std::io::Error,
    },
    /// The file holds no record.
    #[error("{path}: the file holds no records")]
    Empty {
        /// The file.
        path: String,
    },
    /// The file as a whole is not in a known format.
    #[error("{path}: {message}")]
    Format {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// A record is bad (without `--skip-invalid`).
    #[error("{0} (add --skip-invalid to skip bad records and count them)")]
    Record(RecordError),
    /// Every record was bad (with `--skip-invalid`).
    #[error("{path}: every one of its {skipped} records is invalid; the first: {first}")]
    AllInvalid {
        /// The file.
        path: String,
        /// Records skipped.
        skipped: usize,
        /// The first problem.
        first: RecordError,
    },
}

/// Records read from a file, with what was skipped.
#[derive(Debug, Clone)]
pub struct Loaded<T> {
    /// The file.
    pub path: String,
    /// Good records, in file order.
    pub records: Vec<T>,
    /// Bad records skipped (`--skip-invalid`).
    pub skipped: usize,
    /// The first bad record skipped.
    pub first_skipped: Option<RecordError>,
}

/// Gathers records, failing on the first bad one unless bad ones are skipped.
#[derive(Debug)]
pub(crate) struct Collector<T> {
    skip_invalid: bool,
    loaded: Loaded<T>,
}

impl<T> Collector<T> {
    pub(crate) fn new(path: &str, skip_invalid: bool) -> Self {
        Collector {
            skip_invalid,
            loaded: Loaded {
                path: path.to_string(),
                records: Vec::new(),
                skipped: 0,
                first_skipped: None,
            },
        }
    }

    /// Takes one parsed record or its error.
    pub(crate) fn push(&mut self, record: Result<T, RecordError>) -> Result<(), WorkloadFileError> {
        match record {
            Ok(record) => self.loaded.records.push(record),
            Err(error) if self.skip_invalid => {
                self.loaded.skipped += 1;
                self.loaded.first_skipped.get_or_insert(error);
            }
            Err(error) => return Err(WorkloadFileError::Record(error)),
        }
        Ok(())
    }

    /// The records; an error when there are none.
    pub(crate) fn finish(self) -> Result<Loaded<T>, WorkloadFileError> {
        let loaded = self.loaded;
        if !loaded.records.is_empty() {
            return Ok(loaded);
        }
        match loaded.first_skipped {
            Some(first) => Err(WorkloadFileError::AllInvalid {
                path: loaded.path,
                skipped: loaded.skipped,
                first,
            }),
            None => Err(WorkloadFileError::Empty { path: loaded.path }),
        }
    }
}

/// The whole file.
pub(crate) fn read_file(path: &Path) -> Result<Vec<u8>, WorkloadFileError> {
    std::fs::read(path).map_err(|source| WorkloadFileError::Io {
        path: path.display().to_string(),
        source,
    })
}

/// Reads a JSONL file, one record per non-blank line parsed by `parse` (bad lines fail the
/// load, or are counted and skipped with `skip_invalid`).
pub(crate) fn load_jsonl<T>(
    path: &Path,
    skip_invalid: bool,
    parse: impl Fn(Place<'_>, &[u8]) -> Result<T, RecordError>,
) -> Result<Loaded<T>, WorkloadFileError> {
    let bytes = read_file(path)?;
    let display = path.display().to_string();
    let mut collector = Collector::new(&display, skip_invalid);
    for (line, text) in lines(&bytes) {
        let place = Place {
            path: &display,
            line,
        };
        collector.push(parse(place, text))?;
    }
    collector.finish()
}

/// Non-blank lines with their 1-based numbers (a trailing `\r` removed).
pub(crate) fn lines(bytes: &[u8]) -> impl Iterator<Item = (usize, &[u8])> {
    bytes
        .split(|&b| b == b'\n')
        .enumerate()
        .map(|(i, line)| (i + 1, line.strip_suffix(b"\r").unwrap_or(line)))
        .filter(|(_, line)| !line.iter().all(u8::is_ascii_whitespace))
}

/// Where in a file a record is, for its errors.
#[derive(Debug, Clone, Copy)]
pub struct Place<'a> {
    /// The file.
    pub path: &'a str,
    /// 1-based line number.
    pub line: usize,
}

impl Place<'_> {
    /// An error about `field` of this record.
    pub fn error(&self, field: impl Into<String>, message: impl Into<String>) -> RecordError {
        RecordError {
            path: self.path.to_string(),
            line: self.line,
            field: field.into(),
            message: message.into(),
        }
    }

    /// A line as UTF-8 text.
    pub(crate) fn text<'b>(&self, line: &'b [u8]) -> Result<&'b str, RecordError> {
        std::str::from_utf8(line).map_err(|e| self.error("(encoding)", format!("not UTF-8: {e}")))
    }

    /// A line as a JSON object.
    pub(crate) fn object(&self, text: &str) -> Result<Map<String, Value>, RecordError> {
        match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(map)) => Ok(map),
            Ok(other) => Err(self.error(
                "(json)",
                format!("expected a JSON object, found {}", kind_of(&other)),
            )),
            Err(error) => Err(self.error("(json)", format!("not valid JSON: {error}"))),
        }
    }

    /// Fails on any key of `map` not in `known`.
    pub(crate) fn no_unknown_keys(
        &self,
        map: &Map<String, Value>,
        known: &[&str],
    ) -> Result<(), RecordError> {
        match map.keys().find(|key| !known.contains(&key.as_str())) {
            Some(key) => Err(self.error(
                key.as_str(),
                format!("unknown field; expected {}", known.join(", ")),
            )),
            None => Ok(()),
        }
    }

    /// A token count: a whole number from 1 to [`MAX_LENGTH`].
    pub(crate) fn tokens(&self, field: &str, value: &Value) -> Result<u32, RecordError> {
        let invalid = |message: String| self.error(field, message);
        match value {
            Value::Number(number) => {
                if let Some(n) = number.as_u64() {
                    return check_tokens(n).map_err(invalid);
                }
                if number.as_i64().is_some_and(|n| n < 0)
                    || number.as_f64().is_some_and(|n| n < 0.0)
                {
                    return Err(invalid(format!("must not be negative, got {number}")));
                }
                Err(invalid(format!(
                    "must be a whole number of tokens, got {number}"
                )))
            }
            other => Err(invalid(format!(
                "must be a number of tokens, found {}",
                kind_of(other)
            ))),
        }
    }

    /// A token count written as text (a CSV cell).
    pub(crate) fn tokens_text(&self, field: &str, text: &str) -> Result<u32, RecordError> {
        let text = text.trim();
        if text.starts_with('-') {
            return Err(self.error(field, format!("must not be negative, got {text}")));
        }
        let n: u64 = text.parse().map_err(|_| {
            self.error(
                field,
                format!("must be a whole number of tokens, got `{text}`"),
            )
        })?;
        check_tokens(n).map_err(|message| self.error(field, message))
    }

    /// A non-negative finite number (a timestamp).
    pub(crate) fn non_negative(&self, field: &str, value: &Value) -> Result<f64, RecordError> {
        match value.as_f64() {
            Some(n) if n.is_finite() && n >= 0.0 => Ok(n),
            Some(n) => Err(self.error(field, format!("must not be negative, got {n}"))),
            None => Err(self.error(field, format!("must be a number, found {}", kind_of(value)))),
        }
    }

    /// A non-negative finite number written as text (a CSV cell).
    pub(crate) fn non_negative_text(&self, field: &str, text: &str) -> Result<f64, RecordError> {
        let text = text.trim();
        match text.parse::<f64>() {
            Ok(n) if n.is_finite() && n >= 0.0 => Ok(n),
            Ok(_) => Err(self.error(field, format!("must be a non-negative number, got {text}"))),
            Err(_) => Err(self.error(field, format!("must be a number, got `{text}`"))),
        }
    }

    /// A string field.
    pub(crate) fn string<'v>(&self, field: &str, value: &'v Value) -> Result<&'v str, RecordError> {
        value
            .as_str()
            .ok_or_else(|| self.error(field, format!("must be a string, found {}", kind_of(value))))
    }
}

fn check_tokens(n: u64) -> Result<u32, String> {
    match u32::try_from(n) {
        Ok(0) => Err("must be at least 1 token".into()),
        Ok(n) if n <= MAX_LENGTH => Ok(n),
        _ => Err(format!("{n} is above the limit of {MAX_LENGTH} tokens")),
    }
}

/// What kind of JSON value this is, for messages.
pub(crate) fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn token_counts_are_checked_with_the_field_named() {
        let place = Place {
            path: "f.jsonl",
            line: 3,
        };
        assert_eq!(place.tokens("n", &json!(12)), Ok(12));
        let error = place.tokens("output_tokens", &json!(-5)).unwrap_err();
        assert_eq!(
            error.to_string(),
            "f.jsonl:3: field `output_tokens`: must not be negative, got -5"
        );
        assert!(place.tokens("n", &json!(0)).is_err());
        assert!(place.tokens("n", &json!(1.5)).is_err());
        assert!(place.tokens("n", &json!("7")).is_err());
        assert!(
            place
                .tokens_text("n", "-1")
                .unwrap_err()
                .message
                .contains("negative")
        );
        assert_eq!(place.tokens_text("n", " 42 "), Ok(42));
    }

    #[test]
    fn skipped_records_are_counted_and_an_all_bad_file_is_an_error() {
        let place = Place { path: "p", line: 1 };
        let mut strict: Collector<u32> = Collector::new("p", false);
        assert!(strict.push(Err(place.error("x", "bad"))).is_err());
        let mut lenient: Collector<u32> = Collector::new("p", true);
        lenient.push(Err(place.error("x", "bad"))).ok();
        lenient.push(Ok(4)).ok();
        let loaded = lenient.finish().ok();
        assert_eq!(
            loaded.as_ref().map(|l| (l.records.len(), l.skipped)),
            Some((1, 1))
        );
        let mut none: Collector<u32> = Collector::new("p", true);
        none.push(Err(place.error("x", "bad"))).ok();
        assert!(matches!(
            none.finish(),
            Err(WorkloadFileError::AllInvalid { .. })
        ));
        let empty: Collector<u32> = Collector::new("p", true);
        assert!(matches!(
            empty.finish(),
            Err(WorkloadFileError::Empty { .. })
        ));
    }
}
