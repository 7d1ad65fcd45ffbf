//! `--api realtime`'s session flags' probes.

use super::Expect::At;
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
