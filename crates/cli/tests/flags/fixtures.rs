//! Fixture files the probes name (`{dataset}`, `{trace}`, `{sim}`, `{gate}`…) and, for the
//! subcommands that read earlier runs, the runs themselves (`{ra}`, `{rb}`, `{runs_store}`,
//! `{rc}`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::support::{goodput, ok};

/// The `--api http` request template (a chat body the capture server answers).
const TEMPLATE: &str = r#"{"model": "m", "messages": [{"role": "user", "content": "{{prompt}}"}], "max_tokens": "{{max_tokens}}", "stream": false}"#;

/// The `--tensor-file` of `--api v2`: one request of two rows.
const TENSORS: &str =
    r#"{"inputs": [{"name": "x", "shape": [2, 2], "datatype": "INT64", "data": [1, 2, 3, 4]}]}"#;

/// A `goodput tune --grid-file` of one configuration (`sleep {{t}}` its server).
const TUNE_GRID: &str = "[[configuration]]\nname = \"thirty\"\nt = 30\n";

/// A gate no run passes.
const GATE: &str = "conditions = [\"ttft.p99 < 0ms\"]\n";

/// Fixture files the probes name, written once per test.
pub(crate) fn fixtures(dir: &Path) -> BTreeMap<&'static str, PathBuf> {
    let samples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../samples");
    let write = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).expect("write fixture");
        path
    };
    BTreeMap::from([
        ("dataset", samples.join("prompts.jsonl")),
        ("sharegpt", samples.join("sharegpt.json")),
        ("trace", samples.join("trace_goodput.csv")),
        ("mooncake", samples.join("trace_mooncake.jsonl")),
        (
            "profile",
            write(
                "profile.toml",
                "[[phases]]\nname = \"a\"\nrate = 20\nduration = \"300ms\"\n",
            ),
        ),
        (
            "sim",
            write(
                "sim.json",
                r#"{"engine": {"kind": "fixed", "ttft": 5, "itl": 1, "slots": 64}, "prompt_tokenizer": "words"}"#,
            ),
        ),
        (
            "batching",
            write(
                "batching.json",
                r#"{"engine": {"kind": "batching", "gpu": "a100-80g", "max_num_seqs": 8}, "prompt_tokenizer": "words"}"#,
            ),
        ),
        ("template", write("template.json", TEMPLATE)),
        ("images", image_dir(dir)),
        ("audio", audio_dir(dir)),
        ("tensors", write("tensors.jsonl", TENSORS)),
        ("gate", write("gate.toml", GATE)),
        ("tune_grid", write("tune-grid.toml", TUNE_GRID)),
        ("store", dir.join("history.db")),
        ("failing", write("failing.jsonl", &failing_prompts())),
        (
            "bad",
            write(
                "bad.jsonl",
                "{\"prompt\": \"one\"}\n{\"oops\": 1}\n{\"prompt\": \"three\"}\n",
            ),
        ),
    ])
}

/// Twelve prompts, the fourth of which the simulator's fault rules fail (`fail-me`).
fn failing_prompts() -> String {
    (0..12)
        .map(|i| {
            let word = if i == 3 { "fail-me" } else { "hello" };
            format!("{{\"prompt\": \"{word} {i}\", \"output_tokens\": 4}}\n")
        })
        .collect()
}

/// A directory holding one WAV file of 0.25 s of silence at 16 kHz (`--audio-dir`).
fn audio_dir(dir: &Path) -> PathBuf {
    let audio = dir.join("audio");
    std::fs::create_dir_all(&audio).expect("audio dir");
    let data: u32 = 8_000;
    let mut wav = b"RIFF".to_vec();
    wav.extend_from_slice(&(data + 36).to_le_bytes());
    wav.extend_from_slice(b"WAVEfmt \x10\0\0\0\x01\0\x01\0\x80\x3e\0\0\0\x7d\0\0\x02\0\x10\0data");
    wav.extend_from_slice(&data.to_le_bytes());
    wav.resize(wav.len() + data as usize, 0);
    std::fs::write(audio.join("a.wav"), wav).expect("write wav");
    audio
}

/// A directory holding one 32×16 PNG header (all `--image-dir` reads).
fn image_dir(dir: &Path) -> PathBuf {
    let images = dir.join("images");
    std::fs::create_dir_all(&images).expect("image dir");
    let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
    png.extend_from_slice(&[0, 0, 0, 32, 0, 0, 0, 16, 8, 2, 0, 0, 0]);
    std::fs::write(images.join("a.png"), png).expect("write png");
    images
}

/// Two small runs of the embedded simulator (`{ra}`, `{rb}`: a different seed, rate and
/// answer length) and a history store holding both (`{runs_store}`, `ra` tagged `team=a`).
pub(crate) fn add_runs(dir: &Path, fixtures: &mut BTreeMap<&'static str, PathBuf>) {
    let store = dir.join("runs.db");
    for (name, seed, rate, tokens, tag) in [
        ("ra", "3", "50", "4", "team=a"),
        ("rb", "4", "80", "8", "team=b"),
    ] {
        let out = dir.join(name);
        ok(goodput()
            .args([
                "run",
                "--quiet",
                "--no-live",
                "--seed",
                seed,
                "--requests",
                "20",
            ])
            .args([
                "--rate",
                rate,
                "--input-tokens",
                "32",
                "--output-tokens",
                tokens,
            ])
            .args(["--tag", tag, "--out"])
            .arg(&out)
            .arg("--store")
            .arg(&store)
            .output()
            .expect("goodput runs"));
        fixtures.insert(name, out);
    }
    fixtures.insert("runs_store", store);
    add_search(dir, fixtures);
    add_shards(dir, fixtures);
}

/// `{shard0}`, `{shard1}`: the two shards of one run, run side by side from a shared start.
fn add_shards(dir: &Path, fixtures: &mut BTreeMap<&'static str, PathBuf>) {
    let start = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
        .to_string();
    let children: Vec<(&'static str, PathBuf, std::process::Child)> =
        [("shard0", "0"), ("shard1", "1")]
            .into_iter()
            .map(|(name, index)| {
                let out = dir.join(name);
                let child = goodput()
                    .args([
                        "run",
                        "--quiet",
                        "--no-live",
                        "--seed",
                        "5",
                        "--requests",
                        "8",
                    ])
                    .args([
                        "--rate",
                        "40",
                        "--input-tokens",
                        "32",
                        "--output-tokens",
                        "4",
                    ])
                    .args([
                        "--shards",
                        "2",
                        "--shard-index",
                        index,
                        "--start-at",
                        &start,
                        "--out",
                    ])
                    .arg(&out)
                    .stdout(std::process::Stdio::null())
                    .spawn()
                    .expect("goodput runs");
                (name, out, child)
            })
            .collect();
    for (name, out, child) in children {
        ok(child.wait_with_output().expect("goodput runs"));
        fixtures.insert(name, out);
    }
}

/// `{rc}`: a capacity search in virtual time: deterministic, so `plan --capacity-from` can read it.
fn add_search(dir: &Path, fixtures: &mut BTreeMap<&'static str, PathBuf>) {
    let searched = dir.join("rc");
    ok(goodput()
        .args([
            "capacity",
            "--virtual-time",
            "--quiet",
            "--seed",
            "1",
            "--attainment",
            "0.5",
        ])
        .args([
            "--confidence",
            "0.5",
            "--input-tokens",
            "64",
            "--output-tokens",
            "16",
        ])
        .args(["--slo", "ttft=500ms", "--sim-config"])
        .arg(&fixtures["batching"])
        .arg("--out")
        .arg(&searched)
        .output()
        .expect("goodput runs"));
    fixtures.insert("rc", searched);
}
