//! The probes: for each subcommand, one or more variants (a base command line and the probes
//! judged against it). Every flag `--help` lists must be probed in some variant.

use super::Expect::{At, OnTerminal, Refused};
use super::{Probe, probe, probe_without};

/// A subcommand under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sub {
    Run,
    Sweep,
    Capacity,
    Report,
    Compare,
    Gate,
    History,
    Ui,
    Plan,
    Sim,
    Monitor,
    Merge,
    Calibrate,
    Tune,
}

impl Sub {
    /// Every subcommand under test.
    pub(crate) const ALL: [Sub; 14] = [
        Sub::Run,
        Sub::Sweep,
        Sub::Capacity,
        Sub::Report,
        Sub::Compare,
        Sub::Gate,
        Sub::History,
        Sub::Ui,
        Sub::Plan,
        Sub::Sim,
        Sub::Monitor,
        Sub::Merge,
        Sub::Calibrate,
        Sub::Tune,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Sub::Run => "run",
            Sub::Sweep => "sweep",
            Sub::Capacity => "capacity",
            Sub::Report => "report",
            Sub::Compare => "compare",
            Sub::Gate => "gate",
            Sub::History => "history",
            Sub::Ui => "ui",
            Sub::Plan => "plan",
            Sub::Sim => "sim",
            Sub::Monitor => "monitor",
            Sub::Merge => "merge",
            Sub::Calibrate => "calibrate",
            Sub::Tune => "tune",
        }
    }
}

/// A base command line and the probes judged against it.
#[derive(Debug, Clone)]
pub(crate) struct Variant {
    pub(crate) base: Vec<String>,
    pub(crate) probes: Vec<Probe>,
    /// Needs earlier runs as fixtures (`{ra}`, `{rb}`, `{runs_store}`, `{rc}`).
    pub(crate) runs: bool,
    /// How a command is run and observed.
    pub(crate) how: super::How,
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|a| a.to_string()).collect()
}

pub(crate) const SMALL: [&str; 9] = [
    "--quiet",
    "--seed",
    "7",
    "--input-tokens",
    "32",
    "--output-tokens",
    "4",
    "--out",
    "{out}",
];

/// Base flags a dataset or trace replaces; a trace's (it sets every arrival time too).
const LENGTHS: &[&str] = &["--input-tokens", "--output-tokens"];
const REPLAY: &[&str] = &["--input-tokens", "--output-tokens", "--rate"];

/// An agentic session shape.
const AGENT: &[&str] = &["--agent", "tool-prob=1,tool-latency=1ms,result-tokens=4"];

/// A request body offering one tool.
const TOOLS: &str = r#"{"tools": [{"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}]}"#;

/// The variants of a subcommand.
pub(crate) fn variants(sub: Sub) -> Vec<Variant> {
    if let Some(offline) = super::offline::variants(sub) {
        return offline;
    }
    if let Some(served) = super::serve::variants(sub) {
        return served;
    }
    if let Some(calibrate) = super::calibrate::variants(sub) {
        return calibrate;
    }
    if let Some(tune) = super::tune::variants(sub) {
        return tune;
    }
    let load: &[&str] = match sub {
        Sub::Run => &["--requests", "6", "--rate", "50"],
        Sub::Sweep => &["--requests", "4", "--rate-steps", "20,40"],
        _ => &super::load::SEARCH,
    };
    let base = |extra: &[&str]| {
        let mut all = args(&[sub.name()]);
        if sub == Sub::Run {
            all.push("--no-live".to_string());
        }
        all.extend(args(&SMALL));
        all.extend(args(load));
        all.extend(args(extra));
        all
    };
    vec![
        Variant {
            base: base(&["--target", "{url}", "--model", "m"]),
            probes: wire_probes(sub),
            runs: false,
            how: super::How::default(),
        },
        Variant {
            base: base(&[]),
            probes: sim_probes(sub),
            runs: false,
            how: super::How::default(),
        },
    ]
}

/// Flags whose effect is on the requests sent, or on the client's bookkeeping.
pub(crate) fn wire_probes(sub: Sub) -> Vec<Probe> {
    let mut probes = request_probes();
    probes.extend(super::fleet::fleet_probes());
    probes.extend(tensor_probes());
    probes.extend(super::apis::probes());
    probes.extend(super::apis::signing_probes());
    probes.extend(http_stream_probes());
    probes.extend(session_and_dataset_probes());
    probes.extend(replay_probes(sub));
    probes.extend(output_probes());
    probes.extend(super::exports::probes());
    probes.extend(super::load::probes(sub));
    probes.extend(super::shard::probes(sub));
    probes
}

/// `--api http` with the fixture template, POSTed to the capture server's chat endpoint.
const HTTP_API: [&str; 6] = [
    "--api",
    "http",
    "--request-template",
    "{template}",
    "--target",
    "{url}/chat/completions",
];

/// `--api http`'s streaming, against plain `--api http` runs; chat images.
fn http_stream_probes() -> Vec<Probe> {
    vec![
        probe(
            "--image-resolution",
            &["--image-resolution", "16x16"],
            At("/wire"),
        ),
        probe("--image-dir", &["--image-dir", "{images}"], At("/wire")),
        probe(
            "--images-per-request",
            &["--image-resolution", "16x16", "--images-per-request", "2"],
            At("/wire"),
        )
        .against(&["--image-resolution", "16x16"]),
        // The capture server answers one JSON body: read as SSE it has no event, so every
        // request fails (and run.json says `stream: true`).
        probe(
            "--stream-format",
            &[&HTTP_API[..], &["--stream-format", "sse"]].concat(),
            super::Expect::Changes,
        )
        .without(&["--target"])
        .against(&HTTP_API),
        probe(
            "--tokens-path",
            &[
                &HTTP_API[..],
                &["--stream-format", "sse", "--tokens-path", "$.t"],
            ]
            .concat(),
            At("/run_json"),
        )
        .against(&[&HTTP_API[..], &["--stream-format", "sse"]].concat())
        .without(&["--target"]),
    ]
}

/// `--api v2`'s tensors and `--grpc`, each against a plain `--api v2` run, and `--query`.
fn tensor_probes() -> Vec<Probe> {
    vec![
        probe(
            "--tensor-shape",
            &["--api", "v2", "--tensor-shape", "2x3"],
            At("/wire"),
        )
        .against(&["--api", "v2"]),
        probe(
            "--tensor-dtype",
            &["--api", "v2", "--tensor-dtype", "INT64"],
            At("/wire"),
        )
        .against(&["--api", "v2"]),
        probe(
            "--tensor-name",
            &["--api", "v2", "--tensor-name", "pixels"],
            At("/wire"),
        )
        .against(&["--api", "v2"]),
        probe(
            "--tensor-file",
            &["--api", "v2", "--tensor-file", "{tensors}"],
            At("/wire"),
        )
        .against(&["--api", "v2"]),
        probe(
            "--grpc",
            &["--api", "v2", "--grpc", "unary"],
            At("/run_json"),
        )
        .against(&["--api", "v2"]),
        probe(
            "--query",
            &[
                "--api",
                "rerank",
                "--batch-size",
                "2",
                "--query",
                "which cat",
            ],
            At("/wire"),
        )
        .against(&["--api", "rerank", "--batch-size", "2"]),
    ]
}

/// The target and the shape of every request.
fn request_probes() -> Vec<Probe> {
    vec![
        probe_without("--target", &["--target", "--model"], At("/wire")),
        probe("--api", &["--api", "completions"], At("/wire")),
        probe("--model", &["--model", "other"], At("/wire")),
        probe("--no-stream", &["--no-stream"], At("/wire")),
        probe(
            "--batch-size",
            &["--api", "completions", "--batch-size", "2"],
            At("/wire"),
        )
        .against(&["--api", "completions"]),
        probe("--request-template", &HTTP_API, At("/wire")).without(&["--target"]),
        // The reply's `usage.completion_tokens` (the template's max_tokens) as the items count,
        // instead of one input per request.
        probe(
            "--items-path",
            &[
                &HTTP_API[..],
                &["--items-path", "$.usage.completion_tokens"],
            ]
            .concat(),
            super::Expect::Changes,
        )
        .without(&["--target"])
        .against(&HTTP_API),
        probe("--header", &["--header", "x-probe:1"], At("/wire")),
        // HTTP/2 with prior knowledge: the capture server (HTTP/1.1) reads the h2 preface.
        probe("--http2", &["--http2"], At("/wire")),
        probe("--api-key", &["--api-key", "secret"], At("/wire")),
        probe(
            "--extra-body",
            &["--extra-body", r#"{"temperature":0.5}"#],
            At("/wire"),
        ),
        probe("--no-ignore-eos", &["--no-ignore-eos"], At("/wire")),
        probe(
            "--no-continuous-usage",
            &["--no-continuous-usage"],
            At("/wire"),
        ),
        probe(
            "--tokenizer",
            &["--tokenizer", "o200k_base"],
            At("/run_json"),
        ),
        probe("--input-tokens", &["--input-tokens", "64"], At("/wire")),
        probe("--output-tokens", &["--output-tokens", "8"], At("/wire")),
        probe(
            "--shared-prefix",
            &["--shared-prefix", "groups=2,tokens=16"],
            At("/wire"),
        ),
        probe("--turns", &["--turns", "2"], At("/wire")),
    ]
}

/// Multi-turn sessions, agents and datasets.
fn session_and_dataset_probes() -> Vec<Probe> {
    vec![
        probe(
            "--think-time",
            &["--think-time", "20ms"],
            Refused("--turns"),
        ),
        probe(
            "--think-time",
            &["--turns", "2", "--think-time", "20ms"],
            At("/run_json"),
        )
        .against(&["--turns", "2"]),
        probe("--agent", AGENT, Refused("--turns")),
        probe("--agent", &[&["--turns", "2"], AGENT].concat(), At("/wire"))
            .against(&["--turns", "2"]),
        probe("--dataset", &["--dataset", "{dataset}"], At("/wire")).without(LENGTHS),
        probe(
            "--dataset-format",
            &["--dataset", "{dataset}", "--dataset-format", "sharegpt"],
            Refused(""),
        )
        .without(LENGTHS),
        probe("--skip-invalid", &["--skip-invalid"], Refused("--dataset")),
        probe(
            "--skip-invalid",
            &["--dataset", "{bad}", "--skip-invalid"],
            At("/code"),
        )
        .without(LENGTHS)
        .against(&["--dataset", "{bad}"]),
    ]
}

/// Trace replay (only `run` replays one: a trace sets every arrival) and invalid records.
fn replay_probes(sub: Sub) -> Vec<Probe> {
    let replay = |expect| {
        if sub == Sub::Run {
            expect
        } else {
            Refused("--trace")
        }
    };
    vec![
        probe("--trace", &["--trace", "{trace}"], replay(At("/wire"))).without(REPLAY),
        probe(
            "--trace-format",
            &["--trace", "{trace}", "--trace-format", "azure"],
            Refused(""),
        )
        .without(REPLAY),
        probe(
            "--trace-time-scale",
            &["--trace-time-scale", "2"],
            Refused("--trace"),
        ),
        probe(
            "--trace-time-scale",
            &["--trace", "{trace}", "--trace-time-scale", "2"],
            replay(At("/run_json")),
        )
        .without(REPLAY)
        .against(&["--trace", "{trace}"]),
        probe(
            "--trace-rate-scale",
            &["--trace-rate-scale", "2"],
            Refused("--trace"),
        ),
        probe(
            "--trace-rate-scale",
            &["--trace", "{trace}", "--trace-rate-scale", "2"],
            replay(At("/run_json")),
        )
        .without(REPLAY)
        .against(&["--trace", "{trace}"]),
        probe(
            "--trace-block-tokens",
            &["--trace-block-tokens", "16"],
            Refused("--trace"),
        ),
        probe(
            "--trace-block-tokens",
            &["--trace", "{mooncake}", "--trace-block-tokens", "16"],
            replay(At("/wire")),
        )
        .without(REPLAY)
        .against(&["--trace", "{mooncake}"]),
    ]
}

/// Measurement and output flags.
fn output_probes() -> Vec<Probe> {
    vec![
        probe(
            "--length-buckets",
            &["--length-buckets", "16,64"],
            At("/report_settings"),
        ),
        probe("--slo", &["--slo", "ttft=1s"], At("/run_json")),
        probe("--seed", &["--seed", "8"], At("/wire")),
        probe("--window", &["--window", "500ms"], At("/run_json")),
        probe("--time-scale", &["--time-scale", "2"], At("/run_json")),
        probe(
            "--max-error-rate",
            &["--dataset", "{failing}", "--max-error-rate", "0.01"],
            At("/code"),
        )
        .without(LENGTHS)
        .against(&["--dataset", "{failing}"]),
        probe("--warmup", &["--warmup", "0"], At("/run_json")),
        probe(
            "--request-timeout",
            &["--request-timeout", "9s"],
            At("/run_json"),
        ),
        probe(
            "--no-progress-timeout",
            &["--no-progress-timeout", "9s"],
            At("/run_json"),
        ),
        probe_without("--out", &["--out"], At("/files")),
        probe("--json", &["--json"], At("/stdout")),
        probe("--format", &["--format", "markdown"], At("/stdout")),
        probe("--details", &["--details"], At("/stdout")),
        probe_without("--quiet", &["--quiet"], At("/stderr")),
        probe("--tag", &["--tag", "team=a"], At("/run_json")),
        probe("--gate", &["--gate", "{gate}"], At("/code")),
        probe("--store", &["--store", "{out}/history.db"], At("/files")),
        probe(
            "--metrics-url",
            &["--metrics-url", "{url}/elsewhere/metrics"],
            At("/wire"),
        ),
        probe("--no-metrics", &["--no-metrics"], At("/wire")),
    ]
}

/// Flags about the embedded simulator and the server-side figures, judged on the simulator.
fn sim_probes(sub: Sub) -> Vec<Probe> {
    let mut probes = super::load::sim_probes(sub);
    probes.extend(simulator_probes(sub));
    probes.extend(replica_probes());
    probes.extend(server_side_probes());
    probes
}

/// Replicas behind a load balancer in the embedded simulator.
pub(crate) fn replica_probes() -> Vec<Probe> {
    vec![
        probe("--sim-replicas", &["--sim-replicas", "2"], At("/run_json")),
        probe("--sim-layout", &["--sim-layout", "2p+2d"], At("/run_json")),
        probe(
            "--sim-routing",
            &["--sim-routing", "least-loaded"],
            Refused("--sim-replicas"),
        ),
        probe(
            "--sim-routing",
            &["--sim-replicas", "2", "--sim-routing", "least-loaded"],
            At("/run_json"),
        )
        .against(&["--sim-replicas", "2"]),
    ]
}

/// The embedded simulator's flags (and the live view, drawn only by `run`).
pub(crate) fn simulator_probes(sub: Sub) -> Vec<Probe> {
    vec![
        if sub == Sub::Run {
            probe("--no-live", &["--no-live"], OnTerminal).without(&["--no-live"])
        } else {
            probe("--no-live", &["--no-live"], Refused("live view"))
        },
        probe("--sim-config", &["--sim-config", "{sim}"], At("/run_json")),
        probe(
            "--sim-model",
            &["--sim-model", "llama-3.1-70b", "--sim-tp", "4"],
            At("/run_json"),
        )
        .against(&["--sim-tp", "4"]),
        probe("--sim-gpu", &["--sim-gpu", "h200"], At("/run_json")),
        probe(
            "--sim-reasoning-tokens",
            &["--sim-reasoning-tokens", "4"],
            At("/report"),
        ),
        probe(
            "--sim-tool-calls",
            &["--sim-tool-calls", "1"],
            Refused("tools"),
        ),
        probe(
            "--sim-tool-calls",
            &["--extra-body", TOOLS, "--sim-tool-calls", "1"],
            At("/report"),
        )
        .against(&["--extra-body", TOOLS]),
        probe("--sim-tp", &["--sim-tp", "2"], At("/run_json")),
        probe("--sim-dtype", &["--sim-dtype", "fp8"], At("/run_json")),
        probe(
            "--sim-kv-dtype",
            &["--sim-kv-dtype", "fp8"],
            At("/run_json"),
        ),
        probe("--sim-engine", &["--sim-engine", "sglang"], At("/run_json")),
        probe(
            "--metrics-interval",
            &["--metrics-interval", "50ms"],
            At("/report_settings"),
        ),
        probe(
            "--model-spec",
            &["--model-spec", "llama-3.1-70b"],
            Refused("--gpu"),
        ),
    ]
}

/// Hardware, cost and speculative-decoding descriptions for the server-side figures.
pub(crate) fn server_side_probes() -> Vec<Probe> {
    vec![
        probe(
            "--model-spec",
            &[
                "--model-spec",
                "llama-3.1-70b",
                "--gpu",
                "h100",
                "--tp",
                "4",
                "--accelerators",
                "4",
            ],
            At("/analysis"),
        ),
        probe("--gpu", &["--gpu", "a100-80g"], Refused("--model-spec")),
        probe(
            "--gpu",
            &["--model-spec", "llama-3.1-8b", "--gpu", "a100-80g"],
            At("/analysis"),
        ),
        probe("--accelerators", &["--accelerators", "2"], At("/analysis")),
        probe("--tp", &["--tp", "2"], At("/run_json")),
        probe(
            "--gpu-memory-utilization",
            &["--gpu-memory-utilization", "0.5"],
            At("/analysis"),
        ),
        probe(
            "--gpu-hour-cost",
            &["--gpu-hour-cost", "2"],
            At("/analysis"),
        ),
        probe("--watts", &["--watts", "500"], At("/analysis")),
        probe("--spec-k", &["--spec-k", "2"], At("/analysis")),
        probe(
            "--spec-draft-cost",
            &["--spec-k", "2", "--spec-draft-cost", "0.2"],
            At("/analysis"),
        ),
    ]
}
