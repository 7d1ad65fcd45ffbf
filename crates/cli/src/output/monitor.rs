//! The monitor's rolling table: one line per window.

use goodput_core::observe::monitor::MonitorRow;

/// The column headings.
pub(crate) fn header() -> String {
    format!(
        "{:>8} {:>9} {:>9} {:>8} {:>8} {:>9} {:>7} {:>10} {:>8} {:>8}  flags",
        "t (s)",
        "arrive/s",
        "done/s",
        "running",
        "waiting",
        "trend/s",
        "KV %",
        "gen tok/s",
        "in/req",
        "out/req"
    )
}

fn cell(value: Option<f64>, decimals: usize) -> String {
    value.map_or("-".to_string(), |v| format!("{v:.decimals$}"))
}

/// One row.
pub(crate) fn row(row: &MonitorRow) -> String {
    let flags = if row.flags.is_empty() {
        String::new()
    } else {
        format!("! {}", row.flags.join(", "))
    };
    format!(
        "{:>8.1} {:>9} {:>9} {:>8} {:>8} {:>9} {:>7} {:>10} {:>8} {:>8}  {flags}",
        row.end_secs,
        cell(row.arrivals_per_sec, 2),
        cell(row.completions_per_sec, 2),
        cell(row.running, 1),
        cell(row.waiting, 1),
        cell(row.queue_growth_per_sec, 2),
        cell(row.kv_cache_usage.map(|v| v * 100.0), 1),
        cell(row.generation_tokens_per_sec, 0),
        cell(row.input_tokens_per_request, 0),
        cell(row.output_tokens_per_request, 0),
    )
}
