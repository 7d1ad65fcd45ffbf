//! Server-side figures around a run: probes the metrics URL, scrapes it beside the runner,
//! records `analysis.json` and `server_metrics.jsonl` next to the journal, and adds the
//! `server`, `utilisation`, `speculative_decoding` and `cost` sections to the report — the
//! same way for a live run and for `goodput report` rebuilding one. A fleet's targets are
//! each scraped right before and after every step (`fleet_metrics.jsonl`), their counts set
//! on the step's per-target rows.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use goodput_core::analysis::{AnalysisConfig, EnrichInputs, enrich, enrich_step};
use goodput_core::http::{HttpClient, HttpConfig, Target};
use goodput_core::observe::server::replicas::{ReplicaScrapes, attach};
use goodput_core::observe::server::{
    ClientTally, MetricsEndpoint, Scrape, ScrapeHeader, ScrapeJournal, ScrapeLog, Scraper,
    default_metrics_url, read_scrape_journal, split_metrics_url,
};
use goodput_core::record::RequestRecord;
use goodput_core::report::{Report, StepReport, Warning};
use goodput_core::runner::RecordSink;
use tokio::time::Instant;

use crate::options::run::{RunOptions, ServerSideOptions};
use crate::output;

/// File the analysis inputs are recorded in.
pub(crate) const ANALYSIS_FILE: &str = "analysis.json";
/// File the scrapes are journaled in.
pub(crate) const SCRAPES_FILE: &str = "server_metrics.jsonl";
/// File a fleet's per-target scrapes around each step are journaled in.
pub(crate) const FLEET_SCRAPES_FILE: &str = "fleet_metrics.jsonl";

/// The scrape journal of a plain run, or of step `index` of a sweep or capacity search.
fn scrapes_file(step: Option<usize>) -> String {
    match step {
        None => SCRAPES_FILE.to_string(),
        Some(index) => format!("server_metrics.step-{index}.jsonl"),
    }
}

/// Scraping waiting to start (after the probe) or running.
enum Scraping {
    Off,
    Ready {
        endpoint: MetricsEndpoint,
        probe: Scrape,
        journal: Option<ScrapeJournal>,
    },
    Running(Scraper),
    Done(ScrapeLog),
}

/// Everything server-side for one run.
pub(crate) struct ServerSide {
    /// Target-time seconds per real second, for stamping scrapes on the run's clock.
    time_scale: f64,
    /// The step scraped, in a multi-step run.
    step: Option<usize>,
    config: AnalysisConfig,
    header: Option<ScrapeHeader>,
    interval: Duration,
    scraping: Scraping,
    tally: ClientTally,
    fleet: FleetScraping,
}

/// A fleet's targets, each scraped right before and right after the step.
#[derive(Default)]
struct FleetScraping {
    /// Each target's name, its metrics endpoint and its scrape before the step.
    targets: Vec<(String, MetricsEndpoint, Scrape)>,
    /// `fleet_metrics.jsonl`, with `--out`.
    journal: Option<std::path::PathBuf>,
    /// The scrapes around the step, once it ended.
    done: Vec<ReplicaScrapes>,
}

impl ServerSide {
    /// Probes the metrics URL (unless scraping is off) and records the analysis inputs in
    /// `out`.
    pub(crate) async fn prepare(
        options: &ServerSideOptions,
        target_url: &str,
        out: Option<&Path>,
        quiet: bool,
        time_scale: f64,
        step: Option<usize>,
    ) -> Result<ServerSide> {
        let mut side = Self::offline(options, out, time_scale, step)?;
        if options.scrape {
            side.probe(options, target_url, out, quiet).await?;
        }
        Ok(side)
    }

    /// The analysis inputs with no server to scrape (a virtual-time run, or `--no-metrics`),
    /// recorded in `out`.
    pub(crate) fn offline(
        options: &ServerSideOptions,
        out: Option<&Path>,
        time_scale: f64,
        step: Option<usize>,
    ) -> Result<ServerSide> {
        let side = ServerSide {
            time_scale,
            step,
            config: options.analysis.clone(),
            header: None,
            interval: options.metrics_interval,
            scraping: Scraping::Off,
            tally: ClientTally::default(),
            fleet: FleetScraping::default(),
        };
        // The same inputs serve every step of a multi-step run: written once.
        if let Some(dir) = out.filter(|_| step.is_none_or(|index| index == 0)) {
            output::json::write_json(&dir.join(ANALYSIS_FILE), &side.config)?;
        }
        Ok(side)
    }

    async fn probe(
        &mut self,
        options: &ServerSideOptions,
        target_url: &str,
        out: Option<&Path>,
        quiet: bool,
    ) -> Result<()> {
        let url = match &options.metrics_url {
            Some(url) => url.clone(),
            None => default_metrics_url(&Target::parse(target_url)?),
        };
        let endpoint =
            metrics_endpoint(&url, options.metrics_interval)?.with_time_scale(self.time_scale);
        let probe = endpoint.scrape(None).await;
        if !probe.is_usable() {
            let why = probe.problem.as_ref().map_or("", |p| p.message.as_str());
            if options.metrics_url.is_none() {
                if !quiet {
                    eprintln!(
                        "note: no server metrics at {url} ({why}); server-side figures are off"
                    );
                }
                return Ok(());
            }
            eprintln!("warning: --metrics-url {url}: {why}; scraping anyway");
        }
        let header = ScrapeHeader {
            metrics_url: url,
            interval_ms: options.metrics_interval.as_secs_f64() * 1000.0,
        };
        let journal = match out {
            Some(dir) => {
                let path = dir.join(scrapes_file(self.step));
                Some(
                    ScrapeJournal::create(&path, &header)
                        .with_context(|| format!("cannot create {}", path.display()))?,
                )
            }
            None => None,
        };
        self.header = Some(header);
        self.scraping = Scraping::Ready {
            endpoint,
            probe,
            journal,
        };
        Ok(())
    }

    /// The sink that counts what the client received.
    pub(crate) fn tally(&mut self) -> &mut dyn RecordSink {
        &mut self.tally
    }

    /// Starts scraping, on the run's clock (call right before the runner starts).
    pub(crate) fn begin(&mut self) {
        if let Scraping::Ready {
            endpoint,
            probe,
            journal,
        } = std::mem::replace(&mut self.scraping, Scraping::Off)
        {
            let scraper = Scraper::spawn(
                endpoint,
                self.interval,
                Instant::now(),
                vec![probe],
                journal,
            );
            self.scraping = Scraping::Running(scraper);
        }
    }

    /// Takes the final scrape and stops scraping (call when the runner returned); a fleet's
    /// targets are each scraped once more and the pairs journaled (a journal that cannot be
    /// written is reported, and the run's report still carries the counts).
    pub(crate) async fn end(&mut self) {
        if let Scraping::Running(scraper) = std::mem::replace(&mut self.scraping, Scraping::Off) {
            self.scraping = Scraping::Done(scraper.finish().await);
        }
        let step = u32::try_from(self.step.unwrap_or(0)).unwrap_or(u32::MAX);
        for (target, endpoint, before) in std::mem::take(&mut self.fleet.targets) {
            let after = endpoint.scrape(None).await;
            self.fleet.done.push(ReplicaScrapes {
                step,
                target,
                metrics_url: endpoint.url().to_string(),
                before,
                after,
            });
        }
        if let Some(path) = &self.fleet.journal
            && let Err(error) = append_lines(path, &self.fleet.done)
        {
            eprintln!("warning: cannot write {}: {error}", path.display());
        }
    }

    /// Scrapes each target of a fleet (`targets`: name and base URL) before the step.
    async fn scrape_fleet(
        &mut self,
        targets: &[crate::options::run::FleetTargetOptions],
        out: Option<&Path>,
    ) -> Result<()> {
        for target in targets {
            let url = default_metrics_url(&Target::parse(&target.url)?);
            let endpoint = metrics_endpoint(&url, self.interval)?;
            let before = endpoint.scrape(None).await;
            self.fleet
                .targets
                .push((target.label.clone(), endpoint, before));
        }
        self.fleet.journal = out.map(|dir| dir.join(FLEET_SCRAPES_FILE));
        // A run's first step starts the journal afresh (a rerun into the same directory).
        if let Some(path) = &self.fleet.journal
            && self.step.is_none_or(|index| index == 0)
            && path.exists()
        {
            std::fs::remove_file(path)
                .with_context(|| format!("cannot replace {}", path.display()))?;
        }
        Ok(())
    }

    /// Adds the server-side sections to `report`.
    pub(crate) fn enrich(&self, report: &mut Report, window: Duration) {
        enrich(report, self.inputs(window));
        for step in &mut report.steps {
            attach(step, 0, &self.fleet.done);
        }
    }

    /// Adds the server-side sections to `step` (step `index` of a multi-step run); returns
    /// its warnings, which name the step.
    pub(crate) fn enrich_step(
        &self,
        step: &mut StepReport,
        index: usize,
        window: Duration,
    ) -> Vec<Warning> {
        attach(
            step,
            u32::try_from(index).unwrap_or(u32::MAX),
            &self.fleet.done,
        );
        step_warnings(enrich_step(step, self.inputs(window)), index)
    }

    fn inputs(&self, window: Duration) -> EnrichInputs<'_> {
        let server = match (&self.header, &self.scraping) {
            (Some(header), Scraping::Done(log)) => Some((header, log)),
            _ => None,
        };
        EnrichInputs {
            server,
            config: &self.config,
            tally: &self.tally,
            window,
        }
    }
}

/// A scraper's view of the Prometheus endpoint at `url`, scraped every `interval` (each scrape
/// times out after the interval, clamped to 1–10 s).
pub(crate) fn metrics_endpoint(url: &str, interval: Duration) -> Result<MetricsEndpoint> {
    let (target, path) = split_metrics_url(url).context("--metrics-url")?;
    let client = HttpClient::tcp(
        target,
        HttpConfig {
            max_idle: 2,
            ..HttpConfig::default()
        },
    );
    let timeout = interval.clamp(Duration::from_secs(1), Duration::from_secs(10));
    Ok(MetricsEndpoint::new(client, &path, url, timeout))
}

/// `goodput report`: adds the server-side sections from the files a run left in `dir` (one
/// scrape journal per step for a sweep or capacity search).
pub(crate) fn rebuild(
    dir: &Path,
    records: &[RequestRecord],
    report: &mut Report,
    window: Duration,
) -> Result<()> {
    let analysis_path = dir.join(ANALYSIS_FILE);
    let config: AnalysisConfig = match std::fs::read_to_string(&analysis_path) {
        Ok(text) => serde_json::from_str(&text)
            .with_context(|| format!("{} is not valid", analysis_path.display()))?,
        Err(_) => AnalysisConfig::default(),
    };
    let fleet = read_fleet_scrapes(&dir.join(FLEET_SCRAPES_FILE))?;
    for (index, step) in report.steps.iter_mut().enumerate() {
        attach(step, u32::try_from(index).unwrap_or(u32::MAX), &fleet);
    }
    if report.steps.len() <= 1 {
        let server = read_scrapes(&dir.join(SCRAPES_FILE))?;
        let tally = tally_of(records.iter());
        let server = server.as_ref().map(|(header, log)| (header, log));
        enrich(
            report,
            EnrichInputs {
                server,
                config: &config,
                tally: &tally,
                window,
            },
        );
        return Ok(());
    }
    for index in 0..report.steps.len() {
        let server = read_scrapes(&dir.join(scrapes_file(Some(index))))?;
        let tally = tally_of(
            records
                .iter()
                .filter(|r| usize::try_from(r.step).ok() == Some(index)),
        );
        let server = server.as_ref().map(|(header, log)| (header, log));
        let inputs = EnrichInputs {
            server,
            config: &config,
            tally: &tally,
            window,
        };
        let warnings = step_warnings(enrich_step(&mut report.steps[index], inputs), index);
        for warning in warnings {
            if !report.warnings.contains(&warning) {
                report.warnings.push(warning);
            }
        }
    }
    Ok(())
}

fn read_scrapes(path: &Path) -> Result<Option<(ScrapeHeader, ScrapeLog)>> {
    if !path.exists() {
        return Ok(None);
    }
    let scrapes =
        read_scrape_journal(path).with_context(|| format!("cannot read {}", path.display()))?;
    Ok(Some(scrapes))
}

/// Appends `scrapes` to the journal at `path`, one JSON line each.
fn append_lines(path: &Path, scrapes: &[ReplicaScrapes]) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut lines = String::new();
    for line in scrapes {
        lines.push_str(&serde_json::to_string(line)?);
        lines.push('\n');
    }
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    file.write_all(lines.as_bytes())
}

/// A fleet's scrapes around each step (none without the file).
fn read_fleet_scrapes(path: &Path) -> Result<Vec<ReplicaScrapes>> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Ok(Vec::new());
    };
    text.lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            serde_json::from_str(line).with_context(|| format!("{} is not valid", path.display()))
        })
        .collect()
}

fn tally_of<'a>(records: impl Iterator<Item = &'a RequestRecord>) -> ClientTally {
    let mut tally = ClientTally::default();
    for record in records {
        tally.add(record);
    }
    tally
}

/// `warnings` about step `index`.
fn step_warnings(warnings: Vec<Warning>, index: usize) -> Vec<Warning> {
    warnings.into_iter().map(|w| w.about_step(index)).collect()
}

impl ServerSide {
    /// [`ServerSide::prepare`] for step `step` of a run of `options` against `target_url`.
    pub(crate) async fn for_run(
        options: &RunOptions,
        target_url: &str,
        time_scale: f64,
        step: Option<usize>,
    ) -> Result<ServerSide> {
        let output = &options.output;
        let (server_side, targets) = (&options.server_side, &options.fleet.targets);
        // A fleet's own metrics are read per target; one endpoint only when named.
        let single = ServerSideOptions {
            scrape: server_side.scrape && (targets.is_empty() || server_side.metrics_url.is_some()),
            ..server_side.clone()
        };
        let mut side = ServerSide::prepare(
            &single,
            target_url,
            output.out.as_deref(),
            output.quiet || step.is_some_and(|index| index > 0),
            time_scale,
            step,
        )
        .await?;
        if server_side.scrape {
            side.scrape_fleet(targets, output.out.as_deref()).await?;
        }
        Ok(side)
    }
}
