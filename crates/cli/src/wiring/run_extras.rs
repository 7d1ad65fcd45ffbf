//! What `goodput run` does besides running: the live view or progress lines, the server's
//! self-description, and after the report is written the exports, the release gate
//! (`--gate`) and the history store (`--store`).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use goodput_core::backend::discovery::list_models;
use goodput_core::config::RunConfig;
use goodput_core::http::HttpClient;
use goodput_core::observe::environment::{ServerHeaders, ServerInfo};
use goodput_core::observe::live::LiveSink;
use goodput_core::report::{LoadReport, Report, RunInfo};
use goodput_core::runner::{RecordSink, RunMonitor, Runner};
use tokio_util::sync::CancellationToken;

use crate::options::run::{OutputOptions, SummaryFormat};
use crate::options::store::StoreSpec;
use crate::output;
use crate::ui::{self, LiveView, Plan};
use crate::wiring::gate::{self, Criteria};

/// Models the target lists at `/v1/models` (empty when it does not answer within 5 s).
pub(crate) async fn served_models(client: &HttpClient) -> Vec<String> {
    list_models(client, Duration::from_secs(5))
        .await
        .unwrap_or_default()
}

/// The record sinks a run has besides the aggregator and the journal: the live view's and
/// the server-header collector.
#[derive(Debug)]
pub(crate) struct Extras {
    view: Option<(LiveView, LiveSink)>,
    headers: ServerHeaders,
}

impl Extras {
    /// Starts the live view when it can and should run.
    pub(crate) fn start(
        output: &OutputOptions,
        config: &RunConfig,
        run: &RunInfo,
        runner: &Runner,
        cancel: CancellationToken,
    ) -> Result<Extras> {
        Ok(Extras {
            view: start_view(output, config, run, runner.monitor(), cancel)?,
            headers: ServerHeaders::default(),
        })
    }

    /// Whether the live view is showing.
    pub(crate) fn has_view(&self) -> bool {
        self.view.is_some()
    }

    /// The sinks to feed.
    pub(crate) fn sinks(&mut self) -> Vec<&mut dyn RecordSink> {
        let mut sinks: Vec<&mut dyn RecordSink> = vec![&mut self.headers];
        if let Some((_, live)) = self.view.as_mut() {
            live.publish();
            sinks.push(live);
        }
        sinks
    }

    /// Stops the live view and restores the terminal.
    pub(crate) fn finish_view(&mut self) {
        if let Some((view, _)) = self.view.take() {
            view.finish();
        }
    }

    /// The server's self-description: `models` and the headers seen.
    pub(crate) fn server_info(&self, models: Vec<String>) -> ServerInfo {
        self.headers.server_info(models)
    }
}

/// Starts the live view when it can and should run.
fn start_view(
    output: &OutputOptions,
    config: &RunConfig,
    run: &RunInfo,
    monitor: Arc<RunMonitor>,
    cancel: CancellationToken,
) -> Result<Option<(LiveView, LiveSink)>> {
    if output.quiet || !output.live_view || !ui::available() {
        return Ok(None);
    }
    let load = LoadReport::from(&config.load);
    let plan = Plan {
        title: format!("{} · model {}", run.target, run.model),
        load: match (load.concurrency, load.rate_per_sec) {
            (Some(c), _) => format!("closed loop, concurrency {c}"),
            (None, Some(rate)) => format!(
                "open loop, {} arrivals at {rate} req/s",
                load.arrival.as_deref().unwrap_or("poisson")
            ),
            _ => load.mode,
        },
        duration: config.duration,
        max_requests: config.max_requests,
    };
    LiveView::start(plan, monitor, cancel).map(Some)
}

/// After the summary: the gate verdict (printed) and the history record. Returns whether the
/// gate passed (`None` without `--gate`); an unknown path in the criteria is an error.
pub(crate) fn gate_and_store(
    output: &OutputOptions,
    report: &Report,
    criteria: Option<&Criteria>,
) -> Result<Option<bool>> {
    let value = serde_json::to_value(report).context("serializing the report")?;
    if let Some(store) = &output.store {
        let id = crate::store::record(store, &value)?;
        eprintln!("recorded as run {id} in {store}");
    }
    let Some(criteria) = criteria else {
        return Ok(None);
    };
    let (passed, text) = gate::judge(&value, criteria)?;
    if output.summary != SummaryFormat::Text {
        eprint!("{text}");
    } else {
        println!();
        gate::print(&text)?;
    }
    Ok(Some(passed))
}

/// Loads the `--gate` criteria before the run, so a bad file fails fast.
pub(crate) fn load_gate(path: Option<&Path>) -> Result<Option<Criteria>> {
    path.map(gate::load_criteria).transpose()
}

/// `goodput report`: the exports (with `--out`) and the history record (with `--store`).
pub(crate) fn export_and_record(
    out: Option<&Path>,
    store: Option<&StoreSpec>,
    report: &Report,
) -> Result<()> {
    if let Some(dir) = out {
        write_exports(dir, report)?;
    }
    if let Some(store) = store {
        let value = serde_json::to_value(report).context("serializing the report")?;
        let id = crate::store::record(store, &value)?;
        eprintln!("recorded as run {id} in {store}");
    }
    Ok(())
}

/// Writes `report.html`, `summary.csv`, `summary.md` and `requests.csv` beside `report.json`.
pub(crate) fn write_exports(dir: &Path, report: &Report) -> Result<()> {
    output::exports::write_all(dir, report)
}
