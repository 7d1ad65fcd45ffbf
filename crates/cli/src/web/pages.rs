//! Each page of `goodput ui`, built on a blocking thread: the store read with the page's
//! filters, the figures, trends and comparisons taken from `core::decide`, the HTML from
//! `core::html` (the report and comparison pages exactly as `report.html` and `goodput compare
//! --html` draw them, with a bar of links on top).

use goodput_core::decide::compare::{self, Comparison, Side};
use goodput_core::decide::history::{self, GroupBy, LISTED, RecordedRun};
use goodput_core::decide::significance::Thresholds;
use goodput_core::html::history::{Facets, RunRow, RunsPage, TrendPage};
use goodput_core::html::{self, CandidateComparison, LabelledRun, NavLink};

use super::PageError;
use super::params::Params;
use crate::options::store::StoreSpec;
use crate::store::{self, HistoryStore, RunQuery, StoredRun};

/// Figures the trend's figure field offers.
const METRICS: [&str; 14] = [
    "ttft.p50",
    "ttft.p99",
    "tpot.p50",
    "tpot.p99",
    "itl.p99",
    "e2e.p50",
    "e2e.p95",
    "e2e.p99",
    "requests_per_sec",
    "output_tokens_per_sec",
    "goodput.requests_per_sec",
    "goodput.attained_fraction",
    "error_rate",
    "capacity.lower_bound",
];

fn nav(extra: &[(&str, String)]) -> Vec<NavLink> {
    let mut links = vec![
        NavLink::new("All runs", "/"),
        NavLink::new("Trends", "/trend"),
    ];
    links.extend(
        extra
            .iter()
            .map(|(label, href)| NavLink::new(*label, href.clone())),
    );
    links
}

fn render_error(error: serde_json::Error) -> PageError {
    PageError::Store(anyhow::Error::new(error).context("drawing the page"))
}

fn facets(store: &mut dyn HistoryStore) -> Result<Facets, PageError> {
    let facets = store.facets()?;
    Ok(Facets {
        models: facets.models,
        targets: facets.targets,
        tags: facets
            .tags
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect(),
    })
}

/// `/`: the runs the filters select, newest last.
pub(super) fn runs(spec: &StoreSpec, params: &Params) -> Result<String, PageError> {
    let mut store = store::open(spec)?;
    let query = params.query();
    let runs = store.runs(&query)?;
    let total = store.count(&query)?;
    let facets = facets(store.as_mut())?;
    let suggested_by = facets
        .tags
        .first()
        .and_then(|t| t.split_once('='))
        .map_or_else(String::new, |(k, _)| format!("tag:{k}"));
    let page = RunsPage {
        store: spec.to_string(),
        filters: params.filters(),
        facets,
        columns: LISTED
            .iter()
            .map(|(_, heading)| heading.to_string())
            .collect(),
        runs: runs
            .into_iter()
            .map(|run| RunRow {
                id: run.id,
                listed: history::listed(&run.report),
                started_at: run.started_at,
                model: run.model,
                target: run.target,
                tags: run.tags,
            })
            .collect(),
        total,
        suggested_by,
    };
    html::history::render_runs(&page, &nav(&[])).map_err(render_error)
}

/// `/trend`: a figure across the runs the filters select, per series, with significance marks.
pub(super) fn trend(spec: &StoreSpec, params: &Params) -> Result<String, PageError> {
    let mut store = store::open(spec)?;
    let runs = store.runs(&params.query())?;
    let facets = facets(store.as_mut())?;
    let metric = params.metric.clone().unwrap_or_else(|| "ttft.p99".into());
    let by_text = params.by.clone().unwrap_or_default();
    let recorded: Vec<RecordedRun<'_>> = runs.iter().map(StoredRun::recorded).collect();
    let (trend, error) = match GroupBy::parse(&by_text) {
        Err(e) => (None, Some(format!("series by {e}"))),
        Ok(by) => match history::trend(&recorded, &metric, &by, Thresholds::default()) {
            Ok(trend) => (Some(trend), None),
            Err(e) => (None, Some(e.to_string())),
        },
    };
    let mut groupings = vec!["model".to_string(), "target".to_string()];
    let mut keys: Vec<&str> = facets
        .tags
        .iter()
        .filter_map(|t| t.split_once('=').map(|(k, _)| k))
        .collect();
    keys.dedup();
    groupings.extend(keys.iter().map(|k| format!("tag:{k}")));
    let page = TrendPage {
        store: spec.to_string(),
        filters: params.filters(),
        facets,
        metric,
        by: by_text,
        groupings,
        metrics: METRICS.iter().map(ToString::to_string).collect(),
        trend,
        error,
    };
    html::history::render_trend(&page, &nav(&[])).map_err(render_error)
}

fn one_run(spec: &StoreSpec, id: i64) -> Result<StoredRun, PageError> {
    let query = RunQuery {
        ids: vec![id],
        ..RunQuery::default()
    };
    store::open(spec)?
        .runs(&query)?
        .pop()
        .ok_or_else(|| PageError::NotFound(format!("no run {id} in the history store")))
}

/// `/runs/ID`: the run's report page.
pub(super) fn report(spec: &StoreSpec, id: i64) -> Result<String, PageError> {
    let run = one_run(spec, id)?;
    let links = nav(&[("report.json", format!("/runs/{id}/report.json"))]);
    html::render_report_with(&run.report, &links).map_err(render_error)
}

/// `/runs/ID/report.json`: the report as recorded.
pub(super) fn report_json(spec: &StoreSpec, id: i64) -> Result<String, PageError> {
    let run = one_run(spec, id)?;
    serde_json::to_string_pretty(&run.report).map_err(render_error)
}

/// The distinct run ids of `/compare`, oldest first (two at least).
fn compared_ids(params: &Params) -> Result<Vec<i64>, PageError> {
    let mut ids = params
        .runs
        .iter()
        .map(|text| {
            text.parse::<i64>()
                .map_err(|_| PageError::BadRequest(format!("run `{text}` is not a run id")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    ids.sort_unstable();
    ids.dedup();
    if ids.len() < 2 {
        return Err(PageError::BadRequest(
            "select two or more runs to compare (…/compare?run=ID&run=ID)".into(),
        ));
    }
    Ok(ids)
}

/// `/compare?run=A&run=B…`: the runs compared, the oldest as the baseline.
pub(super) fn compare(spec: &StoreSpec, params: &Params) -> Result<String, PageError> {
    let ids = compared_ids(params)?;
    let query = RunQuery {
        ids: ids.clone(),
        ..RunQuery::default()
    };
    let runs = store::open(spec)?.runs(&query)?;
    if let Some(missing) = ids.iter().find(|id| runs.iter().all(|r| r.id != **id)) {
        return Err(PageError::NotFound(format!(
            "no run {missing} in the history store"
        )));
    }
    fn side(run: &StoredRun) -> Side<'_> {
        Side {
            report: &run.report,
            samples: None,
        }
    }
    let results: Vec<Comparison> = runs[1..]
        .iter()
        .map(|run| compare::compare(side(&runs[0]), side(run), Thresholds::default()))
        .collect();
    let labels: Vec<String> = runs.iter().map(|r| format!("#{}", r.id)).collect();
    let labelled: Vec<LabelledRun<'_>> = runs
        .iter()
        .zip(&labels)
        .map(|(run, label)| LabelledRun {
            label,
            report: &run.report,
        })
        .collect();
    let pairs: Vec<CandidateComparison<'_>> = results
        .iter()
        .enumerate()
        .map(|(i, comparison)| CandidateComparison {
            candidate: i + 1,
            comparison,
        })
        .collect();
    let bar = compare_nav(&runs);
    html::render_comparison_with(&labelled, &pairs, &bar).map_err(render_error)
}

/// The bar of a comparison: the lists, then each run's report.
fn compare_nav(runs: &[StoredRun]) -> Vec<NavLink> {
    let mut bar = nav(&[]);
    bar.extend(
        runs.iter()
            .map(|r| NavLink::new(format!("report #{}", r.id), format!("/runs/{}", r.id))),
    );
    bar
}
