//! The PostgreSQL history store (`--store postgres://user:password@host:port/db`): a team's
//! shared history. Each record is one `INSERT … RETURNING id` (atomic, the id from the
//! table's identity sequence, so concurrent writers never collide); migrations run in one
//! transaction under a transaction-scoped advisory lock, so processes opening a new database
//! at once apply them exactly once. Connections are made without TLS (`sslmode=disable` or
//! `prefer`): reach a remote server through a trusted network or a tunnel.
//!
//! The `postgres` client blocks on a runtime of its own, which must not run inside goodput's:
//! every call (and the connection's close) is made on a thread outside it.

use std::str::FromStr;
use std::time::Duration;

use anyhow::{Context, Result};
use postgres::types::ToSql;
use postgres::{Client, Config, NoTls};
use serde_json::Value;

use super::migrations::{self, Dialect, MIGRATIONS_TABLE};
use super::query::{self, Param};
use super::{Facets, HistoryStore, RunQuery, StoredRun, row_of, run_of, tag_pairs};

/// The advisory lock migrations hold (`goodput` in ASCII).
const MIGRATION_LOCK: i64 = 0x0067_6f6f_6470_7574;

/// How long a connection attempt may take when the URL does not say (`connect_timeout`).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// An open PostgreSQL store.
pub(crate) struct PostgresStore {
    client: Option<Client>,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PostgresStore")
    }
}

/// Runs `work` on a thread outside any tokio runtime (the client's own runtime refuses to
/// start inside one).
fn off_runtime<T: Send>(work: impl FnOnce() -> T + Send) -> T {
    if tokio::runtime::Handle::try_current().is_err() {
        return work();
    }
    std::thread::scope(|scope| match scope.spawn(work).join() {
        Ok(value) => value,
        Err(panic) => std::panic::resume_unwind(panic),
    })
}

impl PostgresStore {
    /// Connects to `url` and applies the missing migrations.
    pub(crate) fn open(url: &str) -> Result<PostgresStore> {
        let mut config = Config::from_str(url).context("--store: not a PostgreSQL URL")?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        let shown = super::StoreSpec::Postgres(url.to_string()).to_string();
        let client = off_runtime(|| -> Result<Client> {
            let mut client = config
                .connect(NoTls)
                .with_context(|| format!("cannot connect to the history store {shown}"))?;
            migrate(&mut client).with_context(|| format!("migrating the history store {shown}"))?;
            Ok(client)
        })?;
        Ok(PostgresStore {
            client: Some(client),
        })
    }

    fn with<T: Send>(&mut self, work: impl FnOnce(&mut Client) -> Result<T> + Send) -> Result<T> {
        let client = self
            .client
            .as_mut()
            .context("the history store connection is closed")?;
        off_runtime(|| work(client))
    }
}

impl Drop for PostgresStore {
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            off_runtime(move || drop(client));
        }
    }
}

/// The last migration applied (0 for a new database).
fn version(client: &mut Client) -> Result<i64> {
    let exists: bool = client
        .query_one(
            "SELECT to_regclass('goodput_schema_migrations') IS NOT NULL",
            &[],
        )?
        .get(0);
    if !exists {
        return Ok(0);
    }
    Ok(client
        .query_one(
            "SELECT COALESCE(MAX(version), 0)::BIGINT FROM goodput_schema_migrations",
            &[],
        )?
        .get(0))
}

fn migrate(client: &mut Client) -> Result<()> {
    if version(client)? == migrations::latest() {
        return Ok(());
    }
    let mut tx = client.transaction()?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])?;
    tx.batch_execute(MIGRATIONS_TABLE)?;
    let current: i64 = tx
        .query_one(
            "SELECT COALESCE(MAX(version), 0)::BIGINT FROM goodput_schema_migrations",
            &[],
        )?
        .get(0);
    for migration in migrations::pending(current)? {
        tx.batch_execute(migration.sql(Dialect::Postgres))
            .with_context(|| format!("migration {}", migration.version))?;
        tx.execute(
            "INSERT INTO goodput_schema_migrations (version, description, applied_at) VALUES ($1, $2, $3)",
            &[&migration.version, &migration.description, &migrations::now()],
        )?;
    }
    tx.commit().context("committing the migrations")
}

fn bound(params: &[Param]) -> Vec<&(dyn ToSql + Sync)> {
    params
        .iter()
        .map(|p| match p {
            Param::Text(text) => text as &(dyn ToSql + Sync),
            Param::Int(n) => n as &(dyn ToSql + Sync),
        })
        .collect()
}

fn strings(client: &mut Client, sql: &str) -> Result<Vec<String>> {
    Ok(client
        .query(sql, &[])?
        .iter()
        .map(|row| row.get::<_, String>(0))
        .collect())
}

impl HistoryStore for PostgresStore {
    fn record(&mut self, report: &Value) -> Result<i64> {
        let row = row_of(report);
        self.with(move |client| {
            let values: Vec<&(dyn ToSql + Sync)> =
                row.iter().map(|v| v as &(dyn ToSql + Sync)).collect();
            let id: i64 = client
                .query_one(
                    "INSERT INTO runs (started_at, model, target, tags, tool_version, report)
                     VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
                    &values,
                )
                .context("recording the run in the history store")?
                .get(0);
            Ok(id)
        })
    }

    fn runs(&mut self, query: &RunQuery) -> Result<Vec<StoredRun>> {
        let (sql, params) = query::rows(query, Dialect::Postgres);
        let rows = self.with(move |client| {
            client
                .query(&sql, &bound(&params))
                .context("reading the history store")
        })?;
        let mut runs = rows
            .iter()
            .map(|row| {
                let text = |i: usize| row.get::<_, String>(i);
                run_of(row.get(0), [text(1), text(2), text(3), text(4), text(5)])
            })
            .collect::<Result<Vec<_>>>()?;
        runs.reverse();
        Ok(runs)
    }

    fn count(&mut self, query: &RunQuery) -> Result<usize> {
        let (sql, params) = query::count(query, Dialect::Postgres);
        let n: i64 = self.with(move |client| {
            Ok(client
                .query_one(&sql, &bound(&params))
                .context("counting runs in the history store")?
                .get(0))
        })?;
        Ok(usize::try_from(n).unwrap_or(0))
    }

    fn facets(&mut self) -> Result<Facets> {
        self.with(|client| {
            Ok(Facets {
                models: strings(client, "SELECT DISTINCT model FROM runs ORDER BY model")?,
                targets: strings(client, "SELECT DISTINCT target FROM runs ORDER BY target")?,
                tags: tag_pairs(strings(client, "SELECT DISTINCT tags FROM runs")?),
            })
        })
    }

    fn schema_version(&mut self) -> Result<i64> {
        self.with(version)
    }
}
