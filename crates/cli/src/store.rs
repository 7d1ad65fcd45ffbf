//! The run history store (`--store runs.db`): one SQLite table of recorded reports, with the
//! fields people filter and group by (model, target, tags) beside the full report JSON.
//! Compiled with the default `history` feature (SQLite is bundled); without it every use says
//! how to get it.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Result;
use serde_json::Value;

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

#[cfg(feature = "history")]
mod sqlite {
    use std::path::Path;

    use anyhow::{Context, Result};
    use rusqlite::{Connection, params};
    use serde_json::Value;

    use super::StoredRun;

    const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS runs (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        started_at TEXT NOT NULL,
        model TEXT NOT NULL,
        target TEXT NOT NULL,
        tags TEXT NOT NULL,
        tool_version TEXT NOT NULL,
        report TEXT NOT NULL
    );
    CREATE INDEX IF NOT EXISTS runs_model ON runs(model);";

    /// An open store.
    pub(crate) struct Store {
        connection: Connection,
    }

    impl std::fmt::Debug for Store {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("Store")
        }
    }

    impl Store {
        /// Opens (creating if needed) the store at `path`.
        pub(crate) fn open(path: &Path) -> Result<Store> {
            let connection = Connection::open(path)
                .with_context(|| format!("cannot open the history store {}", path.display()))?;
            connection
                .execute_batch(SCHEMA)
                .with_context(|| format!("{} is not a goodput history store", path.display()))?;
            Ok(Store { connection })
        }

        /// Records a report; returns its id.
        pub(crate) fn record(&self, report: &Value) -> Result<i64> {
            let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
            self.connection
                .execute(
                    "INSERT INTO runs (started_at, model, target, tags, tool_version, report)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    params![
                        text(&report["run"]["started_at"]),
                        text(&report["run"]["model"]),
                        text(&report["run"]["target"]),
                        report["run"]["tags"].to_string(),
                        text(&report["tool"]["version"]),
                        report.to_string(),
                    ],
                )
                .context("recording the run in the history store")?;
            Ok(self.connection.last_insert_rowid())
        }

        /// Every run, oldest first.
        pub(crate) fn runs(&self) -> Result<Vec<StoredRun>> {
            let mut statement = self
                .connection
                .prepare("SELECT id, started_at, model, target, tags, report FROM runs ORDER BY id")
                .context("reading the history store")?;
            let rows = statement
                .query_map([], |row| {
                    Ok((
                        row.get::<_, i64>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, String>(2)?,
                        row.get::<_, String>(3)?,
                        row.get::<_, String>(4)?,
                        row.get::<_, String>(5)?,
                    ))
                })
                .context("reading the history store")?;
            let mut runs = Vec::new();
            for row in rows {
                let (id, started_at, model, target, tags, report) =
                    row.context("reading a stored run")?;
                runs.push(StoredRun {
                    id,
                    started_at,
                    model,
                    target,
                    tags: serde_json::from_str(&tags).unwrap_or_default(),
                    report: serde_json::from_str(&report)
                        .with_context(|| format!("stored run {id} is not valid JSON"))?,
                });
            }
            Ok(runs)
        }
    }
}

#[cfg(feature = "history")]
pub(crate) use sqlite::Store;

/// Stand-in when built without the `history` feature.
#[cfg(not(feature = "history"))]
#[derive(Debug)]
pub(crate) struct Store;

#[cfg(not(feature = "history"))]
impl Store {
    pub(crate) fn open(_path: &Path) -> Result<Store> {
        anyhow::bail!(
            "this goodput was built without the run history (cargo feature `history`); rebuild with default features"
        )
    }

    pub(crate) fn record(&self, _report: &Value) -> Result<i64> {
        Ok(0)
    }

    pub(crate) fn runs(&self) -> Result<Vec<StoredRun>> {
        Ok(Vec::new())
    }
}

/// Records `report` in the store at `path` (creating it), returning the run's id.
pub(crate) fn record(path: &Path, report: &Value) -> Result<i64> {
    Store::open(path)?.record(report)
}
