//! The named breakdowns of two runs side by side: per model, adapter, SLO class, fleet
//! target and replica, the key figures of each row in both runs (the rows matched by name, a
//! row one run lacks shown empty on that side).

use serde::Serialize;
use serde_json::Value;

/// The breakdowns compared, in the order shown, with their titles.
pub const BREAKDOWNS: [(&str, &str); 5] = [
    ("models", "By model"),
    ("adapters", "By adapter"),
    ("classes", "By SLO class"),
    ("targets", "By target"),
    ("replicas", "By replica"),
];

/// One row of a breakdown in both runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RowDelta {
    /// The breakdown (`models`, `adapters`, `classes`, `targets`, `replicas`).
    pub breakdown: &'static str,
    /// The row's name.
    pub name: String,
    /// Completed requests, baseline and candidate.
    pub completed: [Option<f64>; 2],
    /// Completed requests per second.
    pub requests_per_sec: [Option<f64>; 2],
    /// E2E p99, ms.
    pub e2e_p99_ms: [Option<f64>; 2],
    /// The share of requests that met the SLO (the class's own for SLO classes).
    pub attained_fraction: [Option<f64>; 2],
}

/// Every named breakdown row of step `step` in `a` and `b`.
pub fn row_deltas(a: &Value, b: &Value, step: usize) -> Vec<RowDelta> {
    let mut out = Vec::new();
    for (key, _) in BREAKDOWNS {
        let rows = |r: &Value| {
            r["steps"][step][key]
                .as_array()
                .cloned()
                .unwrap_or_default()
        };
        let (ra, rb) = (rows(a), rows(b));
        let mut names: Vec<String> = Vec::new();
        for row in ra.iter().chain(&rb) {
            if let Some(name) = row["name"].as_str()
                && !names.iter().any(|n| n == name)
            {
                names.push(name.to_string());
            }
        }
        for name in names {
            let find = |rows: &[Value]| rows.iter().find(|r| r["name"] == name.as_str()).cloned();
            let (x, y) = (find(&ra), find(&rb));
            let pair = |path: &[&str]| {
                let at = |row: &Option<Value>| {
                    let mut value = row.as_ref()?;
                    for key in path {
                        value = value.get(key)?;
                    }
                    value.as_f64()
                };
                [at(&x), at(&y)]
            };
            out.push(RowDelta {
                breakdown: key,
                name,
                completed: pair(&["requests", "completed"]),
                requests_per_sec: pair(&["throughput", "requests_per_sec"]),
                e2e_p99_ms: pair(&["latency_ms", "e2e", "p99"]),
                attained_fraction: pair(&["goodput", "attained_fraction"]),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn row(name: &str, completed: u64, rate: f64) -> Value {
        json!({"name": name, "requests": {"completed": completed},
               "throughput": {"requests_per_sec": rate},
               "latency_ms": {"e2e": {"p99": 10.0}}, "goodput": {"attained_fraction": 1.0}})
    }

    #[test]
    fn rows_are_matched_by_name_and_a_missing_one_is_empty_on_its_side() {
        let a = json!({"steps": [{"targets": [row("x", 10, 1.0), row("y", 5, 0.5)]}]});
        let b = json!({"steps": [{"targets": [row("y", 7, 0.7), row("z", 3, 0.3)]}]});
        let rows = row_deltas(&a, &b, 0);
        let names: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["x", "y", "z"]);
        assert_eq!(rows[0].completed, [Some(10.0), None]);
        assert_eq!(rows[1].completed, [Some(5.0), Some(7.0)]);
        assert_eq!(rows[2].requests_per_sec, [None, Some(0.3)]);
        assert!(rows.iter().all(|r| r.breakdown == "targets"));
    }
}
