//! Property tests of the streamed-chunk parser (the OpenAI backend reading an SSE body): chunks
//! built from a model parse to exactly their text, usage and finish reason under any split of
//! the body; arbitrary garbage in a chunk's JSON never panics, never hangs and fails as a
//! protocol (or stream) error that keeps the text received before it. Bounded case counts.
#![allow(clippy::unwrap_used)]

#[path = "support/wire_server.rs"]
mod wire_server;

use std::time::Duration;

use goodput_core::backend::openai::{OpenAiBackend, OpenAiConfig};
use goodput_core::backend::{Activity, Backend, RequestInput, RequestSpec};
use goodput_core::record::{Exchange, OutcomeKind};
use goodput_protocol::stream::ChunkView;
use proptest::prelude::*;
use serde_json::json;
use wire_server::{LAST_CHUNK, State, Step, chunk, sse_head};

/// Sends one request to a server answering with `body` cut into HTTP chunks at `cuts`, over
/// an in-memory pipe; returns what the backend recorded.
fn exchange_over(body: Vec<u8>, cuts: &[usize]) -> Exchange {
    let mut points: Vec<usize> = cuts.iter().map(|c| c % (body.len() + 1)).collect();
    points.sort_unstable();
    points.push(body.len());
    let mut steps = vec![Step::Write(sse_head(""))];
    let mut start = 0;
    for point in points {
        if point > start {
            steps.push(Step::Write(chunk(&body[start..point])));
            start = point;
        }
    }
    steps.push(Step::Write(LAST_CHUNK.to_vec()));
    let state = State::new(move |_, _| steps.clone());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let client = wire_server::in_memory_client(state, "http://wire.test/v1");
        let config = OpenAiConfig {
            model: "m".into(),
            ..OpenAiConfig::default()
        };
        let backend = OpenAiBackend::new(config, client).unwrap();
        let spec = RequestSpec {
            index: 0,
            input: RequestInput::Text("hi".into()),
            expected_input_tokens: None,
            max_output_tokens: Some(8),
            turn: None,
            tags: Default::default(),
        };
        let mut exchange = Exchange::default();
        let activity = Activity::default();
        tokio::time::timeout(
            Duration::from_secs(30),
            backend.send(&spec, &mut exchange, &activity),
        )
        .await
        .expect("the backend finishes on its own");
        exchange
    })
}

fn event(payload: &str) -> String {
    format!("data: {payload}\n\n")
}

fn content_chunk(text: &str, finish: Option<&str>, cumulative: Option<u64>) -> String {
    let mut value = json!({
        "id": "chatcmpl-p", "object": "chat.completion.chunk", "created": 1, "model": "m",
        "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": finish}],
    });
    if let Some(tokens) = cumulative {
        value["usage"] =
            json!({"prompt_tokens": 3, "completion_tokens": tokens, "total_tokens": tokens + 3});
    }
    event(&value.to_string())
}

const ROLE: &str = r#"{"id":"chatcmpl-p","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#;

/// A whole valid stream of `texts` (continuous usage optional), with usage and `[DONE]`.
fn valid_stream(texts: &[String], continuous: bool) -> String {
    let mut body = event(ROLE);
    for (n, text) in texts.iter().enumerate() {
        let last = n + 1 == texts.len();
        let cumulative = continuous.then_some(n as u64 + 1);
        body.push_str(&content_chunk(text, last.then_some("stop"), cumulative));
    }
    let total = texts.len() as u64;
    let usage = json!({"id": "chatcmpl-p", "choices": [],
        "usage": {"prompt_tokens": 3, "completion_tokens": total, "total_tokens": total + 3}});
    body.push_str(&event(&usage.to_string()));
    body.push_str(&event("[DONE]"));
    body
}

/// JSON-ish garbage: the characters that steer a JSON parser, plus anything printable.
fn garbage() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![
            Just('{'),
            Just('}'),
            Just('['),
            Just(']'),
            Just('"'),
            Just(':'),
            Just(','),
            Just('\\'),
            Just('0'),
            Just('n'),
            Just('u'),
            any::<char>().prop_filter("one line", |c| *c != '\n' && *c != '\r'),
        ],
        0..80,
    )
    .prop_map(|chars| chars.into_iter().collect())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn model_chunks_parse_to_their_text_usage_and_finish(
        texts in proptest::collection::vec("\\PC{1,12}", 1..12),
        continuous in any::<bool>(),
        cuts in proptest::collection::vec(any::<usize>(), 0..10),
    ) {
        let body = valid_stream(&texts, continuous);
        let exchange = exchange_over(body.into_bytes(), &cuts);
        prop_assert_eq!(&exchange.failure, &None);
        prop_assert_eq!(&exchange.text, &texts.concat());
        prop_assert_eq!(exchange.chunks.len(), texts.len());
        prop_assert_eq!(exchange.usage.map(|u| u.completion_tokens), Some(texts.len() as u64));
        prop_assert_eq!(exchange.finish_reason.as_deref(), Some("stop"));
        if continuous {
            let cumulative: Vec<Option<u64>> =
                exchange.chunks.iter().map(|c| c.cumulative_tokens()).collect();
            let expected: Vec<Option<u64>> = (1..=texts.len() as u64).map(Some).collect();
            prop_assert_eq!(cumulative, expected);
        }
    }

    #[test]
    fn garbage_in_a_chunk_fails_cleanly_and_keeps_what_came_before(
        before in proptest::collection::vec("[a-z ]{1,6}", 0..5),
        junk in garbage(),
        cuts in proptest::collection::vec(any::<usize>(), 0..8),
    ) {
        let mut body = event(ROLE);
        for text in &before {
            body.push_str(&content_chunk(text, None, None));
        }
        body.push_str(&event(&junk));
        body.push_str(&content_chunk("after", Some("stop"), None));
        body.push_str(&event("[DONE]"));
        let exchange = exchange_over(body.into_bytes(), &cuts);
        let prefix = before.concat();
        prop_assert!(exchange.text.starts_with(&prefix));
        match &exchange.failure {
            Some(failure) => {
                prop_assert!(
                    matches!(failure.kind, OutcomeKind::Protocol | OutcomeKind::StreamError),
                    "{:?}", failure
                );
                prop_assert_eq!(&exchange.text, &prefix, "nothing after the garbage counts");
            }
            None => {
                // Only junk that is no chunk at all, `[DONE]`, or a valid chunk passes.
                let trimmed = junk.trim_ascii();
                let harmless = trimmed.is_empty()
                    || trimmed == "[DONE]"
                    || serde_json::from_str::<ChunkView<'_>>(trimmed).is_ok();
                prop_assert!(harmless, "accepted {:?}", junk);
            }
        }
    }

    #[test]
    fn the_chunk_view_never_panics_on_any_text(junk in garbage()) {
        if let Ok(chunk) = serde_json::from_str::<ChunkView<'_>>(&junk) {
            for choice in chunk.choices.iter().flatten() {
                let _ = (choice.generated_text(), choice.has_output());
            }
        }
    }
}
