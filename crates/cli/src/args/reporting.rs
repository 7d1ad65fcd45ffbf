//! `goodput run` options about what happens with the results: the summary on stdout (its
//! format and detail), the release gate, the history store, the live view and the exports to
//! other tools (`ExportArgs`, shared with `goodput report`). Flattened into `RunArgs`.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::ValueEnum;

use crate::options::run::{ExportOptions, SummaryFormat};

/// What `goodput run` (and `goodput report`) prints on stdout when it finishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub(crate) enum SummaryFormatArg {
    /// The terminal summary, one screen (more with --details).
    #[default]
    Text,
    /// The whole report as JSON (the same as report.json), for scripts.
    Json,
    /// The key figures as Markdown tables (the same as summary.md).
    Markdown,
}

/// Result handling options of `goodput run`.
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct ReportingArgs {
    /// What is printed on stdout at the end: the terminal summary, the report as JSON, or
    /// Markdown tables.
    #[arg(long, value_enum, default_value_t, help_heading = "Output")]
    pub(crate) format: SummaryFormatArg,
    /// Terminal summary: also show the utilisation figures with their formulas, per-bucket and
    /// per-channel figures, server histograms and every latency row (default: one screen).
    #[arg(long, help_heading = "Output")]
    pub(crate) details: bool,
    /// Release gate: judge the report against the conditions in this TOML file (see `goodput
    /// gate --help`); the run exits with status 1 when one fails.
    #[arg(long, value_name = "FILE", help_heading = "Output")]
    pub(crate) gate: Option<PathBuf>,
    /// Record the run in this history store: a SQLite file (created if missing) or a
    /// PostgreSQL database (postgres://user:password@host:port/db); see `goodput history` and
    /// `goodput ui`.
    #[arg(
        long,
        value_name = "DB",
        env = "GOODPUT_STORE",
        help_heading = "Output"
    )]
    pub(crate) store: Option<PathBuf>,
    /// Print plain progress lines instead of the live view, even on a terminal.
    #[arg(long, help_heading = "Output")]
    pub(crate) no_live: bool,
    /// Exports to other tools, after the report is written.
    #[command(flatten)]
    pub(crate) exports: ExportArgs,
}

/// Where the report goes besides `--out`: other tools' receivers and formats (`run`, `sweep`,
/// `capacity` and `report`).
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct ExportArgs {
    /// Push the run's headline figures (per step: throughput, goodput, TTFT/TPOT/ITL/E2E
    /// p50/p95/p99, request counts and failures) to this Prometheus Pushgateway, e.g.
    /// http://localhost:9091 (PUT to /metrics/job/goodput/run_id@base64/…, after the report is
    /// written; a failed push is an error that does not lose the report).
    #[arg(long, value_name = "URL", help_heading = "Exports")]
    pub(crate) push_gateway: Option<String>,
    /// Also write the run as an llm-d benchmark report (schema 0.1, JSON) to this file; a run
    /// of several steps (sweep, capacity, --repeats) writes one file per step, FILE's name
    /// with `-step<i>` before its extension.
    #[arg(long, value_name = "FILE", help_heading = "Exports")]
    pub(crate) llmd_report: Option<PathBuf>,
    /// Record the run in this MLflow tracking server (REST API 2.0), e.g.
    /// http://localhost:5000: a run with the headline figures as metrics (one step each), what
    /// was run as parameters, and the tags.
    #[arg(long, value_name = "URL", help_heading = "Exports")]
    pub(crate) mlflow: Option<String>,
    /// The MLflow experiment the run is recorded in (created when missing; needs --mlflow).
    #[arg(long, value_name = "NAME", help_heading = "Exports")]
    pub(crate) mlflow_experiment: Option<String>,
    /// Send the run's headline figures to this OpenTelemetry collector as OTLP/HTTP JSON
    /// metrics (POST to URL/v1/metrics), e.g. http://localhost:4318.
    #[arg(long, value_name = "URL", help_heading = "Exports")]
    pub(crate) otlp: Option<String>,
}

/// The summary format given `--json` (kept as the short form of `--format json`), `--format`
/// and `--details`; `--details` outside the text summary is a usage error.
pub(crate) fn summary_format(
    json: bool,
    format: SummaryFormatArg,
    details: bool,
) -> Result<SummaryFormat> {
    let format = match (json, format) {
        (true, SummaryFormatArg::Text | SummaryFormatArg::Json) => SummaryFormat::Json,
        (true, SummaryFormatArg::Markdown) => bail!("--json and --format markdown: choose one"),
        (false, SummaryFormatArg::Text) => SummaryFormat::Text,
        (false, SummaryFormatArg::Json) => SummaryFormat::Json,
        (false, SummaryFormatArg::Markdown) => SummaryFormat::Markdown,
    };
    if details && format != SummaryFormat::Text {
        bail!("--details: only for the text summary (JSON and Markdown hold every step already)");
    }
    Ok(format)
}

impl ExportArgs {
    /// The exports asked for, their URLs checked before the run.
    pub(crate) fn exports(&self) -> Result<ExportOptions> {
        let urls = [
            ("--push-gateway", &self.push_gateway),
            ("--mlflow", &self.mlflow),
            ("--otlp", &self.otlp),
        ];
        for (flag, url) in urls {
            if let Some(url) = url {
                check_url(flag, url)?;
            }
        }
        let mlflow = match (&self.mlflow, &self.mlflow_experiment) {
            (None, Some(_)) => bail!("--mlflow-experiment needs --mlflow URL"),
            (Some(url), name) => Some((
                url.clone(),
                name.clone().unwrap_or_else(|| "goodput".into()),
            )),
            (None, None) => None,
        };
        Ok(ExportOptions {
            push_gateway: self.push_gateway.clone(),
            llmd_report: self.llmd_report.clone(),
            mlflow,
            otlp: self.otlp.clone(),
        })
    }
}

/// Refuses a receiver URL that is not `http://` or `https://` with a host.
fn check_url(flag: &str, url: &str) -> Result<()> {
    goodput_core::http::Target::parse(url)
        .map(|_| ())
        .with_context(|| format!("{flag} {url}: expected http://host:port or https://…"))
}

/// `--tag KEY=VALUE` pairs.
pub(crate) fn parse_tags(tags: &[String]) -> Result<Vec<(String, String)>> {
    tags.iter()
        .map(|tag| {
            let (key, value) = tag
                .split_once('=')
                .with_context(|| format!("--tag {tag}: expected KEY=VALUE"))?;
            Ok((key.trim().to_string(), value.trim().to_string()))
        })
        .collect()
}

impl ReportingArgs {
    /// Refuses `--no-live` for a subcommand with no live view (`sweep`, `capacity`).
    pub(crate) fn refuse_no_live(&self, subcommand: &str) -> Result<()> {
        if self.no_live {
            bail!(
                "--no-live: goodput {subcommand} prints plain progress lines (the live view is \
                 goodput run's); drop the flag"
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_format_and_details_reconcile() {
        let text = SummaryFormatArg::Text;
        assert_eq!(
            summary_format(false, text, true).ok(),
            Some(SummaryFormat::Text)
        );
        assert_eq!(
            summary_format(true, text, false).ok(),
            Some(SummaryFormat::Json)
        );
        assert!(summary_format(true, SummaryFormatArg::Markdown, false).is_err());
        assert!(summary_format(false, SummaryFormatArg::Markdown, true).is_err());
        assert!(summary_format(true, text, true).is_err());
    }
}
