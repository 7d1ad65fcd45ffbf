//! Each shard's clock against the target's, from the `Date` headers its requests received:
//! the target stamped a response's `Date` (whole seconds, `D`) between the request's send and
//! the response's arrival, so the shard's clock offset `θ = local − target` satisfies
//! `L_sent − (D + 1) < θ ≤ L_response − D` for every request; intersected over a run, the
//! interval narrows to about the response latency at the seconds' edges. Comparing two shards'
//! offsets gives the skew between their clocks, with no clock protocol between the machines.

use super::ShardDir;
pub use crate::report::shards::ClockOffset;

/// The shard's offset, when its target sent `Date` headers and ran in real time.
pub fn offset(dir: &ShardDir) -> Option<ClockOffset> {
    let info = dir.manifest.shard.as_ref()?;
    if dir.manifest.config.time_scale != 1.0 {
        return None;
    }
    let start_ms = info.start_at_unix_ms as f64;
    let (mut low, mut high, mut samples) = (f64::MIN, f64::MAX, 0);
    for record in &dir.records {
        let (Some(sent), Some(response)) = (record.sent_us, record.response_us) else {
            continue;
        };
        let Some(date) = record
            .headers
            .iter()
            .find(|(name, _)| name == "date")
            .and_then(|(_, value)| parse_http_date(value))
        else {
            continue;
        };
        let date_ms = date as f64 * 1e3;
        low = low.max(start_ms + sent as f64 / 1e3 - date_ms - 1e3);
        high = high.min(start_ms + response as f64 / 1e3 - date_ms);
        samples += 1;
    }
    (samples > 0 && low <= high).then(|| ClockOffset {
        estimate_ms: (low + high) / 2.0,
        low_ms: low,
        high_ms: high,
        samples,
    })
}

/// The clock skew between shards: the spread of their estimates, and the least spread their
/// intervals allow.
pub fn skew(offsets: &[&ClockOffset]) -> Option<(f64, f64)> {
    if offsets.len() < 2 {
        return None;
    }
    let fold = |f: fn(&ClockOffset) -> f64, pick: fn(f64, f64) -> f64, init| {
        offsets.iter().map(|o| f(o)).fold(init, pick)
    };
    let spread =
        fold(|o| o.estimate_ms, f64::max, f64::MIN) - fold(|o| o.estimate_ms, f64::min, f64::MAX);
    let at_least = fold(|o| o.low_ms, f64::max, f64::MIN) - fold(|o| o.high_ms, f64::min, f64::MAX);
    Some((spread, at_least.max(0.0)))
}

/// Unix seconds of an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`).
pub fn parse_http_date(text: &str) -> Option<u64> {
    let mut parts = text.split_whitespace();
    let _weekday = parts.next()?;
    let day: i64 = parts.next()?.parse().ok()?;
    let month = parts.next()?;
    let year: i64 = parts.next()?.parse().ok()?;
    let time = parts.next()?;
    if parts.next()? != "GMT" {
        return None;
    }
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let month = MONTHS.iter().position(|m| *m == month)? + 1;
    let stamp = format!("{year:04}-{month:02}-{day:02}T{time}Z");
    let at = crate::shard::parse_start_at(&stamp).ok()?;
    at.duration_since(std::time::UNIX_EPOCH)
        .ok()
        .map(|d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_dates_parse() {
        assert_eq!(
            parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(784_111_777)
        );
        assert_eq!(parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT"), None);
        assert_eq!(parse_http_date("Sun, 06 Nov 1994 08:49:37 CET"), None);
    }

    #[test]
    fn skew_is_the_spread_and_its_guaranteed_part() {
        let at = |estimate_ms: f64, half: f64| ClockOffset {
            estimate_ms,
            low_ms: estimate_ms - half,
            high_ms: estimate_ms + half,
            samples: 1,
        };
        let (a, b) = (at(0.0, 5.0), at(100.0, 5.0));
        assert_eq!(skew(&[&a, &b]), Some((100.0, 90.0)));
        let (c, d) = (at(0.0, 500.0), at(100.0, 500.0));
        assert_eq!(skew(&[&c, &d]), Some((100.0, 0.0)));
        assert_eq!(skew(&[&a]), None);
    }
}
