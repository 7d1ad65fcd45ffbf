//! The terminal summary and Markdown of `goodput tune`: one row per configuration (rank,
//! capacity, goodput and output throughput per accelerator, tokens per second per user, cost,
//! start-up time, on the front or not), the Pareto front, the best configuration with its
//! margin and significance, each failure with the end of its server's log, and with
//! `--verify-top` the predictions beside the live measurements.

use std::fmt::Write as _;

use goodput_core::report::tune::{
    TuneConfiguration, TuneFigures, TuneMeasure, TuneMode, TuneReport,
};

/// Log lines a failure shows without `--details`.
const TAIL_LINES: usize = 5;

fn number(value: Option<f64>, digits: usize) -> String {
    value.map_or("–".to_string(), |v| format!("{v:.digits$}"))
}

/// The capacity with its unit, or why there is none.
fn capacity(figures: &TuneFigures) -> String {
    match figures.capacity {
        Some(c) if figures.load_unit == "concurrency" => format!("{c:.0} in flight"),
        Some(c) => format!("{c:.3} {}", figures.load_unit),
        None => "none met the SLO".to_string(),
    }
}

/// One configuration's row: rank, name, then its figures or its failure.
fn row(configuration: &TuneConfiguration, width: usize) -> String {
    let rank = configuration
        .rank
        .map_or("-".to_string(), |r| r.to_string());
    let name = &configuration.name;
    let run = &configuration.run;
    let front = if configuration.on_front { "*" } else { "" };
    match (&run.failure, &run.figures) {
        (Some(failure), figures) if figures.is_none() || failure.stage != "stop" => format!(
            "{rank:>4}  {name:<width$}  failed ({}): {}",
            failure.stage, failure.reason
        ),
        (_, Some(f)) => format!(
            "{rank:>4}  {name:<width$}  {:>18} {:>9} {:>10} {:>10} {:>9} {:>8} {:>7}  {front}",
            capacity(f),
            number(f.goodput_per_accelerator, 3),
            number(f.good_output_tokens_per_sec_per_accelerator, 1),
            number(f.tokens_per_sec_per_user, 1),
            number(f.cost_per_million_output_tokens, 3),
            number(run.startup_secs, 1),
            f.requests_failed,
        ),
        (_, None) => format!("{rank:>4}  {name:<width$}  not measured"),
    }
}

/// The tune's summary.
pub(crate) fn render(out: &mut String, tune: &TuneReport, details: bool) {
    let mode = match tune.mode {
        TuneMode::Live => "live",
        TuneMode::Virtual => "in virtual time (predictions)",
    };
    let _ = writeln!(
        out,
        "\nTune: {} configurations {mode}, {} each under {} at {:.1} % attainment{}",
        tune.configurations.len(),
        match tune.measure {
            TuneMeasure::Capacity => "a capacity search",
            TuneMeasure::Sweep => "a load sweep",
        },
        tune.slo,
        tune.attainment_target * 100.0,
        match tune.repeats {
            1 => String::new(),
            n => format!(", {n} runs each"),
        }
    );
    let _ = writeln!(
        out,
        "Ranked by {}; accelerators: {}",
        tune.ranked_by, tune.accelerators_basis
    );
    let width = tune
        .configurations
        .iter()
        .map(|c| c.name.chars().count())
        .max()
        .unwrap_or(0)
        .clamp(13, 48);
    let _ = writeln!(
        out,
        "\n{:>4}  {:<width$}  {:>18} {:>9} {:>10} {:>10} {:>9} {:>8} {:>7}  front",
        "rank",
        "configuration",
        "capacity",
        "good/s/acc",
        "good tok/s/acc",
        "tok/s/user",
        "cost/Mtok",
        "ready s",
        "failed",
    );
    for configuration in &tune.configurations {
        let _ = writeln!(out, "{}", row(configuration, width));
    }
    front(out, tune);
    let _ = writeln!(out, "\n{}", sentence(&tune.conclusion));
    failures(out, tune, details);
    verification(out, tune);
    if details {
        in_detail(out, tune);
    }
}

/// `--details`: every configuration's run and operating point.
fn in_detail(out: &mut String, tune: &TuneReport) {
    let _ = writeln!(
        out,
        "\nEach configuration in detail (its own report: report.html in its directory)"
    );
    for c in &tune.configurations {
        let run = &c.run;
        let _ = writeln!(
            out,
            "  {} — {} accelerator(s), {}",
            c.name, c.accelerators, run.dir
        );
        if let Some(command) = &run.command {
            let _ = writeln!(out, "    command: {command}");
        }
        let Some(f) = &run.figures else {
            continue;
        };
        let _ = writeln!(
            out,
            "    capacity {} (fails at {}; {}), operating point: step {}",
            capacity(f),
            number(f.upper_bound, 3),
            f.conclusion,
            f.step.map_or("–".to_string(), |s| (s + 1).to_string())
        );
        let _ = writeln!(
            out,
            "    {} req/s, {} good req/s, {} output tok/s; TTFT p99 {} ms, TPOT p50 {} ms; {} of {} requests failed",
            number(f.requests_per_sec, 3),
            number(f.goodput_per_sec, 3),
            number(f.output_tokens_per_sec, 1),
            number(f.ttft_p99_ms, 1),
            number(f.tpot_p50_ms, 2),
            f.requests_failed,
            f.requests_sent
        );
        if !f.rank_runs.is_empty() {
            let runs: Vec<String> = f.rank_runs.iter().map(|v| format!("{v:.3}")).collect();
            let _ = writeln!(
                out,
                "    good req/s per accelerator by run: {}",
                runs.join(", ")
            );
        }
    }
}

/// The Pareto front, by tokens per second per user.
fn front(out: &mut String, tune: &TuneReport) {
    if tune.pareto_front.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\nPareto front (* above): good output tokens/s per accelerator against tokens/s per user"
    );
    for &index in &tune.pareto_front {
        let configuration = &tune.configurations[index];
        if let Some(f) = &configuration.run.figures {
            let _ = writeln!(
                out,
                "  {:>10} tok/s per user  {:>10} good output tok/s per accelerator  {}",
                number(f.tokens_per_sec_per_user, 1),
                number(f.good_output_tokens_per_sec_per_accelerator, 1),
                configuration.name
            );
        }
    }
}

/// The first letter capitalised, a full stop at the end.
fn sentence(text: &str) -> String {
    let mut chars = text.chars();
    let first = chars
        .next()
        .map(|c| c.to_uppercase().to_string())
        .unwrap_or_default();
    format!("{first}{}.", chars.as_str())
}

/// Each failure with the end of its server's log.
fn failures(out: &mut String, tune: &TuneReport, details: bool) {
    let failed: Vec<&TuneConfiguration> = tune
        .configurations
        .iter()
        .filter(|c| c.run.failure.is_some())
        .collect();
    if failed.is_empty() {
        return;
    }
    let _ = writeln!(out, "\nFailures");
    for configuration in failed {
        let Some(failure) = &configuration.run.failure else {
            continue;
        };
        let _ = writeln!(
            out,
            "  {} ({}): {}",
            configuration.name, failure.stage, failure.reason
        );
        let shown = if details {
            failure.log_tail.len()
        } else {
            TAIL_LINES
        };
        let start = failure.log_tail.len().saturating_sub(shown);
        for line in &failure.log_tail[start..] {
            let _ = writeln!(out, "    | {line}");
        }
        if !failure.log_tail.is_empty() {
            let _ = writeln!(out, "    (log: {}/server.log)", configuration.run.dir);
        }
    }
}

/// `--verify-top`: predicted against measured.
fn verification(out: &mut String, tune: &TuneReport) {
    if tune.verification.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\nPredicted (virtual time) against measured (live), good req/s per accelerator"
    );
    for check in &tune.verification {
        let configuration = &tune.configurations[check.configuration];
        let predicted = configuration
            .run
            .figures
            .as_ref()
            .and_then(|f| f.rank_value);
        let measured = match (&check.measured.failure, &check.measured.figures) {
            (Some(failure), None) => format!("failed ({}): {}", failure.stage, failure.reason),
            (_, figures) => number(figures.as_ref().and_then(|f| f.rank_value), 3),
        };
        let _ = writeln!(
            out,
            "  #{} {:<24} predicted {:>9}  measured {:>9}  measured/predicted {}",
            check.predicted_rank,
            configuration.name,
            number(predicted, 3),
            measured,
            number(check.ratio, 2)
        );
    }
}

/// The tune as Markdown tables.
pub(crate) fn markdown(out: &mut String, tune: &TuneReport) {
    let _ = writeln!(out, "\n{}\n", sentence(&tune.conclusion));
    let _ = writeln!(
        out,
        "| rank | configuration | capacity | good req/s per accelerator | good output tok/s per accelerator | tok/s per user | cost per M output tokens | ready s | front | failure |"
    );
    let _ = writeln!(out, "|--:|---|--:|--:|--:|--:|--:|--:|---|---|");
    for c in &tune.configurations {
        let f = c.run.figures.clone().unwrap_or_default();
        let failure = c.run.failure.as_ref().map_or(String::new(), |f| {
            format!("{}: {}", f.stage, f.reason.replace('|', "\\|"))
        });
        let _ = writeln!(
            out,
            "| {} | `{}` | {} | {} | {} | {} | {} | {} | {} | {failure} |",
            c.rank.map_or("–".to_string(), |r| r.to_string()),
            c.name,
            if c.run.figures.is_some() {
                capacity(&f)
            } else {
                "–".into()
            },
            number(f.goodput_per_accelerator, 3),
            number(f.good_output_tokens_per_sec_per_accelerator, 1),
            number(f.tokens_per_sec_per_user, 1),
            number(f.cost_per_million_output_tokens, 3),
            number(c.run.startup_secs, 1),
            if c.on_front { "yes" } else { "" },
        );
    }
}
