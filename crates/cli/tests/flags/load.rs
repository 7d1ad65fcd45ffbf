//! Probes of the load shape, which each subcommand owns differently (`run` takes one load,
//! `sweep` its steps, `capacity` its search), and of the flags only `sweep` or `capacity` has.

use super::Expect::{At, Refused};
use super::probes::Sub;
use super::{Probe, probe, probe_without};

/// A capacity search of one short probe (the base of `capacity` and `tune`).
pub(crate) const SEARCH: [&str; 16] = [
    "--slo",
    "ttft=2s",
    "--start",
    "50",
    "--max-probes",
    "1",
    "--probe-requests",
    "20",
    "--probe-warmup",
    "0s",
    "--probe-min-duration",
    "300ms",
    "--attainment",
    "0.5",
    "--confidence",
    "0.5",
];

/// Open-loop shaping and duration flags, judged on the capture server.
pub(crate) fn probes(sub: Sub) -> Vec<Probe> {
    let mut probes = vec![
        probe("--arrival", &["--arrival", "constant"], At("/run_json")),
        probe(
            "--burstiness",
            &["--arrival", "gamma", "--burstiness", "0.5"],
            At("/run_json"),
        ),
        probe(
            "--max-concurrency",
            &["--max-concurrency", "1"],
            At("/run_json"),
        ),
    ];
    match sub {
        Sub::Run | Sub::Sweep => probes.extend([
            probe("--requests", &["--requests", "5"], At("/run_json")),
            probe("--duration", &["--duration", "300ms"], At("/run_json")),
        ]),
        _ => probes.extend([
            probe("--requests", &["--requests", "5"], Refused("--requests")),
            probe("--duration", &["--duration", "1s"], Refused("--duration")),
        ]),
    }
    probes.extend(match sub {
        Sub::Run => vec![
            probe("--virtual-time", &["--virtual-time"], Refused("--target")),
            probe("--repeats", &["--repeats", "2"], At("/report")),
        ],
        Sub::Sweep => sweep(),
        _ => capacity(),
    });
    probes
}

/// The load itself, judged on the embedded simulator.
pub(crate) fn sim_probes(sub: Sub) -> Vec<Probe> {
    match sub {
        Sub::Run => vec![
            probe_without("--rate", &["--rate"], At("/run_json")),
            probe("--concurrency", &["--concurrency", "2"], Refused("--rate")),
            probe("--concurrency", &["--concurrency", "2"], At("/run_json")).without(&["--rate"]),
            probe("--phases", &["--phases", "a=20:300ms"], Refused("--rate")),
            probe("--phases", &["--phases", "a=20:300ms"], At("/run_json"))
                .without(&["--rate", "--requests"]),
            probe("--profile", &["--profile", "{profile}"], Refused("--rate")),
            probe("--profile", &["--profile", "{profile}"], At("/run_json"))
                .without(&["--rate", "--requests"]),
            probe("--virtual-time", &["--virtual-time"], At("/report")),
            probe("--repeats", &["--repeats", "2"], At("/report")),
        ],
        Sub::Sweep => vec![
            probe("--rate", &["--rate", "30"], Refused("--rate-steps")),
            probe(
                "--concurrency",
                &["--concurrency", "2"],
                Refused("--rate-steps"),
            ),
            probe(
                "--phases",
                &["--phases", "a=20:300ms"],
                Refused("--rate-steps"),
            ),
            probe(
                "--profile",
                &["--profile", "{profile}"],
                Refused("--rate-steps"),
            ),
            probe("--virtual-time", &["--virtual-time"], At("/report")),
        ],
        _ => vec![
            probe("--rate", &["--rate", "30"], Refused("--rate")),
            probe(
                "--concurrency",
                &["--concurrency", "2"],
                Refused("--concurrency"),
            ),
            probe("--phases", &["--phases", "a=20:300ms"], Refused("--phases")),
            probe(
                "--profile",
                &["--profile", "{profile}"],
                Refused("--profile"),
            ),
            probe("--virtual-time", &["--virtual-time"], At("/report")),
        ],
    }
}

fn sweep() -> Vec<Probe> {
    vec![
        probe("--virtual-time", &["--virtual-time"], Refused("--target")),
        probe("--rate-steps", &["--rate-steps", "20,30"], At("/run_json")),
        probe(
            "--concurrency-steps",
            &["--concurrency-steps", "1,2"],
            At("/run_json"),
        )
        .without(&["--rate-steps"]),
        probe(
            "--batch-steps",
            &["--batch-steps", "1,2"],
            Refused("--api completions"),
        )
        .without(&["--rate-steps"]),
        probe(
            "--batch-steps",
            &["--api", "completions", "--batch-steps", "1,2"],
            At("/wire"),
        )
        .without(&["--rate-steps"])
        .against(&["--api", "completions"]),
        probe("--knee-gain", &["--knee-gain", "50%"], At("/run_json")),
        probe("--repeats", &["--repeats", "2"], At("/report")),
    ]
}

fn capacity() -> Vec<Probe> {
    vec![
        probe("--attainment", &["--attainment", "0.9"], At("/run_json")),
        probe("--confidence", &["--confidence", "0.9"], At("/run_json")),
        probe("--budget", &["--budget", "1m"], At("/run_json")),
        probe("--repeats", &["--repeats", "2"], At("/report")),
        probe(
            "--dimension",
            &["--dimension", "concurrency", "--start", "2"],
            At("/run_json"),
        ),
        probe("--max-load", &["--max-load", "60"], At("/run_json")),
        probe("--min-load", &["--min-load", "1"], At("/run_json")),
        probe("--max-probes", &["--max-probes", "2"], At("/run_json")),
        probe(
            "--max-probe-duration",
            &["--max-probe-duration", "5s"],
            At("/run_json"),
        ),
        probe(
            "--probe-min-duration",
            &["--probe-min-duration", "500ms"],
            At("/run_json"),
        ),
        probe(
            "--probe-requests",
            &["--probe-requests", "10"],
            At("/run_json"),
        ),
        probe(
            "--probe-warmup",
            &["--probe-warmup", "100ms"],
            At("/run_json"),
        ),
        probe("--start", &["--start", "40"], At("/run_json")),
        probe("--tolerance", &["--tolerance", "10%"], At("/run_json")),
        probe("--virtual-time", &["--virtual-time"], Refused("--target")),
    ]
}
