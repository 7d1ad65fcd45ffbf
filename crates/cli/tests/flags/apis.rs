//! `--api realtime`'s session flags' probes, the audio APIs', image generation's, and AWS SigV4
//! signing's.

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
    .into_iter()
    .chain(audio_probes())
    .chain(image_generation_probes())
    .collect()
}

/// `--api images`' size and steps against a plain `--api images` run: each changes the bodies.
fn image_generation_probes() -> Vec<Probe> {
    let images = ["--api", "images"];
    let with_steps = ["--api", "images", "--image-steps", "4"];
    vec![
        probe(
            "--image-size",
            &[&images[..], &["--image-size", "64x64"]].concat(),
            At("/wire"),
        )
        .against(&images),
        probe("--image-steps", &with_steps, At("/wire")).against(&images),
        probe(
            "--image-steps-key",
            &[&with_steps[..], &["--image-steps-key", "steps"]].concat(),
            At("/wire"),
        )
        .against(&with_steps),
    ]
}

/// The audio APIs' flags against plain `--api transcriptions` and `--api speech` runs
/// (`run.workload.audio` records them; `--audio-dir`'s file changes what is sent).
fn audio_probes() -> Vec<Probe> {
    let transcriptions = ["--api", "transcriptions"];
    let speech = ["--api", "speech"];
    vec![
        probe(
            "--audio-dir",
            &[&transcriptions[..], &["--audio-dir", "{audio}"]].concat(),
            At("/run_json"),
        )
        .against(&transcriptions),
        probe(
            "--language",
            &[&transcriptions[..], &["--language", "en"]].concat(),
            At("/run_json"),
        )
        .against(&transcriptions),
        probe(
            "--voice",
            &[&speech[..], &["--voice", "echo"]].concat(),
            At("/run_json"),
        )
        .against(&speech),
        probe(
            "--speech-format",
            &[&speech[..], &["--speech-format", "pcm"]].concat(),
            At("/run_json"),
        )
        .against(&speech),
        probe(
            "--speech-stream",
            &[&speech[..], &["--speech-stream", "sse"]].concat(),
            At("/run_json"),
        )
        .against(&speech),
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
