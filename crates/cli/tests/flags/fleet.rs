//! The fleet flags' probes: correlation ids, adapter mixes, SLO classes, several targets and
//! the replica header.

use super::Expect::{At, Refused};
use super::{Probe, probe};

/// Correlation ids, adapter mixes and SLO classes.
pub(crate) fn fleet_probes() -> Vec<Probe> {
    vec![
        probe(
            "--request-id-header",
            &["--request-id-header", "x-probe-id"],
            At("/wire"),
        ),
        probe("--no-request-id", &["--no-request-id"], At("/wire")),
        probe("--lora", &["--lora", "probe-adapter=50%"], At("/wire")),
        probe(
            "--class",
            &["--class", "a=50%:ttft=1s", "--class", "b=50%:e2e=9s"],
            At("/run_json"),
        ),
        // One target: no fleet to route (a fleet's routing is checked in cli_fleet_targets).
        probe(
            "--route",
            &["--route", "least-outstanding"],
            Refused("more than once"),
        ),
        probe(
            "--targets",
            &["--targets", "{dir}/no-such-targets.txt"],
            Refused("--targets"),
        ),
        probe(
            "--replica-header",
            &["--replica-header", "x-served-by"],
            At("/run_json"),
        ),
    ]
}
