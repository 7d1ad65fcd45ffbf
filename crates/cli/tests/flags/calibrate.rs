//! Probes of `goodput calibrate`, run against the capture server: its requests (the probe
//! plan, or the held-out workload of `--check`) are on the wire, the configuration it writes
//! is in the files, and what it prints is on stdout. The capture server answers at once, so
//! the fit itself is judged by its unit tests and the real-server test, not here.

use super::Expect::{At, Refused};
use super::probes::{Sub, Variant};
use super::{How, Stdout, probe};

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|a| a.to_string()).collect()
}

/// The variants of `calibrate`, `None` for other subcommands.
pub(crate) fn variants(sub: Sub) -> Option<Vec<Variant>> {
    if sub != Sub::Calibrate {
        return None;
    }
    Some(vec![
        Variant {
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
                // The configuration at the server's speed is written by a check.
                probe(
                    "--rescaled",
                    &["--rescaled", "{out}/now.toml"],
                    Refused("--check"),
                ),
                probe(
                    "--rescaled",
                    &["--check", "{batching}", "--rescaled", "{out}/now.toml"],
                    At("/files"),
                )
                .without(&["--out"])
                .against(&["--check", "{batching}"]),
                probe("--json", &["--json"], At("/stdout")),
                probe("--seed", &["--seed", "8"], At("/wire")),
                probe("--repeats", &["--repeats", "1"], At("/wire")),
                // One pass sends every probe once instead of twice.
                probe("--passes", &["--passes", "1"], At("/wire")),
                // Capacity is searched only under an SLO, in a check.
                probe("--slo", &["--slo", "e2e=1s"], Refused("--check")),
                probe(
                    "--dimension",
                    &["--dimension", "concurrency"],
                    Refused("--slo"),
                ),
            ],
            runs: false,
            how: How::default(),
        },
        check(),
    ])
}

/// A check with a small concurrency search (the capture server answers at once).
const CHECK: [&str; 28] = [
    "calibrate",
    "--target",
    "{url}/v1",
    "--check",
    "{batching}",
    "--seed",
    "7",
    "--json",
    "--slo",
    "e2e=10s",
    "--dimension",
    "concurrency",
    "--start",
    "1",
    "--max-load",
    "2",
    "--max-probes",
    "3",
    "--probe-requests",
    "2",
    "--attainment",
    "0.5",
    "--confidence",
    "0.5",
    "--probe-warmup",
    "0s",
    "--probe-min-duration",
    "100ms",
];

/// `--check` with a capacity search: its plan (JSON) shows every search flag. The capture
/// server answers at once, so both searches end at --max-load.
fn check() -> Variant {
    Variant {
        base: args(&CHECK),
        probes: vec![
            probe("--slo", &["--slo", "e2e=5s"], At("/stdout_text")),
            probe("--slo", &["--slo", "none"], Refused("--slo")),
            probe("--attainment", &["--attainment", "0.6"], At("/stdout_text")),
            probe("--confidence", &["--confidence", "0.6"], At("/stdout_text")),
            probe(
                "--dimension",
                &["--dimension", "rate", "--start", "50", "--max-load", "100"],
                At("/stdout_text"),
            )
            .without(&["--dimension", "--start", "--max-load"]),
            probe("--start", &["--start", "2"], At("/stdout_text")),
            // A concurrency search's floor is at least 1: raise it above.
            probe(
                "--min-load",
                &["--min-load", "1.5", "--start", "2"],
                At("/stdout_text"),
            )
            .without(&["--start"])
            .against(&["--start", "2"]),
            probe("--max-load", &["--max-load", "3"], At("/stdout_text")),
            probe("--max-probes", &["--max-probes", "2"], At("/stdout_text")),
            probe("--tolerance", &["--tolerance", "10%"], At("/stdout_text")),
            probe(
                "--probe-requests",
                &["--probe-requests", "3"],
                At("/stdout_text"),
            ),
            probe(
                "--probe-warmup",
                &["--probe-warmup", "1s"],
                At("/stdout_text"),
            ),
            probe(
                "--probe-min-duration",
                &["--probe-min-duration", "1s"],
                At("/stdout_text"),
            ),
            probe(
                "--max-probe-duration",
                &["--max-probe-duration", "1m"],
                At("/stdout_text"),
            ),
        ],
        runs: false,
        how: How {
            stdout: Stdout::Pointer("/capacity/plan"),
            ..How::default()
        },
    }
}
