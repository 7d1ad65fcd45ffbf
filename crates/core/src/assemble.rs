//! From measured steps to a report, once: [`assemble`] is the one place a [`Report`] is put
//! together — for a live run (its steps aggregated as the requests finished) and for a
//! journal rebuild ([`rebuild`]: the same steps aggregated again from `requests.jsonl` and the
//! `run.json` beside it) — so the two agree by construction, not by care.

use crate::config::RunConfig;
use crate::decide::capacity::tally::InOrder;
use crate::decide::capacity::{CapacityPlan, CapacityReport, SearchConfig};
use crate::decide::sweep;
use crate::manifest::RunManifest;
use crate::methodology::{checks, warnings};
use crate::metrics::aggregate::Compliance;
use crate::metrics::buckets::LengthBuckets;
use crate::metrics::{Slo, StepAggregator};
use crate::observe::environment::ServerHeaders;
use crate::observe::overhead::ClientOverhead;
use crate::record::RequestRecord;
use crate::report::repeats::RepeatsReport;
use crate::report::{LoadReport, Report, RunInfo, StepReport, ToolInfo, Warning};
use crate::runner::EndReason;

/// What a report is made of besides its steps.
#[derive(Debug)]
pub struct ReportInputs<'a> {
    /// The tool that measured.
    pub tool: ToolInfo,
    /// What was run, against what.
    pub run: RunInfo,
    /// The configuration the steps were measured under (SLO, window, load…).
    pub config: &'a RunConfig,
    /// How the run ended, as the methodology checks judge it.
    pub end: EndReason,
    /// Warnings found beside the steps (server-side), each appended once.
    pub extra_warnings: &'a [Warning],
    /// The client's own overhead (`None`: no request went over the wire).
    pub overhead: Option<&'a ClientOverhead>,
}

/// The report of `steps`: the methodology warnings of the steps and of the run, the extra
/// warnings not already among them, and the client's overhead (with its own warning).
pub fn assemble(inputs: ReportInputs<'_>, steps: Vec<StepReport>) -> Report {
    let ReportInputs {
        tool,
        run,
        config,
        end,
        extra_warnings,
        overhead,
    } = inputs;
    let mut warnings = warnings::check(config, &steps, end);
    warnings.extend(checks::check_run(&run, &steps));
    for warning in extra_warnings {
        if !warnings.contains(warning) {
            warnings.push(warning.clone());
        }
    }
    let mut report = Report::new(tool, run, steps, warnings);
    if let Some(overhead) = overhead {
        overhead.attach(&mut report);
    }
    report
}

/// The report of a finished (or killed) run again, from its manifest and journal records,
/// judged under `config` (the recorded one, or with another SLO): the same steps, warnings,
/// sweep knee and capacity verdict, the server identity from the recorded headers, and the
/// overhead the records show (dispatch lags, not CPU use). Server-side scrapes are the
/// caller's to add.
pub fn rebuild(
    manifest: &RunManifest,
    config: &RunConfig,
    buckets: &LengthBuckets,
    records: &[RequestRecord],
) -> Report {
    let mut server_headers = ServerHeaders::default();
    let mut overhead = ClientOverhead::from_records_only();
    for record in records {
        server_headers.add(record);
        overhead.add(record);
    }
    let (steps, compliance) = rebuild_steps(manifest, config, buckets, records);
    let mut run = manifest.run.clone();
    run.slo = config.slo.as_ref().map(ToString::to_string);
    if run.end_reason == "running" {
        run.end_reason = "unknown (rebuilt from the journal of an unfinished run)".into();
    }
    let models = run.server_info.take().unwrap_or_default().models;
    let (sweep, repeats) = manifest
        .sweep
        .as_ref()
        .map(|plan| sweep::conclude(plan, &steps))
        .unzip();
    let (capacity, searches) = match &manifest.capacity {
        Some(plan) if plan.searches.len() > 1 => {
            let (first, searches) =
                rejudge_searches(plan, config.slo.as_ref(), &steps, &compliance);
            (first, Some(searches))
        }
        Some(plan) => (
            Some(rejudge_capacity(
                plan,
                config.slo.as_ref(),
                &steps,
                &compliance,
            )),
            None,
        ),
        None => (None, None),
    };
    let inputs = ReportInputs {
        tool: manifest.tool.clone(),
        run,
        config,
        end: EndReason::Completed,
        extra_warnings: &[],
        overhead: Some(&overhead),
    };
    let mut report = assemble(inputs, steps);
    report.run.server_info = Some(server_headers.server_info(models));
    report.sweep = sweep;
    report.repeats = repeats.flatten().or(searches);
    if manifest.repeats.is_some() && report.repeats.is_none() {
        report.repeats = Some(crate::decide::repeats::summarise(&report.steps));
    }
    report.capacity = capacity;
    report
}

/// One step report (and SLO tally) per step of the run: the manifest's `steps` for a sweep or
/// capacity search (records carry their step index), else the single configured load.
pub fn rebuild_steps(
    manifest: &RunManifest,
    config: &RunConfig,
    buckets: &LengthBuckets,
    records: &[RequestRecord],
) -> (Vec<StepReport>, Vec<Compliance>) {
    let loads = if manifest.steps.is_empty() {
        vec![config.load.clone()]
    } else {
        manifest.steps.clone()
    };
    let mut aggregators: Vec<StepAggregator> = loads
        .iter()
        .map(|_| {
            StepAggregator::new(config.slo.clone(), config.window)
                .with_length_buckets(buckets.clone())
                .with_classes(&manifest.run.classes)
        })
        .collect();
    // A capacity probe's targets are judged on its requests in the order they were sent,
    // each where the sequential test decided it, as the probe itself judged them.
    let mut tallies: Vec<Option<InOrder>> = loads
        .iter()
        .enumerate()
        .map(|(step, _)| {
            let plan = manifest.capacity.as_ref()?;
            (step >= plan.first_probe_step).then(|| {
                let mut criteria = plan.criteria.clone();
                if let Some(slo) = &config.slo {
                    criteria.slo = slo.clone();
                }
                InOrder::new(criteria)
            })
        })
        .collect();
    for record in records {
        let index = usize::try_from(record.step).unwrap_or(usize::MAX);
        // A plain run has one step; a record of an unknown step is counted in the last.
        let index = index.min(aggregators.len() - 1);
        aggregators[index].add(record);
        if let Some(tally) = &mut tallies[index] {
            tally.add(record, aggregators[index].compliance());
        }
    }
    let steps = loads
        .iter()
        .zip(&aggregators)
        .map(|(load, aggregator)| aggregator.report(LoadReport::from(load)))
        .collect();
    let compliance = aggregators
        .iter()
        .zip(tallies)
        .map(|(aggregator, tally)| {
            tally
                .and_then(InOrder::judged)
                .unwrap_or_else(|| aggregator.compliance())
        })
        .collect();
    (steps, compliance)
}

/// The searches of a repeated capacity search (`plan.searches`), each judged again as
/// [`rejudge_capacity`] judges one: the first's verdict and the repeats section across them.
fn rejudge_searches(
    plan: &CapacityPlan,
    slo: Option<&Slo>,
    steps: &[StepReport],
    compliance: &[Compliance],
) -> (Option<CapacityReport>, RepeatsReport) {
    let found: Vec<(usize, usize, CapacityReport)> = plan
        .searches
        .iter()
        .enumerate()
        .map(|(i, span)| {
            let end = plan
                .searches
                .get(i + 1)
                .map_or(steps.len(), |next| next.first_step)
                .min(steps.len())
                .min(compliance.len());
            let one = CapacityPlan {
                first_probe_step: span.first_probe_step,
                search: SearchConfig {
                    start: span.start,
                    ceiling: span.ceiling,
                    ..plan.search
                },
                searches: Vec::new(),
                ..plan.clone()
            };
            let report = rejudge_capacity(&one, slo, &steps[..end], &compliance[..end]);
            (span.first_step, end.saturating_sub(span.first_step), report)
        })
        .collect();
    let refs: Vec<(usize, usize, &CapacityReport)> =
        found.iter().map(|(a, b, c)| (*a, *b, c)).collect();
    let repeats = crate::decide::repeats::searches(&refs);
    (found.into_iter().next().map(|(_, _, c)| c), repeats)
}

/// The capacity verdict again from the probe steps, under `slo` (the recorded one, or an
/// override).
pub fn rejudge_capacity(
    plan: &CapacityPlan,
    slo: Option<&Slo>,
    steps: &[StepReport],
    compliance: &[Compliance],
) -> CapacityReport {
    let mut criteria = plan.criteria.clone();
    if let Some(slo) = slo {
        criteria.slo = slo.clone();
    }
    let probes: Vec<(f64, &StepReport, &Compliance)> = steps
        .iter()
        .zip(compliance)
        .skip(plan.first_probe_step)
        .map(|(step, tally)| {
            let load = step
                .load
                .rate_per_sec
                .or(step.load.concurrency.map(f64::from))
                .unwrap_or(f64::NAN);
            (load, step, tally)
        })
        .collect();
    CapacityPlan {
        criteria,
        ..plan.clone()
    }
    .report_from(&probes)
}
