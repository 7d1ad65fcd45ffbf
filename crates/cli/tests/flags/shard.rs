//! Probes of the sharding flags (`--shards`, `--shard-index`, `--start-at`; `{now}` is the
//! time the probe runs, as Unix seconds).

use super::Expect::{At, Refused};
use super::probes::Sub;
use super::{Probe, probe};

/// One shard of two sends only its part of the schedule (fewer requests on the wire); a
/// sharded capacity search by concurrency needs `--min-load` ≥ N.
pub(crate) fn probes(sub: Sub) -> Vec<Probe> {
    let shards = match sub {
        Sub::Run => probe(
            "--shards",
            &["--shards", "2", "--shard-index", "1", "--start-at", "{now}"],
            At("/wire"),
        ),
        Sub::Sweep => probe(
            "--shards",
            &[
                "--shards",
                "2",
                "--shard-index",
                "1",
                "--start-at",
                "{now}",
                "--duration",
                "1s",
                "--request-timeout",
                "2s",
            ],
            At("/wire"),
        ),
        _ => probe(
            "--shards",
            &[
                "--shards",
                "2",
                "--shard-index",
                "0",
                "--start-at",
                "{now}",
                "--dimension",
                "concurrency",
            ],
            Refused("--min-load"),
        ),
    };
    vec![
        shards,
        probe(
            "--shard-index",
            &["--shard-index", "1"],
            Refused("--shards"),
        ),
        probe("--start-at", &["--start-at", "{now}"], At("/run_json")),
        probe(
            "--start-at",
            &["--start-at", "2020-01-01T00:00:00Z"],
            Refused("ago"),
        ),
    ]
}
