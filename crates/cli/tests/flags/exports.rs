//! The probes of the exports to other tools (`--push-gateway`, `--llmd-report`, `--mlflow`),
//! shared by `run`, `sweep` and `capacity`.

use super::Expect::{At, Refused};
use super::{Probe, probe};

/// The exports to other tools: a file written, or a receiver that is down (port 9 on
/// loopback: nothing listens, the export fails after the report, exit 1).
pub(crate) fn probes() -> Vec<Probe> {
    vec![
        probe(
            "--llmd-report",
            &["--llmd-report", "{out}/llmd.json"],
            At("/files"),
        ),
        probe("--mlflow", &["--mlflow", "http://127.0.0.1:9"], At("/code")),
        probe(
            "--mlflow-experiment",
            &["--mlflow-experiment", "bench"],
            Refused("--mlflow-experiment needs --mlflow"),
        ),
        probe("--otlp", &["--otlp", "http://127.0.0.1:9"], At("/code")),
        probe(
            "--push-gateway",
            &["--push-gateway", "http://127.0.0.1:9"],
            At("/code"),
        ),
    ]
}
