//! Units at the edges: parsing durations people type (`500ms`, `1.5s`, `2m`) and printing them
//! back, serde adapters for durations as milliseconds, RFC 3339 timestamps, and base64 for bytes
//! carried in text (images, audio, label values). Inside the engine every duration is a
//! [`Duration`]; numbers with units appear only in reports.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A duration string that cannot be understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration `{text}`: {reason} (examples: 250us, 500ms, 1.5s, 2m, 1h)")]
pub struct DurationError {
    /// The input.
    pub text: String,
    /// What is wrong.
    pub reason: &'static str,
}

/// Parses a non-negative number followed by a unit: `ns`, `us`/`µs`, `ms`, `s`, `m`, `h`.
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let error = |reason| DurationError {
        text: text.to_string(),
        reason,
    };
    let trimmed = text.trim();
    let split = trimmed
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| error("add a unit"))?;
    let (number, unit) = trimmed.split_at(split);
    let value: f64 = number.parse().map_err(|_| error("not a number"))?;
    let seconds_per_unit = match unit.trim() {
        "ns" => 1e-9,
        "us" | "µs" => 1e-6,
        "ms" => 1e-3,
        "s" | "sec" | "secs" => 1.0,
        "m" | "min" | "mins" => 60.0,
        "h" | "hr" | "hrs" => 3600.0,
        _ => return Err(error("unknown unit")),
    };
    Duration::try_from_secs_f64(value * seconds_per_unit).map_err(|_| error("out of range"))
}

/// Prints a duration in the largest unit that keeps it short and exact enough to parse back.
pub fn format_duration(value: Duration) -> String {
    let us = value.as_micros();
    if us == 0 {
        return "0s".to_string();
    }
    let (amount, unit) = if us >= 1_000_000 {
        (us as f64 / 1e6, "s")
    } else if us >= 1000 {
        (us as f64 / 1e3, "ms")
    } else {
        (us as f64, "us")
    };
    let mut text = format!("{amount:.3}");
    while text.ends_with('0') {
        text.pop();
    }
    if text.ends_with('.') {
        text.pop();
    }
    format!("{text}{unit}")
}

/// Milliseconds as a float with microsecond resolution, for reports.
pub fn to_ms(value: Duration) -> f64 {
    (value.as_micros() as f64) / 1000.0
}

/// Serde adapter: a [`Duration`] as (fractional) milliseconds.
pub mod serde_ms {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes milliseconds.
    pub fn serialize<S: Serializer>(value: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(super::to_ms(*value))
    }

    /// Reads milliseconds.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let ms = f64::deserialize(d)?;
        Duration::try_from_secs_f64(ms / 1000.0)
            .map_err(|_| serde::de::Error::custom("expected a non-negative number of milliseconds"))
    }
}

/// `time` as RFC 3339 UTC with second precision, e.g. `2026-11-29T09:02:01Z`.
pub fn rfc3339(time: SystemTime) -> String {
    let secs = time.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 to (year, month, day) in the proleptic Gregorian calendar
/// (Howard Hinnant's algorithm).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

/// Days from 1970-01-01 to a proleptic Gregorian date, negative before it (Howard Hinnant's
/// algorithm; the inverse of the civil date [`rfc3339`] writes).
pub fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let shifted_month = (month + 9) % 12;
    let day_of_year = (153 * shifted_month + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// Base64, shared with the simulator (`goodput_protocol::base64`).
pub use goodput_protocol::base64::{
    BASE64_STANDARD, BASE64_URL, decode as base64_decode, encode as base64,
    encode_into as base64_into,
};

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn days_from_civil_inverts_civil_from_days() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(1969, 12, 31), -1);
        // 2000 is a leap year (divisible by 400): 30 years and 7 leap days, plus Jan and Feb.
        assert_eq!(days_from_civil(2000, 3, 1), 30 * 365 + 7 + 31 + 29);
        for days in (0..200_000u64).step_by(37) {
            let (y, m, d) = civil_from_days(days);
            let back = days_from_civil(y as i64, m as i64, d as i64);
            assert_eq!(back, days as i64, "{y}-{m}-{d}");
        }
    }

    #[test]
    fn parses_common_forms() {
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration(" 2m ").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("250us").unwrap(), Duration::from_micros(250));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        assert!(
            parse_duration("10")
                .unwrap_err()
                .to_string()
                .contains("add a unit")
        );
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("3 parsecs").is_err());
    }

    #[test]
    fn formats_round_trip() {
        for text in ["500ms", "1.5s", "2s", "250us", "0s", "12.345ms"] {
            assert_eq!(format_duration(parse_duration(text).unwrap()), text);
        }
    }
}
