//! Arguments of the commands that read finished runs — `goodput compare`, `goodput gate` and
//! `goodput history` — and their conversion into [`crate::options::analysis`].

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::ValueEnum;
use goodput_core::decide::gate::{Condition, StepSelector};
use goodput_core::decide::history::GroupBy;
use goodput_core::decide::significance::Thresholds;

use crate::args::reporting::parse_tags;
use crate::options::analysis::{CompareFormat, CompareOptions, GateOptions, HistoryOptions};
use crate::options::store::StoreSpec;

/// Output format of `goodput compare`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub(crate) enum CompareFormatArg {
    /// Aligned text for the terminal.
    #[default]
    Text,
    /// Markdown tables, for a review.
    Markdown,
    /// One self-contained HTML page with CDF overlays.
    Html,
    /// The comparison as JSON.
    Json,
}

/// Arguments of `goodput compare`.
#[derive(Debug, clap::Args)]
pub(crate) struct CompareArgs {
    /// The runs: the baseline first, then one or more candidates (run directories written with
    /// --out, or report.json files). Each candidate is compared against the baseline.
    #[arg(required = true, num_args = 2.., value_name = "RUN")]
    pub(crate) runs: Vec<PathBuf>,
    /// Output format on stdout (or in --output).
    #[arg(long, short, value_enum, default_value_t)]
    pub(crate) format: CompareFormatArg,
    /// Write the output to this file instead of stdout.
    #[arg(long, short)]
    pub(crate) output: Option<PathBuf>,
    /// Also write the runs overlaid on one HTML page (CDFs, time series, headline figures
    /// with deltas and significance) to this file.
    #[arg(long, value_name = "FILE")]
    pub(crate) html: Option<PathBuf>,
    /// Text and Markdown: after the verdict and headline figures, also show the conditions,
    /// every distribution test and every figure of the reports side by side.
    #[arg(long)]
    pub(crate) details: bool,
    /// Two-sided p-value below which a latency change is statistically significant.
    #[arg(long, default_value_t = 0.01)]
    pub(crate) alpha: f64,
    /// Smallest relative change of a median that counts as a change (0.05 = 5 %).
    #[arg(long, default_value_t = 0.05)]
    pub(crate) min_effect: f64,
    /// Exit with status 1 when a latency distribution regressed significantly.
    #[arg(long)]
    pub(crate) fail_on_regression: bool,
}

/// The criteria file format, shown after `goodput gate --help`.
const GATE_HELP: &str = "A criteria file is TOML:

  step = \"all\"            # optional: all (default), first, last, or a step index
  conditions = [
    \"requests_per_sec >= 150\",
    \"e2e.p95 <= 1.5s\",
    \"error_rate <= 0.1%\",
    \"server.kv_cache_usage.max <= 0.90\",
  ]

A path is any figure of report.json (steps[0].latency_ms.e2e.p95) or its short form (e2e.p95);
durations and percentages are converted to the figure's unit; a figure that was not measured
fails. Each condition is printed with its measured value and PASS or FAIL.
Exit status: 0 every condition holds, 1 one fails, 2 usage error (bad file, unknown path).";

/// Arguments of `goodput gate`.
#[derive(Debug, clap::Args)]
#[command(after_help = GATE_HELP)]
pub(crate) struct GateArgs {
    /// The report: a run directory or a report.json.
    pub(crate) report: PathBuf,
    /// The criteria file (TOML).
    #[arg(long, short, required_unless_present = "conditions")]
    pub(crate) criteria: Option<PathBuf>,
    /// A condition, repeatable (added to the file's), e.g. --condition 'ttft.p99 <= 800ms'.
    #[arg(long = "condition", value_name = "CONDITION")]
    pub(crate) conditions: Vec<String>,
    /// Steps judged: all, first, last, or an index (overrides the file's `step`).
    #[arg(long)]
    pub(crate) step: Option<String>,
}

/// Arguments of `goodput history`.
#[derive(Debug, clap::Args)]
pub(crate) struct HistoryArgs {
    /// The history store runs were recorded in (`goodput run --store`): a SQLite file or a
    /// postgres:// URL.
    #[arg(long, env = "GOODPUT_STORE")]
    pub(crate) store: PathBuf,
    /// Show this figure's trend across runs (any report path, e.g. e2e.p95, requests_per_sec).
    #[arg(long)]
    pub(crate) metric: Option<String>,
    /// Group the trend by model, target, or a tag (`tag:NAME`, e.g. tag:model_version).
    #[arg(long, value_name = "KEY")]
    pub(crate) by: Option<String>,
    /// Only runs with this tag, repeatable (KEY=VALUE).
    #[arg(long = "tag", value_name = "KEY=VALUE")]
    pub(crate) tags: Vec<String>,
    /// Only runs of this model.
    #[arg(long)]
    pub(crate) model: Option<String>,
    /// Show at most this many of the most recent runs.
    #[arg(long, default_value_t = 50)]
    pub(crate) last: usize,
    /// Record these reports (run directories or report.json files) first.
    #[arg(long = "add", value_name = "REPORT")]
    pub(crate) add: Vec<PathBuf>,
}

impl CompareArgs {
    /// `goodput compare`'s configuration.
    pub(crate) fn into_options(self) -> Result<CompareOptions> {
        if !(0.0..1.0).contains(&self.alpha) || self.alpha == 0.0 {
            bail!("--alpha: must be in (0, 1), e.g. 0.01");
        }
        if self.min_effect < 0.0 {
            bail!("--min-effect: must be a non-negative fraction, e.g. 0.05");
        }
        let format = match self.format {
            CompareFormatArg::Text => CompareFormat::Text,
            CompareFormatArg::Markdown => CompareFormat::Markdown,
            CompareFormatArg::Html => CompareFormat::Html,
            CompareFormatArg::Json => CompareFormat::Json,
        };
        if self.details && matches!(format, CompareFormat::Html | CompareFormat::Json) {
            bail!("--details: only for --format text or markdown (HTML and JSON hold everything)");
        }
        Ok(CompareOptions {
            runs: self.runs,
            format,
            output: self.output,
            html: self.html,
            details: self.details,
            thresholds: Thresholds {
                alpha: self.alpha,
                min_effect: self.min_effect,
            },
            fail_on_regression: self.fail_on_regression,
        })
    }
}

impl GateArgs {
    /// `goodput gate`'s configuration: the `--condition`s and `--step` parsed (the criteria
    /// file is read by the command).
    pub(crate) fn into_options(self) -> Result<GateOptions> {
        let conditions = self
            .conditions
            .iter()
            .map(|text| Condition::parse(text).map_err(anyhow::Error::from))
            .collect::<Result<Vec<_>>>()?;
        let step = self
            .step
            .as_deref()
            .map(|text| {
                StepSelector::parse(text).with_context(|| {
                    format!("step `{text}`: expected all, first, last or a step index")
                })
            })
            .transpose()?;
        Ok(GateOptions {
            report: self.report,
            criteria: self.criteria,
            conditions,
            step,
        })
    }
}

impl HistoryArgs {
    /// `goodput history`'s configuration.
    pub(crate) fn into_options(self) -> Result<HistoryOptions> {
        Ok(HistoryOptions {
            tags: parse_tags(&self.tags)?,
            store: StoreSpec::from_path(self.store),
            metric: self.metric,
            by: GroupBy::parse(self.by.as_deref().unwrap_or(""))
                .map_err(|e| anyhow::anyhow!("--by {e}"))?,
            model: self.model,
            last: self.last,
            add: self.add,
        })
    }
}
