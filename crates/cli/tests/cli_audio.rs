//! `--api transcriptions` and `--api speech` through the binary: against a transcription
//! server written here that answers after 0.5 s per second of the audio it received (read from
//! the WAV header in the form: the real-time factor is 0.5 plus only the client's overhead),
//! against the embedded simulator live and in virtual time (the report's `audio` section, the
//! schema), `--audio-dir`'s files (their durations in the records, summary.md's audio row; a
//! malformed or truncated file stops the run with exit 2 before anything is sent),
//! `--audio-seconds` drawn from a distribution per request, and the refused flags.
#![allow(clippy::unwrap_used)]

mod support;

use std::io::{BufReader, Write};
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use support::{goodput, validate_against_schema};

/// Seconds of the WAV file in a multipart body: its `data` length over its byte rate.
fn wav_seconds_in(body: &[u8]) -> f64 {
    let riff = body.windows(4).position(|w| w == b"RIFF").unwrap();
    let wav = &body[riff..];
    let byte_rate = u32::from_le_bytes(wav[28..32].try_into().unwrap());
    let data = wav.windows(4).position(|w| w == b"data").unwrap();
    let length = u32::from_le_bytes(wav[data + 4..data + 8].try_into().unwrap());
    f64::from(length) / f64::from(byte_rate)
}

fn half_real_time_server() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut writer = stream;
                while let Some((path, body)) = support::read_request(&mut reader) {
                    let answer = if path.ends_with("/audio/transcriptions") {
                        let seconds = wav_seconds_in(&body);
                        std::thread::sleep(Duration::from_secs_f64(0.5 * seconds));
                        json!({"text": "hello there"}).to_string()
                    } else {
                        json!({"object": "list", "data": [{"id": "whisper", "object": "model"}]})
                            .to_string()
                    };
                    let response = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{answer}",
                        answer.len()
                    );
                    if writer.write_all(response.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    format!("http://{address}/v1")
}

fn run(args: &str) -> (std::process::Output, Value) {
    let output = goodput().args(args.split_whitespace()).output().unwrap();
    let report = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
    (output, report)
}

#[test]
fn a_half_real_time_server_reports_a_real_time_factor_of_a_half() {
    let url = half_real_time_server();
    let (output, report) = run(&format!(
        "run --json --warmup 0 --concurrency 1 --requests 4 --api transcriptions --no-stream \
         --target {url} --audio-seconds 0.4 --slo e2e=10s"
    ));
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    validate_against_schema(&report);
    assert_eq!(report["run"]["api"], "transcriptions");
    let audio = &report["steps"][0]["audio"];
    assert_eq!(audio["requests"], 4, "{audio}");
    assert!((audio["input_seconds_total"].as_f64().unwrap() - 1.6).abs() < 1e-9);
    // 0.2 s per 0.4 s of audio, plus the client's overhead (generous for a loaded host).
    let rtf = &audio["real_time_factor"];
    let (p50, max) = (rtf["p50"].as_f64().unwrap(), rtf["max"].as_f64().unwrap());
    assert!((0.5..3.0).contains(&p50) && max < 10.0, "{rtf}");
}

#[test]
fn the_simulator_serves_both_live_and_in_virtual_time() {
    for api in ["transcriptions", "speech"] {
        for virtual_time in ["", "--virtual-time"] {
            let audio = if api == "speech" {
                ""
            } else {
                "--audio-seconds 1"
            };
            let (output, report) = run(&format!(
                "run --json --warmup 0 --requests 6 --rate 20 --api {api} --input-tokens 16 \
                 {audio} {virtual_time}"
            ));
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert!(output.status.success(), "{api} {virtual_time}: {stderr}");
            validate_against_schema(&report);
            let step = &report["steps"][0];
            assert_eq!(
                step["requests"]["completed"], 6,
                "{api} {virtual_time}: {step}"
            );
            let audio = &step["audio"];
            let key = if api == "speech" {
                "output_seconds_total"
            } else {
                "input_seconds_total"
            };
            assert!(
                audio[key].as_f64().unwrap() > 0.0,
                "{api} {virtual_time}: {audio}"
            );
            let rtf = audio["real_time_factor"]["p50"].as_f64().unwrap();
            assert!(rtf > 0.0 && rtf < 1.0, "{api} {virtual_time}: {audio}");
            assert!(
                step["latency_ms"]["ttft"]["p50"].as_f64().is_some(),
                "{step}"
            );
        }
    }
}

fn wav(rate: u32, data: usize) -> Vec<u8> {
    let mut out = b"RIFF".to_vec();
    out.extend_from_slice(&(data as u32 + 36).to_le_bytes());
    out.extend_from_slice(b"WAVEfmt \x10\0\0\0\x01\0\x01\0");
    out.extend_from_slice(&rate.to_le_bytes());
    out.extend_from_slice(&(rate * 2).to_le_bytes());
    out.extend_from_slice(b"\x02\0\x10\0data");
    out.extend_from_slice(&(data as u32).to_le_bytes());
    out.resize(out.len() + data, 0);
    out
}

#[test]
fn audio_dir_files_are_sent_in_name_order_with_their_durations() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.wav"), wav(16_000, 32_000)).unwrap();
    std::fs::write(dir.path().join("b.wav"), wav(8_000, 40_000)).unwrap();
    std::fs::write(dir.path().join("notes.txt"), "not audio, not read").unwrap();
    let out = dir.path().join("out");
    let (output, _) = run(&format!(
        "run --json --warmup 0 --concurrency 1 --requests 4 --virtual-time --api transcriptions \
         --audio-dir {} --out {}",
        dir.path().display(),
        out.display()
    ));
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let journal = std::fs::read_to_string(out.join("requests.jsonl")).unwrap();
    let seconds: Vec<f64> = journal
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .map(|record| record["audio"]["input_seconds"].as_f64().unwrap())
        .collect();
    assert_eq!(seconds, [1.0, 2.5, 1.0, 2.5]);
    let csv = std::fs::read_to_string(out.join("requests.csv")).unwrap();
    assert!(
        csv.lines()
            .next()
            .unwrap()
            .contains(",audio_input_seconds,audio_output_seconds,real_time_factor,")
    );
    // summary.md: the audio row of the step, its figures the report's.
    let summary = std::fs::read_to_string(out.join("summary.md")).unwrap();
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    let audio = &report["steps"][0]["audio"];
    let rtf = &audio["real_time_factor"];
    let row = format!(
        "| 0 | 4 | 7.00 | 0.00 | {:.3} | 0.000 | {:.3} | {:.3} |",
        audio["input_seconds_per_sec"].as_f64().unwrap(),
        rtf["mean"].as_f64().unwrap(),
        rtf["p50"].as_f64().unwrap()
    );
    assert!(summary.contains("Audio (real-time factor"), "{summary}");
    assert!(summary.contains(&row), "{row} not in\n{summary}");
}

fn refused(args: &str) -> String {
    let output = goodput().args(args.split_whitespace()).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(2), "{args}: {stderr}");
    stderr
}

fn dir_with(name: &str, bytes: &[u8]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(name), bytes).unwrap();
    dir
}

fn audio_dir_run(dir: &Path) -> String {
    refused(&format!(
        "run --virtual-time --requests 1 --api transcriptions --audio-dir {}",
        dir.display()
    ))
}

#[test]
fn malformed_audio_and_misplaced_flags_are_refused_before_the_run() {
    let garbage = dir_with("bad.wav", b"this is not a RIFF file at all");
    let stderr = audio_dir_run(garbage.path());
    assert!(
        stderr.contains("bad.wav") && stderr.contains("not a WAV file"),
        "{stderr}"
    );
    let mut cut = wav(16_000, 32_000);
    cut.truncate(1_000);
    let truncated = dir_with("cut.wav", &cut);
    let stderr = audio_dir_run(truncated.path());
    assert!(stderr.contains("truncated WAV"), "{stderr}");
    let empty = tempfile::tempdir().unwrap();
    assert!(audio_dir_run(empty.path()).contains("no .wav files"));
    let stderr = refused("run --virtual-time --requests 1 --api speech --speech-format mp3");
    assert!(
        stderr.contains("cannot read the duration of compressed audio"),
        "{stderr}"
    );
    let stderr = refused("run --virtual-time --requests 1 --voice alloy");
    assert!(
        stderr.contains("--voice, --speech-format and --speech-stream go with --api speech"),
        "{stderr}"
    );
    let stderr = refused("run --virtual-time --requests 1 --api chat --audio-seconds 2");
    assert!(stderr.contains("--audio-seconds goes with"), "{stderr}");
}

/// Each record's `audio.input_seconds` by request index, from a run's journal.
fn journal_seconds(out: &Path) -> Vec<(u64, f64)> {
    let journal = std::fs::read_to_string(out.join("requests.jsonl")).unwrap();
    let mut seconds: Vec<(u64, f64)> = journal
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .map(|r| {
            let index = r["index"].as_u64().unwrap();
            (index, r["audio"]["input_seconds"].as_f64().unwrap())
        })
        .collect();
    seconds.sort_by_key(|(index, _)| *index);
    seconds
}

#[test]
fn audio_seconds_drawn_from_a_distribution_per_request() {
    // Against the half-real-time server: every request's e2e is at least half its own draw.
    let url = half_real_time_server();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("live");
    let (output, report) = run(&format!(
        "run --json --warmup 0 --concurrency 4 --requests 4 --api transcriptions --no-stream \
         --target {url} --audio-seconds normal:mean=0.6,sd=0.3,max=1 --seed 9 --slo e2e=10s \
         --out {}",
        out.display()
    ));
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    validate_against_schema(&report);
    let workload = &report["run"]["workload"]["audio"]["audio_seconds"];
    assert_eq!(workload, "normal:mean=0.6,sd=0.3,max=1", "{workload}");
    let seconds = journal_seconds(&out);
    assert_eq!(seconds.len(), 4);
    assert!(
        seconds.iter().all(|(_, s)| (0.1..=1.0).contains(s)),
        "{seconds:?}"
    );
    assert!(
        seconds.iter().any(|(_, s)| *s != seconds[0].1),
        "{seconds:?}"
    );
    let total: f64 = seconds.iter().map(|(_, s)| s).sum();
    let audio = &report["steps"][0]["audio"];
    assert!((audio["input_seconds_total"].as_f64().unwrap() - total).abs() < 1e-9);
    let rtf = audio["real_time_factor"]["min"].as_f64().unwrap_or(0.5);
    assert!(rtf >= 0.5 - 1e-9, "{audio}");
    // The same seed draws the same lengths in virtual time, request by request, for
    // transcriptions and realtime sessions alike; another seed draws others.
    for api in ["transcriptions", "realtime"] {
        let draws = |seed: u64, name: &str| {
            let out = dir.path().join(format!("{api}-{name}"));
            let (output, _) = run(&format!(
                "run --json --warmup 0 --concurrency 2 --requests 6 --virtual-time --api {api} \
                 --audio-seconds normal:mean=0.6,sd=0.3,max=1 --seed {seed} --out {}",
                out.display()
            ));
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert!(output.status.success(), "{api}: {stderr}");
            journal_seconds(&out)
        };
        let live_draws: Vec<f64> = seconds.iter().map(|(_, s)| *s).collect();
        let first = draws(9, "a");
        assert_eq!(first.len(), 6, "{api}");
        let first_four: Vec<f64> = first.iter().take(4).map(|(_, s)| *s).collect();
        assert_eq!(first_four, live_draws, "{api}: the draws are the seed's");
        assert_eq!(draws(9, "b"), first, "{api}");
        assert_ne!(draws(10, "c"), first, "{api}");
    }
}

#[test]
fn bad_audio_seconds_are_refused() {
    for (value, words) in [
        ("0", "(0, 3600]"),
        ("uniform:0..3", "at least 1"),
        ("gauss:2", "unknown distribution"),
        ("uniform:1..5000", "longer than 3600"),
    ] {
        let stderr = refused(&format!(
            "run --virtual-time --requests 1 --api transcriptions --audio-seconds {value}"
        ));
        assert!(
            stderr.contains("--audio-seconds") && stderr.contains(words),
            "{value}: {stderr}"
        );
    }
}

#[test]
fn speech_streamed_as_sse_events_against_the_simulator() {
    // The simulator's speech as SSE deltas: the same audio as the raw stream, one delta per
    // decoded codec token.
    let mut totals = Vec::new();
    for stream in ["audio", "sse"] {
        let (output, report) = run(&format!(
            "run --json --warmup 0 --concurrency 1 --requests 3 --api speech --input-tokens 10 \
             --speech-format pcm --speech-stream {stream} --virtual-time"
        ));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{stream}: {stderr}");
        validate_against_schema(&report);
        let step = &report["steps"][0];
        assert_eq!(step["requests"]["completed"], 3, "{stream}: {step}");
        assert_eq!(
            report["run"]["workload"]["audio"]["stream_format"], stream,
            "{report}"
        );
        assert!(step["latency_ms"]["itl"]["p50"].as_f64().unwrap() > 0.0);
        totals.push(step["audio"]["output_seconds_total"].as_f64().unwrap());
    }
    assert!(
        totals[0] > 0.0 && (totals[0] - totals[1]).abs() < 1e-9,
        "{totals:?}"
    );
    let stderr =
        refused("run --virtual-time --requests 1 --api speech --speech-stream sse --no-stream");
    assert!(
        stderr.contains("--speech-stream sse streams the answer"),
        "{stderr}"
    );
}
