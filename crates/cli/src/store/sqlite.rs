//! The SQLite history store (a file; the embedded default). Concurrent writers wait for each
//! other through SQLite's lock (a busy timeout, not an error); migrations run in a `BEGIN
//! IMMEDIATE` transaction, so the first process to open a new store creates it and the others
//! find it created.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use rusqlite::types::Value as SqlValue;
use rusqlite::{Connection, TransactionBehavior, params_from_iter};
use serde_json::Value;

use super::migrations::{self, Dialect, MIGRATIONS_TABLE};
use super::query::{self, Param};
use super::{Facets, HistoryStore, RunQuery, StoredRun, row_of, run_of, tag_pairs};

/// How long a writer waits for another's lock before giving up.
const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// An open SQLite store.
pub(crate) struct SqliteStore {
    connection: Connection,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SqliteStore")
    }
}

impl SqliteStore {
    /// Opens (creating if needed, and migrating) the store at `path`.
    pub(crate) fn open(path: &Path) -> Result<SqliteStore> {
        let connection = Connection::open(path)
            .with_context(|| format!("cannot open the history store {}", path.display()))?;
        connection
            .busy_timeout(BUSY_TIMEOUT)
            .context("setting the store's busy timeout")?;
        let mut store = SqliteStore { connection };
        store
            .migrate()
            .with_context(|| format!("{} is not a goodput history store", path.display()))?;
        Ok(store)
    }

    /// Applies the missing migrations (nothing to do, no write lock taken, when there are none).
    fn migrate(&mut self) -> Result<()> {
        if self.version()? == migrations::latest() {
            return Ok(());
        }
        let tx = self
            .connection
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        tx.execute_batch(MIGRATIONS_TABLE)?;
        let current: i64 = tx.query_row(
            "SELECT COALESCE(MAX(version), 0) FROM goodput_schema_migrations",
            [],
            |row| row.get(0),
        )?;
        for migration in migrations::pending(current)? {
            tx.execute_batch(migration.sql(Dialect::Sqlite))
                .with_context(|| format!("migration {}", migration.version))?;
            tx.execute(
                "INSERT INTO goodput_schema_migrations (version, description, applied_at) VALUES (?1, ?2, ?3)",
                rusqlite::params![migration.version, migration.description, migrations::now()],
            )?;
        }
        tx.commit().context("committing the migrations")
    }

    /// The last migration applied (0 for a new file).
    fn version(&self) -> Result<i64> {
        let exists: bool = self.connection.query_row(
            "SELECT COUNT(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'goodput_schema_migrations'",
            [],
            |row| row.get(0),
        )?;
        if !exists {
            return Ok(0);
        }
        Ok(self.connection.query_row(
            "SELECT COALESCE(MAX(version), 0) FROM goodput_schema_migrations",
            [],
            |row| row.get(0),
        )?)
    }

    fn strings(&self, sql: &str) -> Result<Vec<String>> {
        let mut statement = self.connection.prepare(sql)?;
        let rows = statement.query_map([], |row| row.get::<_, String>(0))?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }
}

fn bound(params: Vec<Param>) -> Vec<SqlValue> {
    params
        .into_iter()
        .map(|p| match p {
            Param::Text(text) => SqlValue::Text(text),
            Param::Int(n) => SqlValue::Integer(n),
        })
        .collect()
}

impl HistoryStore for SqliteStore {
    fn record(&mut self, report: &Value) -> Result<i64> {
        self.connection
            .execute(
                "INSERT INTO runs (started_at, model, target, tags, tool_version, report)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params_from_iter(row_of(report)),
            )
            .context("recording the run in the history store")?;
        Ok(self.connection.last_insert_rowid())
    }

    fn runs(&mut self, query: &RunQuery) -> Result<Vec<StoredRun>> {
        let (sql, params) = query::rows(query, Dialect::Sqlite);
        let mut statement = self
            .connection
            .prepare(&sql)
            .context("reading the history store")?;
        let rows = statement
            .query_map(params_from_iter(bound(params)), |row| {
                Ok((
                    row.get::<_, i64>(0)?,
                    [
                        row.get::<_, String>(1)?,
                        row.get::<_, String>(2)?,
                        row.get::<_, String>(3)?,
                        row.get::<_, String>(4)?,
                        row.get::<_, String>(5)?,
                    ],
                ))
            })
            .context("reading the history store")?;
        let mut runs = Vec::new();
        for row in rows {
            let (id, columns) = row.context("reading a stored run")?;
            runs.push(run_of(id, columns)?);
        }
        runs.reverse();
        Ok(runs)
    }

    fn count(&mut self, query: &RunQuery) -> Result<usize> {
        let (sql, params) = query::count(query, Dialect::Sqlite);
        let n: i64 = self
            .connection
            .query_row(&sql, params_from_iter(bound(params)), |row| row.get(0))
            .context("counting runs in the history store")?;
        Ok(usize::try_from(n).unwrap_or(0))
    }

    fn facets(&mut self) -> Result<Facets> {
        Ok(Facets {
            models: self.strings("SELECT DISTINCT model FROM runs ORDER BY model")?,
            targets: self.strings("SELECT DISTINCT target FROM runs ORDER BY target")?,
            tags: tag_pairs(self.strings("SELECT DISTINCT tags FROM runs")?),
        })
    }

    fn schema_version(&mut self) -> Result<i64> {
        self.version()
    }
}
