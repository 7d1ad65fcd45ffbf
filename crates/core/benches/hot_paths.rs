//! Micro-benchmarks of the client's hot paths (divan): decoding server-sent events, parsing
//! stream chunks, the whole per-chunk work of reading a stream, histogram record and merge,
//! and folding a finished request into the aggregator. Run: `cargo bench -p goodput-core`
//! (or `bench/run.sh`, which records the machine's load beside the figures).
#![allow(missing_docs, clippy::unwrap_used)]

use std::hint::black_box;
use std::time::Duration;

use divan::Bencher;
use divan::counter::{BytesCount, ItemsCount};
use goodput_core::backend::sse::SseDecoder;
use goodput_core::metrics::{LatencyHistogram, StepAggregator};
use goodput_core::record::{Exchange, RequestRecord};
use goodput_protocol::stream::ChunkView;
use tokio::time::Instant;

/// Chunks per benchmarked stream.
const CHUNKS: usize = 256;
/// Bytes per read, as a TCP segment delivers them.
const FRAME: usize = 1460;

fn main() {
    divan::main();
}

/// One content chunk as vLLM sends it with continuous usage.
fn chunk_json(n: usize) -> String {
    format!(
        r#"{{"id":"chatcmpl-4f1e2d3c4b5a","object":"chat.completion.chunk","created":1767225600,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{{"index":0,"delta":{{"content":" word{n}"}},"logprobs":null,"finish_reason":null}}],"usage":{{"prompt_tokens":1024,"total_tokens":{},"completion_tokens":{n}}}}}"#,
        1024 + n
    )
}

/// A whole stream of [`CHUNKS`] chunks and `[DONE]`.
fn stream() -> Vec<u8> {
    let mut body = String::new();
    for n in 1..=CHUNKS {
        body.push_str("data: ");
        body.push_str(&chunk_json(n));
        body.push_str("\n\n");
    }
    body.push_str("data: [DONE]\n\n");
    body.into_bytes()
}

#[divan::bench]
fn sse_decode(bencher: Bencher) {
    let body = stream();
    bencher
        .counter(ItemsCount::new(CHUNKS))
        .counter(BytesCount::new(body.len()))
        .bench(|| {
            let mut decoder = SseDecoder::new(4 << 20);
            let mut events = Vec::new();
            for frame in body.chunks(FRAME) {
                decoder.feed(frame, &mut events).unwrap();
            }
            black_box(events.len())
        });
}

#[divan::bench]
fn chunk_parse(bencher: Bencher) {
    let json = chunk_json(17);
    bencher.counter(ItemsCount::new(1usize)).bench(|| {
        let chunk: ChunkView<'_> = serde_json::from_str(black_box(&json)).unwrap();
        black_box(chunk.usage.map(|u| u.completion_tokens))
    });
}

/// Everything the client does per received chunk, minus the socket: decode the events, parse
/// each chunk, record its output in the exchange.
#[divan::bench]
fn stream_read(bencher: Bencher) {
    let body = stream();
    bencher.counter(ItemsCount::new(CHUNKS)).bench(|| {
        let mut decoder = SseDecoder::new(4 << 20);
        let mut events = Vec::new();
        let mut exchange = Exchange::default();
        let now = Instant::now();
        for frame in body.chunks(FRAME) {
            decoder.feed(frame, &mut events).unwrap();
            for event in events.drain(..) {
                if event.data == "[DONE]" {
                    break;
                }
                let chunk: ChunkView<'_> = serde_json::from_str(&event.data).unwrap();
                let cumulative = chunk.usage.map(|u| u.completion_tokens);
                for choice in chunk.choices.iter().flatten() {
                    if let Some(text) = choice.generated_text() {
                        exchange.push_output(now, text, cumulative);
                    }
                }
            }
        }
        black_box(exchange.chunks.len())
    });
}

#[divan::bench]
fn histogram_record(bencher: Bencher) {
    let values: Vec<u64> = (0..10_000u64)
        .map(|i| 1_000 + (i * 7919) % 500_000)
        .collect();
    bencher.counter(ItemsCount::new(values.len())).bench(|| {
        let mut histogram = LatencyHistogram::new();
        for &us in &values {
            histogram.record_micros_n(us, 1);
        }
        black_box(histogram.count())
    });
}

#[divan::bench]
fn histogram_merge(bencher: Bencher) {
    let mut parts = Vec::new();
    for part in 0..8u64 {
        let mut histogram = LatencyHistogram::new();
        for i in 0..5_000u64 {
            histogram.record_micros_n(100 + (i * 104_729 + part) % 10_000_000, 1);
        }
        parts.push(histogram);
    }
    bencher.counter(ItemsCount::new(parts.len())).bench(|| {
        let mut merged = LatencyHistogram::new();
        for part in &parts {
            merged += part;
        }
        black_box(merged.percentile_us(99.0))
    });
}

/// A finished streamed request with [`CHUNKS`] one-token chunks 10 ms apart.
fn record(index: u64) -> RequestRecord {
    let chunks: Vec<[u64; 2]> = (0..CHUNKS as u64)
        .map(|n| [1_200_000 + index * 1_000 + n * 10_000, 1])
        .collect();
    let json = serde_json::json!({
        "index": index, "phase": "measure", "scheduled_us": index * 1_000,
        "dequeued_us": index * 1_000, "sent_us": index * 1_000 + 40,
        "response_us": index * 1_000 + 900, "first_token_us": chunks[0][0],
        "last_token_us": chunks[CHUNKS - 1][0], "end_us": chunks[CHUNKS - 1][0] + 100,
        "streamed": true, "input_tokens": 1024, "input_tokens_source": "usage",
        "output_tokens": CHUNKS, "output_tokens_source": "usage", "chunks": chunks, "items": 1,
    });
    serde_json::from_value(json).unwrap()
}

#[divan::bench]
fn aggregator_add(bencher: Bencher) {
    let records: Vec<RequestRecord> = (0..100).map(record).collect();
    let slo = goodput_core::metrics::Slo::parse("ttft=2s,tpot=100ms").ok();
    bencher.counter(ItemsCount::new(records.len())).bench(|| {
        let mut aggregator = StepAggregator::new(slo.clone(), Duration::from_secs(1));
        for record in &records {
            aggregator.add(record);
        }
        black_box(aggregator.measurement_interval().is_some())
    });
}
