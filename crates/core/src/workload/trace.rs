//! Arrival traces: when each request came and how long its prompt and answer were. Formats
//! (detected from the header or the first record, or named):
//!
//! | format | file | time | prompt | answer | shared blocks |
//! |---|---|---|---|---|---|
//! | `azure` | CSV | `TIMESTAMP` (`2023-11-16 18:15:46.6805900`, UTC) | `ContextTokens` | `GeneratedTokens` | — |
//! | `burstgpt` | CSV | `Timestamp` (seconds) | `Request tokens` | `Response tokens` | — |
//! | `mooncake` | JSONL | `timestamp` (ms) | `input_length` | `output_length` | `hash_ids` |
//! | `goodput` | CSV or JSONL | `timestamp_ms` | `input_tokens` | `output_tokens` | `hash_ids` (JSONL) |
//!
//! BurstGPT's `Model`, `Total tokens` and `Log Type` columns are accepted and ignored; any
//! other column or key is an error, as is a negative or zero length (BurstGPT logs failed
//! requests with 0 response tokens: `--skip-invalid` drops them and counts them).

use std::path::Path;

use serde_json::Value;

use super::csv::split_line;
use super::source::{Collector, Loaded, Place, RecordError, WorkloadFileError, lines, read_file};

/// A trace layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceFormat {
    /// Azure LLM inference traces (2023, 2024).
    Azure,
    /// BurstGPT.
    BurstGpt,
    /// Mooncake JSONL with prefix-block hash ids.
    Mooncake,
    /// goodput's own columns, CSV or JSONL.
    Goodput,
}

struct Columns {
    time: &'static str,
    input: &'static str,
    output: &'static str,
    ignored: &'static [&'static str],
}

impl TraceFormat {
    /// Every format.
    pub const ALL: [TraceFormat; 4] = [
        TraceFormat::Azure,
        TraceFormat::BurstGpt,
        TraceFormat::Mooncake,
        TraceFormat::Goodput,
    ];

    /// `azure`, `burstgpt`, `mooncake` or `goodput`.
    pub fn as_str(self) -> &'static str {
        match self {
            TraceFormat::Azure => "azure",
            TraceFormat::BurstGpt => "burstgpt",
            TraceFormat::Mooncake => "mooncake",
            TraceFormat::Goodput => "goodput",
        }
    }

    /// A format by name.
    pub fn by_name(name: &str) -> Option<Self> {
        let name = name.trim().to_ascii_lowercase();
        Self::ALL.into_iter().find(|f| f.as_str() == name)
    }

    fn columns(self) -> Columns {
        match self {
            TraceFormat::Azure => Columns {
                time: "TIMESTAMP",
                input: "ContextTokens",
                output: "GeneratedTokens",
                ignored: &[],
            },
            TraceFormat::BurstGpt => Columns {
                time: "Timestamp",
                input: "Request tokens",
                output: "Response tokens",
                ignored: &["Model", "Total tokens", "Log Type"],
            },
            TraceFormat::Mooncake => Columns {
                time: "timestamp",
                input: "input_length",
                output: "output_length",
                ignored: &[],
            },
            TraceFormat::Goodput => Columns {
                time: "timestamp_ms",
                input: "input_tokens",
                output: "output_tokens",
                ignored: &[],
            },
        }
    }

    /// Microseconds per unit of the format's numeric timestamps.
    fn micros_per_unit(self) -> f64 {
        match self {
            TraceFormat::BurstGpt => 1e6,
            TraceFormat::Azure | TraceFormat::Mooncake | TraceFormat::Goodput => 1e3,
        }
    }
}

/// One request of a trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceRow {
    /// Line in the file.
    pub line: usize,
    /// Arrival, microseconds on the trace's own clock.
    pub at_us: u64,
    /// Prompt tokens.
    pub input_tokens: u32,
    /// Answer tokens.
    pub output_tokens: u32,
    /// Hash ids of the prompt's blocks (Mooncake): equal ids are equal text.
    pub hash_ids: Vec<u64>,
}

/// Reads a trace; `format` is detected when `None`.
pub fn load_trace(
    path: &Path,
    format: Option<TraceFormat>,
    skip_invalid: bool,
) -> Result<(TraceFormat, Loaded<TraceRow>), WorkloadFileError> {
    let bytes = read_file(path)?;
    let display = path.display().to_string();
    let mut rows = lines(&bytes);
    let Some((first_line, first)) = rows.next() else {
        return Err(WorkloadFileError::Empty { path: display });
    };
    let format_error = |message: String| WorkloadFileError::Format {
        path: display.clone(),
        message,
    };
    let mut collector = Collector::new(&display, skip_invalid);
    if first.trim_ascii_start().starts_with(b"{") {
        let format = match format {
            Some(format) => format,
            None => detect_jsonl(first).ok_or_else(|| {
                format_error(
                    "cannot tell the trace format from the first record: expected \
                     `timestamp_ms` (goodput) or `timestamp` (mooncake) keys"
                        .into(),
                )
            })?,
        };
        if !matches!(format, TraceFormat::Mooncake | TraceFormat::Goodput) {
            return Err(format_error(format!(
                "a {} trace is CSV, not JSONL",
                format.as_str()
            )));
        }
        for (line, text) in std::iter::once((first_line, first)).chain(rows) {
            let place = Place {
                path: &display,
                line,
            };
            collector.push(parse_jsonl_row(place, format, text))?;
        }
        return Ok((format, collector.finish()?));
    }
    let place = Place {
        path: &display,
        line: first_line,
    };
    let header = CsvHeader::parse(place, first, format).map_err(WorkloadFileError::Record)?;
    for (line, text) in rows {
        let place = Place {
            path: &display,
            line,
        };
        collector.push(header.row(place, text))?;
    }
    Ok((header.format, collector.finish()?))
}

fn detect_jsonl(first: &[u8]) -> Option<TraceFormat> {
    let Ok(Value::Object(map)) = serde_json::from_slice::<Value>(first) else {
        return None;
    };
    if map.contains_key("timestamp_ms") {
        Some(TraceFormat::Goodput)
    } else if map.contains_key("timestamp") {
        Some(TraceFormat::Mooncake)
    } else {
        None
    }
}

/// Parses one JSONL trace record.
pub fn parse_jsonl_row(
    place: Place<'_>,
    format: TraceFormat,
    line: &[u8],
) -> Result<TraceRow, RecordError> {
    let map = place.object(place.text(line)?)?;
    let columns = format.columns();
    place.no_unknown_keys(
        &map,
        &[columns.time, columns.input, columns.output, "hash_ids"],
    )?;
    let get = |key: &str| map.get(key).ok_or_else(|| place.error(key, "missing"));
    let time = place.non_negative(columns.time, get(columns.time)?)?;
    let hash_ids = match map.get("hash_ids") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(ids)) => ids
            .iter()
            .map(|id| {
                id.as_u64().ok_or_else(|| {
                    place.error(
                        "hash_ids",
                        format!("must hold non-negative integers, found {id}"),
                    )
                })
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(place.error("hash_ids", "must be an array of integers")),
    };
    Ok(TraceRow {
        line: place.line,
        at_us: micros(place, columns.time, time * format.micros_per_unit())?,
        input_tokens: place.tokens(columns.input, get(columns.input)?)?,
        output_tokens: place.tokens(columns.output, get(columns.output)?)?,
        hash_ids,
    })
}

fn micros(place: Place<'_>, field: &str, us: f64) -> Result<u64, RecordError> {
    if us.is_finite() && (0.0..1.8e19).contains(&us) {
        Ok(us.round() as u64)
    } else {
        Err(place.error(field, "is out of range"))
    }
}

/// A CSV header: the format and where its columns are.
#[derive(Debug, Clone)]
pub struct CsvHeader {
    format: TraceFormat,
    width: usize,
    time: usize,
    input: usize,
    output: usize,
}

impl CsvHeader {
    /// Reads the header line (detecting the format when `format` is `None`).
    pub fn parse(
        place: Place<'_>,
        line: &[u8],
        format: Option<TraceFormat>,
    ) -> Result<CsvHeader, RecordError> {
        let cells = split_line(place.text(line)?).map_err(|e| place.error("(csv)", e))?;
        let names: Vec<&str> = cells.iter().map(|c| c.trim()).collect();
        let has = |name: &str| names.contains(&name);
        let format = match format {
            Some(format) => format,
            None if has("TIMESTAMP") && has("ContextTokens") => TraceFormat::Azure,
            None if has("Timestamp") && has("Request tokens") => TraceFormat::BurstGpt,
            None if has("timestamp_ms") => TraceFormat::Goodput,
            None => {
                return Err(place.error(
                    "(header)",
                    format!(
                        "cannot tell the trace format from the columns {names:?}: expected \
                         TIMESTAMP,ContextTokens,GeneratedTokens (azure), Timestamp,Request \
                         tokens,Response tokens (burstgpt) or timestamp_ms,input_tokens,\
                         output_tokens (goodput)"
                    ),
                ));
            }
        };
        let columns = format.columns();
        let known: Vec<&str> = [columns.time, columns.input, columns.output]
            .into_iter()
            .chain(columns.ignored.iter().copied())
            .collect();
        if let Some(unknown) = names.iter().find(|name| !known.contains(name)) {
            let message = format!(
                "unknown column for a {} trace; expected {}",
                format.as_str(),
                known.join(", ")
            );
            return Err(place.error(*unknown, message));
        }
        let position = |name: &'static str| {
            names
                .iter()
                .position(|n| *n == name)
                .ok_or_else(|| place.error(name, "missing column"))
        };
        Ok(CsvHeader {
            format,
            width: names.len(),
            time: position(columns.time)?,
            input: position(columns.input)?,
            output: position(columns.output)?,
        })
    }

    /// The format the header belongs to.
    pub fn format(&self) -> TraceFormat {
        self.format
    }

    /// Parses one data line.
    pub fn row(&self, place: Place<'_>, line: &[u8]) -> Result<TraceRow, RecordError> {
        let cells = split_line(place.text(line)?).map_err(|e| place.error("(csv)", e))?;
        if cells.len() != self.width {
            return Err(place.error(
                "(csv)",
                format!("{} cells, but the header has {}", cells.len(), self.width),
            ));
        }
        let columns = self.format.columns();
        let time = cells[self.time].trim();
        let at_us = if self.format == TraceFormat::Azure {
            parse_datetime_us(time).map_err(|message| place.error(columns.time, message))?
        } else {
            let value = place.non_negative_text(columns.time, time)?;
            micros(place, columns.time, value * self.format.micros_per_unit())?
        };
        Ok(TraceRow {
            line: place.line,
            at_us,
            input_tokens: place.tokens_text(columns.input, &cells[self.input])?,
            output_tokens: place.tokens_text(columns.output, &cells[self.output])?,
            hash_ids: Vec::new(),
        })
    }
}

/// `YYYY-MM-DD HH:MM:SS[.fraction]` (or with `T`, optionally ending in `Z`), UTC, as
/// microseconds since 1970.
pub fn parse_datetime_us(text: &str) -> Result<u64, String> {
    let bad = || format!("`{text}` is not a date and time like 2023-11-16 18:15:46.6805900");
    let text = text.trim().trim_end_matches('Z');
    let (date, time) = text.split_once([' ', 'T']).ok_or_else(bad)?;
    let mut date_parts = date.split('-');
    let number = |parts: &mut std::str::Split<'_, char>, range: std::ops::RangeInclusive<u64>| {
        parts
            .next()
            .and_then(|p| p.parse::<u64>().ok())
            .filter(|n| range.contains(n))
    };
    let year = number(&mut date_parts, 1970..=9999).ok_or_else(bad)?;
    let month = number(&mut date_parts, 1..=12).ok_or_else(bad)?;
    let day = number(&mut date_parts, 1..=31).ok_or_else(bad)?;
    let (clock, fraction) = time.split_once('.').unwrap_or((time, ""));
    let mut clock_parts = clock.split(':');
    let hour = number(&mut clock_parts, 0..=23).ok_or_else(bad)?;
    let minute = number(&mut clock_parts, 0..=59).ok_or_else(bad)?;
    let second = number(&mut clock_parts, 0..=60).ok_or_else(bad)?;
    if date_parts.next().is_some() || clock_parts.next().is_some() {
        return Err(bad());
    }
    if !fraction.chars().all(|c| c.is_ascii_digit()) {
        return Err(bad());
    }
    let micros_fraction: u64 = format!("{fraction:0<6}")[..6].parse().map_err(|_| bad())?;
    // Years from 1970 on: the day count is never negative.
    let days = crate::units::days_from_civil(year as i64, month as i64, day as i64).max(0) as u64;
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second;
    Ok(seconds * 1_000_000 + micros_fraction)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn place(line: usize) -> Place<'static> {
        Place {
            path: "t.csv",
            line,
        }
    }

    #[test]
    fn azure_timestamps_are_read_to_the_microsecond() {
        assert_eq!(parse_datetime_us("1970-01-01 00:00:00").unwrap(), 0);
        let a = parse_datetime_us("2023-11-16 18:15:46.6805900").unwrap();
        let b = parse_datetime_us("2023-11-16T18:15:47.1Z").unwrap();
        assert_eq!(b - a, 419_410);
        assert_eq!(a / 1_000_000, 1_700_158_546);
        assert!(parse_datetime_us("2023-13-01 00:00:00").is_err());
        assert!(parse_datetime_us("yesterday").is_err());
        assert!(parse_datetime_us("2023-11-16 18:15:46.5x").is_err());
    }

    #[test]
    fn headers_pick_the_format_and_refuse_unknown_columns() {
        let azure = CsvHeader::parse(place(1), b"TIMESTAMP,ContextTokens,GeneratedTokens", None);
        assert_eq!(azure.unwrap().format(), TraceFormat::Azure);
        let burst = b"Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type";
        let burst = CsvHeader::parse(place(1), burst, None).unwrap();
        assert_eq!(burst.format(), TraceFormat::BurstGpt);
        let row = burst
            .row(place(2), b"5.5,ChatGPT,472,18,490,Conversation log")
            .unwrap();
        assert_eq!(
            (row.at_us, row.input_tokens, row.output_tokens),
            (5_500_000, 472, 18)
        );
        let error = burst
            .row(place(3), b"6,ChatGPT,472,0,472,Conversation log")
            .unwrap_err();
        assert_eq!(error.field, "Response tokens");
        let error = CsvHeader::parse(
            place(1),
            b"timestamp_ms,input_tokens,output_tokens,user",
            None,
        )
        .unwrap_err();
        assert_eq!(error.field, "user");
        assert!(error.message.contains("unknown column"));
        let error = CsvHeader::parse(place(1), b"when,what", None).unwrap_err();
        assert_eq!(error.field, "(header)");
    }

    #[test]
    fn rows_name_the_bad_field() {
        let header =
            CsvHeader::parse(place(1), b"timestamp_ms,input_tokens,output_tokens", None).unwrap();
        let row = header.row(place(2), b"1500.5,100,20").unwrap();
        assert_eq!(row.at_us, 1_500_500);
        for (line, field) in [
            (&b"-1,100,20"[..], "timestamp_ms"),
            (b"1,-100,20", "input_tokens"),
            (b"1,100", "(csv)"),
            (b"1,100,abc", "output_tokens"),
        ] {
            let error = header.row(place(4), line).unwrap_err();
            assert_eq!(error.field, field, "{error}");
            assert_eq!(error.line, 4);
        }
    }

    #[test]
    fn mooncake_records_keep_their_hash_ids() {
        let line = br#"{"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, 48]}"#;
        let row = parse_jsonl_row(place(1), TraceFormat::Mooncake, line).unwrap();
        assert_eq!(row.at_us, 27_482_000);
        assert_eq!(row.hash_ids, vec![46, 47, 48]);
        let bad = br#"{"timestamp": 1, "input_length": 5, "output_length": 5, "hash_ids": [-1]}"#;
        assert_eq!(
            parse_jsonl_row(place(1), TraceFormat::Mooncake, bad)
                .unwrap_err()
                .field,
            "hash_ids"
        );
        let extra = br#"{"timestamp": 1, "input_length": 5, "output_length": 5, "user": 3}"#;
        assert_eq!(
            parse_jsonl_row(place(1), TraceFormat::Mooncake, extra)
                .unwrap_err()
                .field,
            "user"
        );
    }
}
