//! Probes of `goodput tune`: the capacity search's flags judged as `capacity`'s are (tune runs
//! that search on every configuration, whose run the observation reads: its `run.json`,
//! report and analysis), those a tune refuses (a gate, a store and exports of one report,
//! sharding, `--out` left out), and tune's own — live against the capture server (each
//! configuration's "server" a `sleep` the tune starts and stops), and in virtual time over the
//! simulator's knobs.

use super::Expect::{At, Refused};
use super::load::SEARCH;
use super::probes::{
    SMALL, Sub, Variant, replica_probes, server_side_probes, simulator_probes, wire_probes,
};
use super::{Expect, Probe, probe, probe_without};

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|a| a.to_string()).collect()
}

/// The variants of `tune`, `None` for the other subcommands.
pub(crate) fn variants(sub: Sub) -> Option<Vec<Variant>> {
    if sub != Sub::Tune {
        return None;
    }
    let base = |extra: &[&str]| {
        let mut all = args(&["tune"]);
        all.extend(args(&SMALL));
        all.extend(args(&SEARCH));
        all.extend(args(extra));
        all
    };
    let live = [
        "--server-cmd",
        "sleep {{t}}",
        "--grid",
        "t=30",
        "--target",
        "{url}",
        "--model",
        "m",
    ];
    Some(vec![
        Variant {
            base: base(&live),
            probes: live_probes(),
            runs: false,
            how: super::How::default(),
        },
        Variant {
            base: base(&["--virtual-time", "--grid", "max_num_seqs=4"]),
            probes: virtual_probes(),
            runs: false,
            how: super::How::default(),
        },
    ])
}

/// A `/metrics` the capture server answers.
const MONITOR: &str = "{url}/monitor/metrics";

/// What refusing one report's flags says.
const ONE_REPORT: &str = "applies to one run's report";

/// `probe` expecting what tune does with its flag where that differs from `capacity`.
fn as_tune(mut probe: Probe) -> Probe {
    let refused = match probe.flag {
        "--gate"
        | "--store"
        | "--max-error-rate"
        | "--llmd-report"
        | "--mlflow"
        | "--mlflow-experiment"
        | "--otlp"
        | "--push-gateway" => Some(ONE_REPORT),
        "--shards" | "--shard-index" => Some("--shards"),
        "--start-at" => Some("--start-at"),
        "--out" => Some("--out DIR"),
        "--tp" | "--gpu-memory-utilization" => Some("--model-spec and --gpu"),
        // Without --target the servers' URL comes from {{port}}, which `sleep` lacks.
        "--target" => Some("{{port}}"),
        _ => None,
    };
    if let Some(says) = refused {
        probe.expect = Refused(says);
    }
    if probe.flag == "--accelerators" || probe.flag == "--gpu-hour-cost" {
        probe.expect = At("/tune");
    }
    probe
}

/// Live: every capacity flag on the wire and the server side, then tune's own.
fn live_probes() -> Vec<Probe> {
    let mut probes: Vec<Probe> = wire_probes(Sub::Capacity)
        .into_iter()
        .chain(server_side_probes())
        .filter(|p| p.flag != "--model-spec" || matches!(p.expect, Expect::At(_)))
        // A tune's configurations are one target each: its own probes refuse fleets.
        .filter(|p| !matches!(p.flag, "--route" | "--targets" | "--replica-header"))
        .map(as_tune)
        .collect();
    probes.extend(own_probes());
    probes.extend(refused_probes());
    probes
}

/// Tune's own flags, live.
fn own_probes() -> Vec<Probe> {
    vec![
        probe(
            "--metrics-interval",
            &["--metrics-url", MONITOR, "--metrics-interval", "50ms"],
            At("/report_settings"),
        )
        .against(&["--metrics-url", MONITOR]),
        probe_without(
            "--server-cmd",
            &["--server-cmd"],
            Refused("--server-cmd TEMPLATE"),
        ),
        probe("--grid", &["--grid", "t=30,31"], At("/tune")),
        probe("--grid-file", &["--grid-file", "{tune_grid}"], At("/tune")).without(&["--grid"]),
        probe("--ready-url", &["--ready-url", "{url}/models"], At("/wire")),
        probe("--ready-timeout", &["--ready-timeout", "1ms"], At("/tune")),
        probe("--stop-grace", &["--stop-grace", "2s"], At("/tune")),
        probe("--reset-url", &["--reset-url", "{url}/reset"], At("/wire")),
        probe(
            "--measure",
            &[
                "--measure",
                "sweep",
                "--concurrency-steps",
                "1",
                "--requests",
                "4",
            ],
            At("/tune"),
        )
        .without(&SEARCH_ONLY),
    ]
}

/// Tune's own flags a live tune refuses without their partner, and a fleet's.
fn refused_probes() -> Vec<Probe> {
    vec![
        probe(
            "--concurrency-steps",
            &["--concurrency-steps", "1"],
            Refused("--measure sweep"),
        ),
        probe(
            "--rate-steps",
            &["--rate-steps", "20"],
            Refused("--measure sweep"),
        ),
        probe(
            "--accelerators-per-config",
            &["--accelerators-per-config", "2"],
            At("/tune"),
        ),
        probe(
            "--verify-top",
            &["--verify-top", "1"],
            Refused("--virtual-time"),
        ),
        probe("--resume", &["--resume", "{out}"], Refused("no tune.json")),
        probe(
            "--targets",
            &["--targets", "{tune_grid}"],
            Refused("--targets"),
        ),
        probe("--route", &["--route", "round-robin"], Refused("--route")),
        probe(
            "--replica-header",
            &["--replica-header", "x-served-by"],
            Refused("--replica-header"),
        ),
    ]
}

/// The capacity search's own flags (a sweep refuses them), but the SLO's and attainment.
const SEARCH_ONLY: [&str; 6] = [
    "--confidence",
    "--start",
    "--max-probes",
    "--probe-requests",
    "--probe-warmup",
    "--probe-min-duration",
];

/// In virtual time: the load a search sets, and the simulator the knobs start from.
fn virtual_probes() -> Vec<Probe> {
    let mut probes = vec![
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
    ];
    for mut probe in simulator_probes(Sub::Capacity)
        .into_iter()
        .chain(replica_probes())
    {
        match probe.flag {
            // Virtual time runs reasoning and tool calls as the live simulator does: they
            // change what each configuration measured.
            "--sim-reasoning-tokens" => probe.expect = Expect::Changes,
            "--sim-tool-calls" if probe.args.len() > 2 => probe.expect = Expect::Changes,
            "--metrics-interval" => probe.expect = Refused("--metrics-interval"),
            "--model-spec" => continue,
            // Virtual configurations write no run.json: their simulator is sim.json.
            _ if matches!(probe.expect, Expect::At("/run_json")) => probe.expect = At("/sim"),
            _ => {}
        }
        probes.push(probe);
    }
    probes
}
