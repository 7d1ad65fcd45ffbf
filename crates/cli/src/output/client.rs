//! The terminal lines about the client's own overhead: dispatch lag, CPU use, and whether the
//! client may have been the bottleneck.

use std::fmt::Write as _;

use goodput_core::observe::overhead::ClientReport;

/// Appends the client section (nothing when the report has none).
pub(super) fn render(out: &mut String, client: Option<&ClientReport>) {
    let Some(client) = client else { return };
    let lag = &client.dispatch_lag_ms;
    let ms = |value: Option<f64>| value.map_or("-".to_string(), |v| format!("{v:.3}"));
    let cpu = match (client.cpu_secs, client.cpu_utilization) {
        (Some(secs), Some(share)) => format!(
            "{secs:.1} CPU s, {:.0} % of {} cores{}",
            share * 100.0,
            client.cores,
            if client.includes_simulator {
                " (embedded simulator included)"
            } else {
                ""
            }
        ),
        _ => "CPU not measured".to_string(),
    };
    let per_chunk = client.cpu_ms_per_1000_chunks.map_or(String::new(), |ms| {
        format!(
            " · {ms:.1} CPU ms per 1,000 chunks ({})",
            client.chunks_received
        )
    });
    let _ = writeln!(
        out,
        "\nClient overhead: dispatch lag p50 {} · p99 {} · max {} ms · {cpu}{per_chunk}",
        ms(lag.p50),
        ms(lag.p99),
        ms(lag.max)
    );
    if let Some(late) = &client.read_late_ms {
        let _ = writeln!(
            out,
            "  answers read after arriving (worst read per request): p50 {} · p99 {} · max {} ms \
             — chunk times are the arrivals",
            ms(late.p50),
            ms(late.p99),
            ms(late.max)
        );
    }
    let verdict = match &client.reason {
        Some(reason) => {
            format!("NOT TRUSTWORTHY — the client may have been the bottleneck: {reason}")
        }
        None => "the client was not the bottleneck".to_string(),
    };
    let _ = writeln!(out, "  {verdict}");
}
