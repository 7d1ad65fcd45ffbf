//! Where the run history is kept (`--store`): a SQLite file (the embedded default) or a
//! PostgreSQL database (`postgres://…`, for a team's shared history).

use std::fmt;
use std::path::PathBuf;

/// A history store.
#[derive(Clone, PartialEq, Eq)]
pub(crate) enum StoreSpec {
    /// A SQLite file (created if missing).
    Sqlite(PathBuf),
    /// A PostgreSQL connection URL (`postgres://user:password@host:port/db`).
    Postgres(String),
}

impl StoreSpec {
    /// `postgres://…` or `postgresql://…` names a PostgreSQL database; anything else a file.
    pub(crate) fn from_path(path: PathBuf) -> StoreSpec {
        match path.to_str() {
            Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
                StoreSpec::Postgres(url.to_string())
            }
            _ => StoreSpec::Sqlite(path),
        }
    }
}

/// For people: the file, or the URL with its password hidden.
impl fmt::Display for StoreSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreSpec::Sqlite(path) => write!(f, "{}", path.display()),
            StoreSpec::Postgres(url) => f.write_str(&redacted(url)),
        }
    }
}

impl fmt::Debug for StoreSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "StoreSpec({self})")
    }
}

/// `postgres://user:secret@host/db` → `postgres://user:***@host/db`.
fn redacted(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((user, host)) => match user.split_once(':') {
            Some((name, _)) => format!("{scheme}://{name}:***@{host}{tail}"),
            None => url.to_string(),
        },
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_postgres_and_hide_their_password() {
        let spec = StoreSpec::from_path("postgres://bench:s3cret@db:5432/goodput".into());
        assert_eq!(spec.to_string(), "postgres://bench:***@db:5432/goodput");
        assert!(matches!(
            StoreSpec::from_path("runs.db".into()),
            StoreSpec::Sqlite(_)
        ));
        let plain = StoreSpec::from_path("postgresql://localhost/goodput?user=me".into());
        assert_eq!(plain.to_string(), "postgresql://localhost/goodput?user=me");
    }
}
