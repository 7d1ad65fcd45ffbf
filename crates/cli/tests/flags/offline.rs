//! Probes of the subcommands that read earlier runs (`report`, `compare`, `gate`, `history`)
//! or plan from figures (`plan`): fixtures `{ra}` and `{rb}` are two small runs of the
//! embedded simulator, `{runs_store}` a history store holding both, `{rc}` a capacity search
//! in virtual time; stdout is observed whole.

use super::Expect::{At, Refused};
use super::probes::{Sub, Variant};
use super::{Probe, Stdout, probe, probe_without};

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|a| a.to_string()).collect()
}

fn offline(base: &[&str], probes: Vec<Probe>) -> Variant {
    Variant {
        base: args(base),
        probes,
        runs: true,
        how: super::How {
            stdout: Stdout::Whole,
            client: None,
        },
    }
}

/// The variants of an offline subcommand, `None` for the ones that run load.
pub(crate) fn variants(sub: Sub) -> Option<Vec<Variant>> {
    Some(match sub {
        Sub::Report => vec![report()],
        Sub::Compare => vec![compare()],
        Sub::Gate => vec![gate()],
        Sub::History => vec![history()],
        Sub::Plan => vec![plan(), plan_simulated()],
        Sub::Merge => vec![merge()],
        _ => return None,
    })
}

const TEXT: &str = "/stdout_text";

fn report() -> Variant {
    offline(
        &["report", "{ra}", "--out", "{out}"],
        vec![
            probe("--slo", &["--slo", "ttft=1ms"], At(TEXT)),
            probe_without("--out", &["--out"], At("/files")),
            probe("--json", &["--json"], At("/stdout")),
            probe("--format", &["--format", "markdown"], At(TEXT)),
            probe("--details", &["--details"], At(TEXT)),
            probe("--store", &["--store", "{out}/history.db"], At("/files")),
        ]
        .into_iter()
        .chain(super::exports::probes())
        .collect(),
    )
}

fn compare() -> Variant {
    offline(
        &["compare", "{ra}", "{rb}"],
        vec![
            probe("--format", &["--format", "markdown"], At(TEXT)),
            probe(
                "--output",
                &["--output", "{out}/comparison.txt"],
                At("/files"),
            ),
            probe("--alpha", &["--alpha", "1e-300"], At(TEXT)),
            probe("--min-effect", &["--min-effect", "100"], At(TEXT)),
            probe(
                "--fail-on-regression",
                &["--fail-on-regression"],
                At("/code"),
            ),
            probe("--html", &["--html", "{out}/comparison.html"], At("/files")),
            probe("--details", &["--details"], At(TEXT)),
        ],
    )
}

fn merge() -> Variant {
    offline(
        &["merge", "{shard0}", "{shard1}", "--out", "{out}"],
        vec![
            probe_without("--out", &["--out"], Refused("--out")),
            probe("--slo", &["--slo", "ttft=1ms"], At(TEXT)),
            probe("--json", &["--json"], At("/stdout")),
        ],
    )
}

fn gate() -> Variant {
    offline(
        &["gate", "{ra}", "--condition", "ttft.p99 <= 10s"],
        vec![
            probe("--criteria", &["--criteria", "{gate}"], At("/code")),
            probe(
                "--condition",
                &["--condition", "e2e.p50 <= 1us"],
                At("/code"),
            ),
            probe("--step", &["--step", "7"], Refused("step")),
        ],
    )
}

fn history() -> Variant {
    offline(
        &["history", "--store", "{runs_store}"],
        vec![
            probe("--store", &["--store", "{out}/empty.db"], At(TEXT)),
            probe("--metric", &["--metric", "e2e.p50"], At(TEXT)),
            probe(
                "--by",
                &["--metric", "e2e.p50", "--by", "tag:team"],
                At(TEXT),
            )
            .against(&["--metric", "e2e.p50"]),
            probe("--tag", &["--tag", "team=a"], At(TEXT)),
            probe("--model", &["--model", "other"], At(TEXT)),
            probe("--last", &["--last", "1"], At(TEXT)),
            probe(
                "--add",
                &["--store", "{out}/new.db", "--add", "{ra}"],
                At(TEXT),
            )
            .against(&["--store", "{out}/new.db"]),
        ],
    )
}

/// A quick capacity search of the simulator: a small workload, loose criteria.
const QUICK_SIMULATION: [&str; 13] = [
    "--simulate",
    "--sim-gpu",
    "a100-80g",
    "--attainment",
    "0.5",
    "--confidence",
    "0.5",
    "--input-tokens",
    "64",
    "--output-tokens",
    "16",
    "--slo",
    "ttft=500ms",
];

fn plan() -> Variant {
    offline(
        &["plan", "--peak-rps", "100", "--capacity", "10"],
        vec![
            probe("--peak-rps", &["--peak-rps", "50"], At(TEXT)),
            probe("--peak-output-tps", &["--peak-output-tps", "900"], At(TEXT))
                .without(&["--peak-rps"]),
            probe("--capacity", &["--capacity", "20"], At(TEXT)),
            probe("--capacity-from", &["--capacity-from", "{rc}"], At(TEXT))
                .without(&["--capacity"]),
            probe(
                "--report-devices",
                &["--capacity-from", "{rc}", "--report-devices", "2"],
                At(TEXT),
            )
            .without(&["--capacity"])
            .against(&["--capacity-from", "{rc}"]),
            probe("--safety-factor", &["--safety-factor", "2"], At(TEXT)),
            probe("--failures", &["--failures", "2"], At(TEXT)),
            probe("--growth", &["--growth", "10%"], At(TEXT)),
            probe(
                "--horizon",
                &["--growth", "10%", "--horizon", "3"],
                At(TEXT),
            )
            .against(&["--growth", "10%"]),
            probe(
                "--accelerators-per-device",
                &["--accelerators-per-device", "4"],
                At(TEXT),
            ),
            probe("--gpu-hour-cost", &["--gpu-hour-cost", "2"], At(TEXT)),
            probe("--json", &["--json"], At("/stdout")),
            probe("--simulate", &["--simulate"], Refused("--capacity")),
            probe("--simulate", &QUICK_SIMULATION, At(TEXT)).without(&["--capacity"]),
        ],
    )
}

/// `plan --simulate`, small and quick: every simulator flag against it.
fn plan_simulated() -> Variant {
    let simulated = [&["plan", "--peak-rps", "100"][..], &QUICK_SIMULATION].concat();
    offline(
        &simulated,
        vec![
            probe("--sim-model", &["--sim-model", "qwen2.5-7b"], At(TEXT)),
            probe("--sim-gpu", &["--sim-gpu", "l40s"], At(TEXT)),
            probe(
                "--sim-config",
                &["--sim-config", "{sim}"],
                Refused("batching"),
            )
            .without(&["--sim-gpu"]),
            probe("--sim-config", &["--sim-config", "{batching}"], At(TEXT))
                .without(&["--sim-gpu"]),
            probe("--input-tokens", &["--input-tokens", "128"], At(TEXT)),
            probe("--output-tokens", &["--output-tokens", "8"], At(TEXT)),
            probe("--slo", &["--slo", "ttft=300ms"], At(TEXT)),
            probe("--attainment", &["--attainment", "0.9"], At(TEXT)),
            probe("--confidence", &["--confidence", "0.9"], At(TEXT)),
            probe("--seed", &["--seed", "2"], At(TEXT)),
            probe("--sim-dtype", &["--sim-dtype", "fp8"], At(TEXT)),
            probe("--sim-kv-dtype", &["--sim-kv-dtype", "fp8"], At(TEXT)),
            probe("--sim-engine", &["--sim-engine", "sglang"], At(TEXT)),
            probe("--sim-layout", &["--sim-layout", "1p+1d"], At(TEXT)),
        ],
    )
}
