//! `--api realtime`'s session flags' probes, and AWS SigV4 signing's.

use super::Expect::{At, Refused};
use super::{Probe, probe};

/// `--api realtime`'s session flags against a plain `--api realtime` run (`run.workload`
/// records them).
pub(crate) fn probes() -> Vec<Probe> {
    vec![
        probe(
            "--audio-seconds",
            &["--api", "realtime", "--audio-seconds", "0.2"],
            At("/run_json"),
        )
        .against(&["--api", "realtime"]),
        probe(
            "--audio-chunk",
            &["--api", "realtime", "--audio-chunk", "50ms"],
            At("/run_json"),
        )
        .against(&["--api", "realtime"]),
        probe(
            "--realtime-dialect",
            &["--api", "realtime", "--realtime-dialect", "vllm"],
            At("/run_json"),
        )
        .against(&["--api", "realtime"]),
    ]
}

/// `--aws-region` with `--aws-service` signs every request (the probe's environment holds
/// example credentials); one without the other is refused.
pub(crate) fn signing_probes() -> Vec<Probe> {
    vec![
        probe(
            "--aws-region",
            &["--aws-region", "us-east-1", "--aws-service", "sagemaker"],
            At("/wire"),
        ),
        probe(
            "--aws-service",
            &["--aws-service", "sagemaker"],
            Refused("--aws-region and --aws-service go together"),
        ),
    ]
}
