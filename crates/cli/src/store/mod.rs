//! The run history store (`--store`): recorded reports with the fields people filter and group
//! by (start, model, target, tags) beside the full report JSON, behind one trait
//! ([`HistoryStore`]) with two implementations — SQLite, the embedded default (a file, cargo
//! feature `history`), and PostgreSQL (`--store postgres://…`, a team's shared history, cargo
//! feature `postgres`). Both create and upgrade their schema through the same versioned list
//! of migrations ([`migrations`]), recorded in a `goodput_schema_migrations` table, under a
//! lock so that concurrent writers never race.

use std::collections::BTreeMap;

use anyhow::Result;
use goodput_core::decide::history::RecordedRun;
use serde_json::Value;

use crate::options::store::StoreSpec;

pub(crate) mod migrations;
#[cfg(feature = "postgres")]
mod postgres;
mod query;
#[cfg(feature = "history")]
mod sqlite;

/// A run read back from the store.
#[derive(Debug, Clone)]
pub(crate) struct StoredRun {
    /// Row id, increasing in recording order.
    pub(crate) id: i64,
    /// Run start (RFC 3339).
    pub(crate) started_at: String,
    /// Model name.
    pub(crate) model: String,
    /// Target (redacted).
    pub(crate) target: String,
    /// User tags.
    pub(crate) tags: BTreeMap<String, String>,
    /// The whole report.
    pub(crate) report: Value,
}

impl StoredRun {
    /// The run as `core::decide::history` reads it.
    pub(crate) fn recorded(&self) -> RecordedRun<'_> {
        RecordedRun {
            id: self.id,
            started_at: &self.started_at,
            model: &self.model,
            target: &self.target,
            tags: &self.tags,
            report: &self.report,
        }
    }
}

/// Which runs to read: every filter optional, the result oldest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RunQuery {
    /// Only this model.
    pub(crate) model: Option<String>,
    /// Only this target.
    pub(crate) target: Option<String>,
    /// Only runs with every one of these tags.
    pub(crate) tags: Vec<(String, String)>,
    /// Only runs started on or after this day (`YYYY-MM-DD`).
    pub(crate) since: Option<String>,
    /// Only runs started on or before this day (`YYYY-MM-DD`).
    pub(crate) until: Option<String>,
    /// Only these runs.
    pub(crate) ids: Vec<i64>,
    /// Only the most recent this many.
    pub(crate) last: Option<usize>,
}

/// The distinct values a store holds, for filter choices.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Facets {
    /// Models.
    pub(crate) models: Vec<String>,
    /// Targets.
    pub(crate) targets: Vec<String>,
    /// Tags (key, value).
    pub(crate) tags: Vec<(String, String)>,
}

/// A history store. Opening one creates or upgrades its schema; each call is one statement or
/// one transaction, so several processes may record into one store at once.
pub(crate) trait HistoryStore: Send {
    /// Records a report; returns its id.
    fn record(&mut self, report: &Value) -> Result<i64>;
    /// The runs `query` selects, oldest first.
    fn runs(&mut self, query: &RunQuery) -> Result<Vec<StoredRun>>;
    /// How many runs `query` selects, ignoring its `last`.
    fn count(&mut self, query: &RunQuery) -> Result<usize>;
    /// The models, targets and tags recorded.
    fn facets(&mut self) -> Result<Facets>;
    /// The schema version (the last migration applied).
    fn schema_version(&mut self) -> Result<i64>;
}

/// Opens (creating if needed, and migrating) the store `spec` names.
pub(crate) fn open(spec: &StoreSpec) -> Result<Box<dyn HistoryStore>> {
    match spec {
        StoreSpec::Sqlite(path) => open_sqlite(path),
        StoreSpec::Postgres(url) => open_postgres(url),
    }
}

/// Records `report` in the store `spec` names (creating it), returning the run's id.
pub(crate) fn record(spec: &StoreSpec, report: &Value) -> Result<i64> {
    open(spec)?.record(report)
}

#[cfg(feature = "history")]
fn open_sqlite(path: &std::path::Path) -> Result<Box<dyn HistoryStore>> {
    Ok(Box::new(sqlite::SqliteStore::open(path)?))
}

#[cfg(not(feature = "history"))]
fn open_sqlite(_path: &std::path::Path) -> Result<Box<dyn HistoryStore>> {
    anyhow::bail!(
        "this goodput was built without the SQLite run history (cargo feature `history`); rebuild with default features"
    )
}

#[cfg(feature = "postgres")]
fn open_postgres(url: &str) -> Result<Box<dyn HistoryStore>> {
    Ok(Box::new(postgres::PostgresStore::open(url)?))
}

#[cfg(not(feature = "postgres"))]
fn open_postgres(_url: &str) -> Result<Box<dyn HistoryStore>> {
    anyhow::bail!(
        "this goodput was built without PostgreSQL history stores (cargo feature `postgres`); rebuild with default features"
    )
}

/// The columns a report is recorded with: start, model, target, tags (JSON), tool version,
/// and the report (JSON).
#[cfg_attr(not(any(feature = "history", feature = "postgres")), allow(dead_code))]
fn row_of(report: &Value) -> [String; 6] {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    [
        text(&report["run"]["started_at"]),
        text(&report["run"]["model"]),
        text(&report["run"]["target"]),
        tags_json(&report["run"]["tags"]),
        text(&report["tool"]["version"]),
        report.to_string(),
    ]
}

/// Tags as stored: a JSON object of strings, keys sorted, no spaces (what the tag filter
/// matches against).
fn tags_json(tags: &Value) -> String {
    let map: BTreeMap<String, String> = tags
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        v.as_str().map_or_else(|| v.to_string(), str::to_string),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    serde_json::to_string(&map).unwrap_or_else(|_| "{}".into())
}

/// A stored row back into a run.
#[cfg_attr(not(any(feature = "history", feature = "postgres")), allow(dead_code))]
fn run_of(id: i64, [started_at, model, target, tags, report]: [String; 5]) -> Result<StoredRun> {
    use anyhow::Context as _;
    Ok(StoredRun {
        id,
        started_at,
        model,
        target,
        tags: serde_json::from_str(&tags).unwrap_or_default(),
        report: serde_json::from_str(&report)
            .with_context(|| format!("stored run {id} is not valid JSON"))?,
    })
}

/// Distinct tag pairs from the stored tag objects.
#[cfg_attr(not(any(feature = "history", feature = "postgres")), allow(dead_code))]
fn tag_pairs(objects: impl IntoIterator<Item = String>) -> Vec<(String, String)> {
    let mut pairs = std::collections::BTreeSet::new();
    for text in objects {
        let map: BTreeMap<String, String> = serde_json::from_str(&text).unwrap_or_default();
        pairs.extend(map);
    }
    pairs.into_iter().collect()
}
