//! The SQL of a [`RunQuery`] in either dialect: its filters as a `WHERE` clause with bound
//! parameters (never text pasted into SQL), newest first with its `LIMIT`.
#![cfg_attr(not(any(feature = "history", feature = "postgres")), allow(dead_code))]

use super::RunQuery;
use super::migrations::Dialect;

/// A bound parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Param {
    /// Text.
    Text(String),
    /// An integer.
    Int(i64),
}

/// The columns a run is read back from, in [`super::run_of`]'s order after the id.
pub(crate) const RUN_COLUMNS: &str = "id, started_at, model, target, tags, report";

/// `SELECT RUN_COLUMNS FROM runs WHERE … ORDER BY id DESC [LIMIT n]`: the caller reverses
/// the rows into oldest first.
pub(crate) fn rows(query: &RunQuery, dialect: Dialect) -> (String, Vec<Param>) {
    let (filter, mut params) = where_clause(query, dialect);
    let mut sql = format!("SELECT {RUN_COLUMNS} FROM runs{filter} ORDER BY id DESC");
    if let Some(last) = query.last {
        params.push(Param::Int(i64::try_from(last).unwrap_or(i64::MAX)));
        sql += &format!(" LIMIT {}", dialect.param(params.len()));
    }
    (sql, params)
}

/// `SELECT COUNT(*) FROM runs WHERE …` (the query's `last` ignored).
pub(crate) fn count(query: &RunQuery, dialect: Dialect) -> (String, Vec<Param>) {
    let (filter, params) = where_clause(query, dialect);
    (format!("SELECT COUNT(*) FROM runs{filter}"), params)
}

fn where_clause(query: &RunQuery, dialect: Dialect) -> (String, Vec<Param>) {
    let mut conditions: Vec<String> = Vec::new();
    let mut params: Vec<Param> = Vec::new();
    let bind = |params: &mut Vec<Param>, value: Param| {
        params.push(value);
        dialect.param(params.len())
    };
    let columns = [
        ("model = ", &query.model),
        ("target = ", &query.target),
        ("substr(started_at, 1, 10) >= ", &query.since),
        ("substr(started_at, 1, 10) <= ", &query.until),
    ];
    for (test, value) in columns {
        if let Some(value) = value {
            let p = bind(&mut params, Param::Text(value.clone()));
            conditions.push(format!("{test}{p}"));
        }
    }
    for (key, value) in &query.tags {
        // Stored tags are a compact JSON object of strings: `"key":"value"` then `,` or `}`
        // matches exactly that pair (a quote inside a key or value is escaped).
        let pair = format!("{}:{}", json_string(key), json_string(value));
        let a = bind(&mut params, Param::Text(format!("{pair},")));
        let b = bind(&mut params, Param::Text(format!("{pair}}}")));
        conditions.push(format!(
            "({} OR {})",
            dialect.contains("tags", &a),
            dialect.contains("tags", &b)
        ));
    }
    if !query.ids.is_empty() {
        let list: Vec<String> = query
            .ids
            .iter()
            .map(|id| bind(&mut params, Param::Int(*id)))
            .collect();
        conditions.push(format!("id IN ({})", list.join(", ")));
    }
    let filter = if conditions.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", conditions.join(" AND "))
    };
    (filter, params)
}

fn json_string(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_become_bound_parameters_in_each_dialect() {
        let query = RunQuery {
            model: Some("m'; DROP TABLE runs; --".into()),
            tags: vec![("version".into(), "2".into())],
            since: Some("2026-01-01".into()),
            ids: vec![3, 7],
            last: Some(10),
            ..RunQuery::default()
        };
        let (sql, params) = rows(&query, Dialect::Postgres);
        assert_eq!(
            sql,
            "SELECT id, started_at, model, target, tags, report FROM runs WHERE model = $1 AND \
             substr(started_at, 1, 10) >= $2 AND (strpos(tags, $3) > 0 OR strpos(tags, $4) > 0) \
             AND id IN ($5, $6) ORDER BY id DESC LIMIT $7"
        );
        assert_eq!(params[2], Param::Text("\"version\":\"2\",".into()));
        assert_eq!(params[3], Param::Text("\"version\":\"2\"}".into()));
        assert_eq!(params[6], Param::Int(10));
        let (sql, params) = count(&query, Dialect::Sqlite);
        assert!(
            sql.starts_with("SELECT COUNT(*) FROM runs WHERE model = ?1"),
            "{sql}"
        );
        assert!(sql.contains("instr(tags, ?3) > 0"), "{sql}");
        assert_eq!(params.len(), 6, "no LIMIT in a count");
        assert_eq!(
            rows(&RunQuery::default(), Dialect::Sqlite).0,
            "SELECT id, started_at, model, target, tags, report FROM runs ORDER BY id DESC"
        );
    }
}
