//! The audio APIs (`--api transcriptions`, `--api speech`) end to end through the runner in
//! paused time, against hand-written servers whose every byte and delay the test chooses (the
//! independent reference): a transcription server that answers after exactly 0.5 s per second
//! of the audio it received (read from the WAV header in the multipart body — real-time factor
//! 0.5 exactly), streamed deltas at known times, a speech server that sends PCM chunks of
//! known length at known gaps, clip lengths drawn per request (`--audio-seconds` as a
//! distribution), and the bad answers: unknown event types, error events,
//! truncated WAV, streams cut mid-body.
#![allow(clippy::unwrap_used)]

#[path = "support/wire_server.rs"]
mod wire_server;

mod support;

use std::sync::Arc;
use std::time::Duration;

use goodput_core::backend::audio::{
    AudioApi, AudioBackend, AudioConfig, Clip, DrawnTones, SpeechFormat, SpeechStream,
};
use goodput_core::config::{LoadSpec, RunConfig, Warmup};
use goodput_core::metrics::StepAggregator;
use goodput_core::record::OutcomeKind;
use goodput_core::report::LoadReport;
use goodput_core::runner::Runner;
use goodput_core::tokens::Tiktoken;
use goodput_core::workload::SyntheticWorkload;
use goodput_core::workload::audio_lengths::AudioLengths;
use serde_json::{Value, json};
use support::{Collect, RunResult};
use tokio_util::sync::CancellationToken;
use wire_server::{Captured, LAST_CHUNK, State, Step, chunk, response, sse_head};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// The seconds of the WAV file in a multipart body, read independently: the `data` chunk's
/// declared length over the `fmt ` chunk's byte rate.
fn wav_seconds_in(body: &[u8]) -> f64 {
    let riff = body.windows(4).position(|w| w == b"RIFF").unwrap();
    let wav = &body[riff..];
    let byte_rate = u32::from_le_bytes(wav[28..32].try_into().unwrap());
    let data = wav.windows(4).position(|w| w == b"data").unwrap();
    let length = u32::from_le_bytes(wav[data + 4..data + 8].try_into().unwrap());
    f64::from(length) / f64::from(byte_rate)
}

fn config(api: AudioApi, stream: bool, format: SpeechFormat) -> AudioConfig {
    AudioConfig {
        api,
        model: "m".into(),
        stream,
        clips: vec![
            Clip::tone(16_000, Duration::from_secs(1)),
            Clip::tone(16_000, Duration::from_secs(3)),
        ],
        drawn: None,
        language: Some("en".into()),
        voice: "alloy".into(),
        format,
        speech_stream: SpeechStream::Audio,
        pcm_rate: 24_000,
        headers: Vec::new(),
        api_key: None,
        max_line_bytes: 1 << 20,
        max_body_bytes: 1 << 22,
        extra_body: serde_json::Map::new(),
    }
}

/// Runs `requests` requests one at a time against `state`'s server.
async fn run(state: State, config: AudioConfig, requests: u64) -> RunResult {
    let client = wire_server::in_memory_client(state, "http://script.test/v1");
    let streamed = config.stream;
    let backend = Arc::new(AudioBackend::new(config, client).unwrap());
    let run_config = RunConfig {
        load: LoadSpec::Closed { concurrency: 1 },
        max_requests: Some(requests),
        warmup: Warmup::None,
        ..RunConfig::default()
    };
    let workload = Arc::new(SyntheticWorkload {
        input_tokens: 8,
        output_tokens: Some(6),
        seed: 1,
    });
    let counter = Arc::new(Tiktoken::cl100k());
    let runner = Runner::new(run_config.clone(), backend, workload, counter, streamed);
    let mut collect = Collect::default();
    let mut aggregator = StepAggregator::new(None, run_config.window);
    let outcome = runner
        .run(
            &mut [&mut collect, &mut aggregator],
            CancellationToken::new(),
        )
        .await;
    RunResult {
        records: collect.0,
        step: aggregator.report(LoadReport::from(&run_config.load)),
        compliance: aggregator.compliance(),
        outcome,
    }
}

fn json_answer(value: &Value) -> Step {
    let text = value.to_string();
    Step::Write(response(
        "200 OK",
        "content-type: application/json\r\n",
        &text,
    ))
}

fn event(value: Value) -> Step {
    Step::Write(chunk(format!("data: {value}\n\n").as_bytes()))
}

/// 0.5 s per second of audio received, then the whole transcript.
fn half_real_time(_: usize, request: &Captured) -> Vec<Step> {
    let seconds = wav_seconds_in(&request.body);
    vec![
        Step::Sleep(Duration::from_secs_f64(0.5 * seconds)),
        json_answer(&json!({"text": "hello there"})),
    ]
}

#[tokio::test(start_paused = true)]
async fn a_transcription_server_at_half_real_time_gives_a_real_time_factor_of_exactly_half() {
    let state = State::new(half_real_time);
    let captured = state.clone();
    let config = config(AudioApi::Transcriptions, false, SpeechFormat::Wav);
    let result = run(state, config, 4).await;
    let mut audio = Vec::new();
    for record in &result.records {
        assert_eq!(record.failure, None, "{record:?}");
        let seconds = record.audio.unwrap().input_seconds.unwrap();
        audio.push(seconds);
        assert_eq!(
            record.e2e_from_send(),
            Some(Duration::from_secs_f64(seconds / 2.0))
        );
        assert_eq!(record.requested_output_tokens, None);
        assert_eq!(record.input_tokens, None, "audio has no prompt tokens");
    }
    assert_eq!(audio, [1.0, 3.0, 1.0, 3.0]);
    let step = result.step.audio.unwrap();
    assert_eq!(step.requests, 4);
    assert_eq!(step.input_seconds_total, 8.0);
    let rtf = &step.real_time_factor;
    assert_eq!(
        (rtf.p50, rtf.p99, rtf.max, rtf.count),
        (Some(0.5), Some(0.5), Some(0.5), 4)
    );
    let per_sec = result.step.throughput.requests_per_sec * 2.0;
    assert!(
        (step.input_seconds_per_sec - per_sec).abs() < 1e-9,
        "{step:?}"
    );
    let request = &captured.requests()[0];
    assert!(
        request
            .head
            .starts_with("POST /v1/audio/transcriptions HTTP/1.1")
    );
    let kind = request.header("content-type").unwrap();
    assert!(kind.starts_with("multipart/form-data; boundary="), "{kind}");
    let body = String::from_utf8_lossy(&request.body);
    for part in [
        "name=\"model\"\r\n\r\nm\r\n",
        "name=\"stream\"\r\n\r\nfalse",
        "name=\"language\"\r\n\r\nen",
    ] {
        assert!(body.contains(part), "{part} not in the form");
    }
}

/// `--audio-seconds uniform:1..10`: each request's clip is a tone of its own drawn length
/// (deterministic per seed and index), the server — reading the WAV length from the form —
/// answers after half of it: each record's audio seconds are its draw, its e2e half of them,
/// its real-time factor exactly 0.5.
#[tokio::test(start_paused = true)]
async fn drawn_audio_lengths_are_sent_and_recorded_per_request() {
    let lengths = Arc::new(AudioLengths::parse("uniform:1..10", 7).unwrap());
    let state = State::new(half_real_time);
    let captured = state.clone();
    let mut config = config(AudioApi::Transcriptions, false, SpeechFormat::Wav);
    let draw = Arc::clone(&lengths);
    config.drawn = Some(DrawnTones {
        rate: 16_000,
        length: Arc::new(move |index| draw.draw(index)),
    });
    let result = run(state, config, 8).await;
    assert_eq!(result.records.len(), 8);
    let mut seen = Vec::new();
    for record in &result.records {
        assert_eq!(record.failure, None, "{record:?}");
        let drawn = lengths.draw(record.index).as_secs_f64();
        let seconds = record.audio.unwrap().input_seconds.unwrap();
        assert!((seconds - drawn).abs() < 1e-9, "request {}", record.index);
        // Half the draw, to the paused clock's timer resolution (1 ms: a sleep of 4.2085 s
        // wakes at 4.209 s).
        let e2e = record.e2e_from_send().unwrap().as_secs_f64();
        assert!(
            (0.0..=0.001).contains(&(e2e - drawn / 2.0)),
            "{e2e} for {drawn} s"
        );
        seen.push(seconds);
    }
    seen.sort_by(f64::total_cmp);
    seen.dedup();
    assert!(seen.len() > 1, "one length for every request: {seen:?}");
    // What the server read from each form is the draw of that request.
    let mut sent: Vec<u128> = captured
        .requests()
        .iter()
        .map(|r| (wav_seconds_in(&r.body) * 1000.0).round() as u128)
        .collect();
    sent.sort_unstable();
    let mut expected: Vec<u128> = (0..8).map(|i| lengths.draw(i).as_millis()).collect();
    expected.sort_unstable();
    assert_eq!(sent, expected);
    let rtf = &result.step.audio.unwrap().real_time_factor;
    assert_eq!(rtf.count, 8);
    // Draws are at least 1 s: the timer's 1 ms moves the factor by at most 0.001.
    for value in [rtf.p50, rtf.max, rtf.mean] {
        assert!((value.unwrap() - 0.5).abs() <= 0.001, "{rtf:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn streamed_transcript_deltas_are_timed_like_tokens() {
    // First delta 200 ms after the request, then 100 ms apart; usage says 3 output tokens.
    let state = State::new(|_, _| {
        vec![
            Step::Write(sse_head("")),
            Step::Sleep(ms(200)),
            event(json!({"type": "transcript.text.delta", "delta": "one"})),
            Step::Sleep(ms(100)),
            event(json!({"type": "transcript.text.delta", "delta": " two"})),
            Step::Sleep(ms(100)),
            event(json!({"type": "transcript.text.delta", "delta": " three"})),
            event(
                json!({"type": "transcript.text.done", "text": "one two three",
                "usage": {"type": "tokens", "input_tokens": 25, "output_tokens": 3}}),
            ),
            Step::Write(chunk(b"data: [DONE]\n\n")),
            Step::Write(LAST_CHUNK.to_vec()),
        ]
    });
    let result = run(
        state,
        config(AudioApi::Transcriptions, true, SpeechFormat::Wav),
        2,
    )
    .await;
    let (first, second) = (&result.records[0], &result.records[1]);
    for record in [first, second] {
        assert_eq!(record.failure, None, "{record:?}");
        assert_eq!(record.ttft_from_send(), Some(ms(200)));
        assert_eq!(record.e2e_from_send(), Some(ms(400)));
        assert_eq!(record.tpot(), Some(ms(100)));
        assert_eq!((record.output_tokens, record.input_tokens), (3, Some(25)));
    }
    let rtf = result.step.audio.unwrap().real_time_factor;
    // 0.4 s for 1 s of audio, then for 3 s.
    assert_eq!((rtf.max, rtf.count), (Some(0.4), 2));
    assert!(
        (rtf.mean.unwrap() - (0.4 + 0.4 / 3.0) / 2.0).abs() < 1e-12,
        "{rtf:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn unknown_events_and_error_events_are_failures_with_the_servers_words() {
    let state = State::new(|n, _| {
        let bad = if n == 0 {
            json!({"type": "transcript.segment.mystery"})
        } else {
            json!({"type": "error", "error": {"message": "the GPU caught fire"}})
        };
        vec![
            Step::Write(sse_head("")),
            event(json!({"type": "transcript.text.delta", "delta": "a"})),
            event(bad),
            Step::Write(LAST_CHUNK.to_vec()),
        ]
    });
    let result = run(
        state,
        config(AudioApi::Transcriptions, true, SpeechFormat::Wav),
        2,
    )
    .await;
    assert_eq!(result.records.len(), 2, "every request journaled");
    let unknown = result.records[0].failure.clone().unwrap();
    assert_eq!(unknown.kind, OutcomeKind::Protocol);
    assert!(
        unknown.message.contains("transcript.segment.mystery"),
        "{unknown:?}"
    );
    let error = result.records[1].failure.clone().unwrap();
    assert_eq!(error.kind, OutcomeKind::StreamError);
    assert!(error.message.contains("the GPU caught fire"), "{error:?}");
    for record in &result.records {
        assert!(
            record.audio.unwrap().input_seconds.is_some(),
            "the audio sent is kept"
        );
    }
}

/// A chunked audio answer: the head, then `chunks` pieces of `bytes` each, the first after
/// `first` and the rest `gap` apart.
fn audio_steps(
    kind: &str,
    header: Vec<u8>,
    chunks: usize,
    bytes: usize,
    (first, gap): (u64, u64),
) -> Vec<Step> {
    let head =
        format!("HTTP/1.1 200 OK\r\ncontent-type: {kind}\r\ntransfer-encoding: chunked\r\n\r\n");
    let mut steps = vec![Step::Write(head.into_bytes()), Step::Sleep(ms(first))];
    for i in 0..chunks {
        if i > 0 {
            steps.push(Step::Sleep(ms(gap)));
        }
        let mut piece = if i == 0 { header.clone() } else { Vec::new() };
        piece.resize(piece.len() + bytes, 0);
        steps.push(Step::Write(chunk(&piece)));
    }
    steps.push(Step::Write(LAST_CHUNK.to_vec()));
    steps
}

#[tokio::test(start_paused = true)]
async fn streamed_speech_is_timed_by_its_chunks_and_measured_by_its_samples() {
    // 4 chunks of 0.2 s of 24 kHz PCM (9 600 bytes), the first after 100 ms, then 50 ms apart:
    // time to first audio byte 100 ms, 0.8 s of audio in 250 ms, real-time factor 0.3125.
    let state = State::new(|_, _| audio_steps("audio/pcm", Vec::new(), 4, 9_600, (100, 50)));
    let captured = state.clone();
    let result = run(state, config(AudioApi::Speech, true, SpeechFormat::Pcm), 2).await;
    for record in &result.records {
        assert_eq!(record.failure, None, "{record:?}");
        assert_eq!(record.ttft_from_send(), Some(ms(100)));
        assert_eq!(record.e2e_from_send(), Some(ms(250)));
        assert_eq!(record.output_tokens, 4, "one per chunk");
        assert_eq!(record.tpot(), Some(ms(50)));
        assert_eq!(record.audio.unwrap().output_seconds, Some(0.8));
    }
    let audio = result.step.audio.unwrap();
    assert_eq!(audio.output_seconds_total, 1.6);
    assert_eq!(audio.real_time_factor.max, Some(0.3125));
    let body = captured.requests()[0].json();
    assert_eq!(body["voice"], "alloy");
    assert_eq!(body["response_format"], "pcm");
    assert_eq!(body["stream_format"], "audio");
    assert!(
        body["input"].as_str().is_some_and(|s| !s.is_empty()),
        "{body}"
    );
}

/// Standard base64 of `n` zero bytes (`n` a multiple of 3), written here independently.
fn zeros_base64(n: usize) -> String {
    assert_eq!(n % 3, 0);
    "A".repeat(n / 3 * 4)
}

#[tokio::test(start_paused = true)]
async fn speech_streamed_as_sse_events_is_timed_by_its_deltas() {
    // `stream_format: sse`: 3 `speech.audio.delta` events of 0.1 s of 24 kHz PCM (4 800 bytes,
    // base64), the first after 100 ms, then 50 ms apart, then `speech.audio.done` with the
    // usage: TTFT 100 ms, ITL 50 ms, 0.3 s of audio, 3 chunks.
    let state = State::new(|_, _| {
        let delta = json!({"type": "speech.audio.delta", "audio": zeros_base64(4_800)});
        let done = json!({"type": "speech.audio.done",
            "usage": {"input_tokens": 5, "output_tokens": 30, "total_tokens": 35}});
        let mut steps = vec![Step::Write(sse_head("")), Step::Sleep(ms(100))];
        for i in 0..3 {
            if i > 0 {
                steps.push(Step::Sleep(ms(50)));
            }
            steps.push(event(delta.clone()));
        }
        steps.push(event(done));
        steps.push(Step::Write(LAST_CHUNK.to_vec()));
        steps
    });
    let captured = state.clone();
    let mut sse = config(AudioApi::Speech, true, SpeechFormat::Pcm);
    sse.speech_stream = SpeechStream::Sse;
    let result = run(state, sse, 2).await;
    for record in &result.records {
        assert_eq!(record.failure, None, "{record:?}");
        assert_eq!(record.ttft_from_send(), Some(ms(100)));
        assert_eq!(record.e2e_from_send(), Some(ms(200)));
        // One output "token" per delta (the done event's codec-token usage is not used).
        assert_eq!(record.output_tokens, 3);
        assert_eq!(record.tpot(), Some(ms(50)));
        let seconds = record.audio.unwrap().output_seconds.unwrap();
        assert!((seconds - 0.3).abs() < 1e-9, "{seconds}");
    }
    let body = captured.requests()[0].json();
    assert_eq!(body["stream_format"], "sse");
    // An unknown event type and an error event are failures with the server's words.
    let state = State::new(|index, _| {
        let bad = match index {
            0 => json!({"type": "speech.audio.surprise"}),
            _ => json!({"type": "error", "error": {"message": "voice not found"}}),
        };
        vec![
            Step::Write(sse_head("")),
            event(bad),
            Step::Write(LAST_CHUNK.to_vec()),
        ]
    });
    let mut sse = config(AudioApi::Speech, true, SpeechFormat::Pcm);
    sse.speech_stream = SpeechStream::Sse;
    let result = run(state, sse, 2).await;
    let failures: Vec<_> = result
        .records
        .iter()
        .map(|r| r.failure.clone().unwrap())
        .collect();
    assert_eq!(failures[0].kind, OutcomeKind::Protocol, "{failures:?}");
    assert!(failures[0].message.contains("speech.audio.surprise"));
    assert_eq!(failures[1].kind, OutcomeKind::StreamError, "{failures:?}");
    assert!(failures[1].message.contains("voice not found"));
}

fn wav_header(rate: u32, data: u32) -> Vec<u8> {
    let mut out = b"RIFF".to_vec();
    out.extend_from_slice(&(data + 36).to_le_bytes());
    out.extend_from_slice(b"WAVEfmt \x10\0\0\0\x01\0\x01\0");
    out.extend_from_slice(&rate.to_le_bytes());
    out.extend_from_slice(&(rate * 2).to_le_bytes());
    out.extend_from_slice(b"\x02\0\x10\0data");
    out.extend_from_slice(&data.to_le_bytes());
    out
}

#[tokio::test(start_paused = true)]
async fn a_wav_answer_is_measured_by_its_header_and_a_truncated_one_is_a_protocol_failure() {
    // Request 0: a whole 0.5 s WAV at 16 kHz after 300 ms (RTF 0.6). Request 1: a header
    // promising 1 s, 1 000 bytes sent.
    let state = State::new(|n, _| {
        let mut header = wav_header(16_000, if n == 0 { 16_000 } else { 32_000 });
        let sent = if n == 0 { 16_000 } else { 1_000 };
        header.resize(header.len() + sent, 0);
        vec![
            Step::Sleep(ms(300)),
            Step::Write(
                format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: audio/wav\r\ncontent-length: {}\r\n\r\n",
                    header.len()
                )
                .into_bytes(),
            ),
            Step::Write(header),
        ]
    });
    let result = run(state, config(AudioApi::Speech, false, SpeechFormat::Wav), 2).await;
    let whole = &result.records[0];
    assert_eq!(whole.failure, None, "{whole:?}");
    assert_eq!(whole.audio.unwrap().output_seconds, Some(0.5));
    assert_eq!(whole.e2e_from_send(), Some(ms(300)));
    assert_eq!(result.step.audio.unwrap().real_time_factor.max, Some(0.6));
    let cut = result.records[1].failure.clone().unwrap();
    assert_eq!(cut.kind, OutcomeKind::Protocol);
    assert!(cut.message.contains("truncated WAV"), "{cut:?}");
}

#[tokio::test(start_paused = true)]
async fn streams_cut_mid_body_say_how_far_they_got_and_an_empty_transcript_stream_fails() {
    // A transcript cut after two deltas, one that ends (cleanly) before any event.
    let state = State::new(|n, _| {
        let mut steps = vec![Step::Write(sse_head(""))];
        if n == 0 {
            steps.push(event(
                json!({"type": "transcript.text.delta", "delta": "a"}),
            ));
            steps.push(event(
                json!({"type": "transcript.text.delta", "delta": "b"}),
            ));
            steps.push(Step::Reset);
        } else {
            steps.push(Step::Write(LAST_CHUNK.to_vec()));
        }
        steps
    });
    let config = config(AudioApi::Transcriptions, true, SpeechFormat::Wav);
    let result = run(state, config.clone(), 2).await;
    assert_eq!(result.records.len(), 2, "every request journaled");
    let cut = result.records[0].failure.clone().unwrap();
    assert!(
        cut.message.contains("mid-transcript after 2 deltas"),
        "{cut:?}"
    );
    let empty = result.records[1].failure.clone().unwrap();
    assert_eq!(empty.kind, OutcomeKind::Protocol);
    assert!(
        empty.message.contains("ended without an event"),
        "{empty:?}"
    );
    // Speech as events, cut after one delta of 4 800 bytes.
    let state = State::new(|_, _| {
        let delta = json!({"type": "speech.audio.delta", "audio": zeros_base64(4_800)});
        vec![Step::Write(sse_head("")), event(delta), Step::Reset]
    });
    let mut sse = config;
    sse.api = AudioApi::Speech;
    sse.format = SpeechFormat::Pcm;
    sse.speech_stream = SpeechStream::Sse;
    let result = run(state, sse, 1).await;
    let cut = result.records[0].failure.clone().unwrap();
    assert!(cut.message.contains("after 4800 audio bytes"), "{cut:?}");
}
