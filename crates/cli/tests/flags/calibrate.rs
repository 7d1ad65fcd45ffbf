//! Probes of `goodput calibrate`, run against the capture server: its requests (the probe
//! plan, or the held-out workload of `--check`) are on the wire, the configuration it writes
//! is in the files, and what it prints is on stdout. The capture server answers at once, so
//! the fit itself is judged by its unit tests and the real-server test, not here.

use super::Expect::{At, Refused};
use super::probe;
use super::probes::{Sub, Variant};

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|a| a.to_string()).collect()
}

/// The variants of `calibrate`, `None` for other subcommands.
pub(crate) fn variants(sub: Sub) -> Option<Vec<Variant>> {
    if sub != Sub::Calibrate {
        return None;
    }
    Some(vec![Variant {
        base: args(&[
            "calibrate",
            "--target",
            "{url}/v1",
            "--out",
            "{out}/calibrated.toml",
            "--seed",
            "7",
        ]),
        probes: vec![
            probe("--target", &["--target", "{url}/other/v1"], At("/wire")),
            // No time to probe: nothing measured, so nothing to fit.
            probe("--budget", &["--budget", "0s"], Refused("--budget")),
            probe("--out", &["--out", "{out}/fitted.toml"], At("/files")),
            probe("--check", &["--check", "{batching}"], At("/wire")).without(&["--out"]),
            probe("--json", &["--json"], At("/stdout")),
            probe("--seed", &["--seed", "8"], At("/wire")),
        ],
        runs: false,
        how: super::How::default(),
    }])
}
