//! Encoder APIs: `/v1/embeddings` (OpenAI: an `input` string or array, one vector back per
//! input) and `/v1/rerank` (the Cohere/Jina/vLLM/llama.cpp shape: a `query` and `documents`,
//! one scored result back per document). Both answer with one JSON body: the items are the
//! vectors (results) the server returned — checked against the inputs sent, a mismatch is a
//! protocol failure, never a silent count — and the input tokens its `usage`. Also
//! `/v1/images/generations` (OpenAI images: one `prompt`, `n` images — the batch's size —
//! back as `b64_json` or `url` entries of `data`), items = images.

use goodput_protocol::Usage;
use serde_json::{Map, Value, json};
use tokio::time::Instant;

use super::{invalid, reply::error_text};
use crate::backend::RequestInput;
use crate::record::{Exchange, Failure, Generation, OutcomeKind};

/// Words of the first prompt a rerank request takes as its query.
pub(super) const QUERY_WORDS: usize = 16;

/// Which encoder API a body is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Encoder {
    /// `/v1/embeddings`.
    Embeddings,
    /// `/v1/rerank`.
    Rerank,
    /// `/v1/images/generations`.
    Images,
}

/// The texts a request's input stands for: one per prompt of a batch, a conversation as one
/// text (its messages' contents, one line each).
fn texts(input: &RequestInput) -> Vec<String> {
    match input {
        RequestInput::Text(text) => vec![text.clone()],
        RequestInput::Messages(messages) => vec![
            messages
                .iter()
                .map(|m| m.content.text())
                .collect::<Vec<_>>()
                .join("\n"),
        ],
        RequestInput::Batch(prompts) => prompts.clone(),
    }
}

/// The query of a rerank request: the first [`QUERY_WORDS`] words of its first text.
pub(super) fn rerank_query(input: &RequestInput) -> String {
    let texts = texts(input);
    let first = texts.first().map_or("", String::as_str);
    first
        .split_whitespace()
        .take(QUERY_WORDS)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Inserts the input of `encoder` into `body`: `input` (a string for one text, an array for
/// a batch) and `encoding_format: float`, or `query` and `documents`.
pub(super) fn insert_input(
    body: &mut Map<String, Value>,
    encoder: Encoder,
    input: &RequestInput,
) -> Result<(), Failure> {
    let texts = texts(input);
    if texts.is_empty() {
        return Err(invalid("empty batch of inputs"));
    }
    match encoder {
        Encoder::Embeddings => {
            let value = match input {
                RequestInput::Batch(_) => json!(texts),
                _ => json!(texts[0]),
            };
            body.insert("input".into(), value);
            body.insert("encoding_format".into(), json!("float"));
        }
        Encoder::Rerank => {
            body.insert("query".into(), json!(rerank_query(input)));
            body.insert("documents".into(), json!(texts));
        }
        Encoder::Images => {
            body.insert("prompt".into(), json!(texts[0]));
            body.insert("n".into(), json!(texts.len()));
            body.insert("response_format".into(), json!("b64_json"));
        }
    }
    Ok(())
}

/// Puts an image-generation request's size (`size`, `"WxH"`) and denoising steps (under
/// `steps_key`) into `body`, those it names.
pub(super) fn insert_generation(
    body: &mut Map<String, Value>,
    generation: &Generation,
    steps_key: &str,
) {
    if let Some(size) = generation.size {
        body.insert("size".into(), json!(size.to_string()));
    }
    if let Some(steps) = generation.steps {
        body.insert(steps_key.into(), json!(steps));
    }
}

/// Inputs (documents) a request sends.
pub(super) fn inputs(input: &RequestInput) -> usize {
    match input {
        RequestInput::Batch(prompts) => prompts.len(),
        RequestInput::Text(_) | RequestInput::Messages(_) => 1,
    }
}

fn protocol(message: impl Into<String>) -> Failure {
    Failure::new(OutcomeKind::Protocol, message)
}

/// Records a whole encoder answer that arrived at `now`, for a request of `sent` inputs: the
/// items are the vectors (`data`) or results (`results`) returned, which must number `sent`
/// (a rerank `top_n` may return fewer: then at most `sent`, at least one).
pub(super) fn record_whole(
    bytes: &[u8],
    now: Instant,
    exchange: &mut Exchange,
    encoder: Encoder,
    sent: usize,
) -> Result<(), Failure> {
    let value: Value = serde_json::from_slice(bytes)
        .map_err(|error| protocol(format!("invalid JSON response body: {error}")))?;
    let has_error = value.get("error").is_some_and(|error| !error.is_null());
    if has_error || value.get("object").and_then(Value::as_str) == Some("error") {
        return Err(Failure::new(
            OutcomeKind::StreamError,
            format!("server error: {}", error_text(&value)),
        ));
    }
    let key = match encoder {
        Encoder::Embeddings | Encoder::Images => "data",
        Encoder::Rerank => "results",
    };
    let Some(items) = value.get(key).and_then(Value::as_array) else {
        return Err(protocol(format!("response has no `{key}` array")));
    };
    let returned = items.len();
    let complete = match encoder {
        Encoder::Embeddings | Encoder::Images => returned == sent,
        Encoder::Rerank => returned >= 1 && returned <= sent,
    };
    if !complete {
        return Err(protocol(format!(
            "the server returned {returned} {key} entries for {sent} inputs"
        )));
    }
    match encoder {
        Encoder::Embeddings => check_vectors(items)?,
        Encoder::Images => check_images(items)?,
        Encoder::Rerank => {}
    }
    exchange.choices = u32::try_from(returned).unwrap_or(u32::MAX);
    exchange.untokenized = true;
    exchange.push_output(now, "", Some(0));
    exchange.usage = value.get("usage").and_then(input_usage);
    Ok(())
}

/// Every entry of `data` carries a non-empty `embedding` (a float array, or a base64 string).
fn check_vectors(items: &[Value]) -> Result<(), Failure> {
    for (position, item) in items.iter().enumerate() {
        let ok = match item.get("embedding") {
            Some(Value::Array(numbers)) => !numbers.is_empty(),
            Some(Value::String(encoded)) => !encoded.is_empty(),
            _ => false,
        };
        if !ok {
            return Err(protocol(format!(
                "embedding {position} of the response is missing or empty"
            )));
        }
    }
    Ok(())
}

/// Every entry of `data` carries a non-empty image: `b64_json` or `url`.
fn check_images(items: &[Value]) -> Result<(), Failure> {
    for (position, item) in items.iter().enumerate() {
        let present = |key: &str| {
            item.get(key)
                .and_then(Value::as_str)
                .is_some_and(|s| !s.is_empty())
        };
        if !(present("b64_json") || present("url")) {
            return Err(protocol(format!(
                "image {position} of the response has neither `b64_json` nor `url`"
            )));
        }
    }
    Ok(())
}

/// Input tokens of an encoder `usage`: `prompt_tokens`, else `total_tokens` (vLLM and Jina
/// rerank report only the total), else `input_tokens`.
fn input_usage(usage: &Value) -> Option<Usage> {
    let count = |key: &str| usage.get(key).and_then(Value::as_u64);
    let tokens = count("prompt_tokens")
        .or_else(|| count("total_tokens"))
        .or_else(|| count("input_tokens"))?;
    Some(Usage::new(tokens, 0))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn record(body: &str, encoder: Encoder, sent: usize) -> Result<Exchange, Failure> {
        let mut exchange = Exchange::default();
        record_whole(
            body.as_bytes(),
            Instant::now(),
            &mut exchange,
            encoder,
            sent,
        )?;
        Ok(exchange)
    }

    #[test]
    fn embeddings_count_vectors_and_usage() {
        let body = r#"{"object":"list","data":[{"embedding":[0.1,0.2],"index":0},{"embedding":[0.3],"index":1}],"usage":{"prompt_tokens":17,"total_tokens":17}}"#;
        let exchange = record(body, Encoder::Embeddings, 2).unwrap();
        assert_eq!(exchange.choices, 2);
        assert_eq!(exchange.usage.unwrap().prompt_tokens, 17);
        assert_eq!(exchange.chunks.len(), 1);
        let short = record(body, Encoder::Embeddings, 3).unwrap_err();
        assert_eq!(short.kind, OutcomeKind::Protocol);
        assert!(
            short.message.contains("2 data entries for 3 inputs"),
            "{short:?}"
        );
        let empty = r#"{"data":[{"embedding":[]}]}"#;
        let error = record(empty, Encoder::Embeddings, 1).unwrap_err();
        assert!(error.message.contains("missing or empty"), "{error:?}");
    }

    #[test]
    fn rerank_counts_results_and_total_tokens() {
        let body = r#"{"results":[{"index":1,"relevance_score":0.9},{"index":0,"relevance_score":0.1}],"usage":{"total_tokens":40}}"#;
        let exchange = record(body, Encoder::Rerank, 2).unwrap();
        assert_eq!(exchange.choices, 2);
        assert_eq!(exchange.usage.unwrap().prompt_tokens, 40);
        assert!(record(r#"{"results":[]}"#, Encoder::Rerank, 2).is_err());
        let error = record(r#"{"error":{"message":"no"}}"#, Encoder::Rerank, 1).unwrap_err();
        assert_eq!(error.kind, OutcomeKind::StreamError);
    }

    #[test]
    fn images_count_data_entries_with_an_image() {
        let body = r#"{"created":1,"data":[{"b64_json":"iVBOR"},{"url":"http://x/1.png"}]}"#;
        let exchange = record(body, Encoder::Images, 2).unwrap();
        assert_eq!(exchange.choices, 2);
        let short = record(body, Encoder::Images, 3).unwrap_err();
        assert!(
            short.message.contains("2 data entries for 3 inputs"),
            "{short:?}"
        );
        let blank = record(r#"{"data":[{"b64_json":""}]}"#, Encoder::Images, 1).unwrap_err();
        assert!(
            blank.message.contains("neither `b64_json` nor `url`"),
            "{blank:?}"
        );
        let mut body = Map::new();
        let batch = RequestInput::Batch(vec!["a cat".into(), "a dog".into()]);
        insert_input(&mut body, Encoder::Images, &batch).unwrap();
        assert_eq!((&body["prompt"], &body["n"]), (&json!("a cat"), &json!(2)));
        let size = crate::record::Resolution::read("512x768");
        let generation = Generation {
            size,
            steps: Some(20),
        };
        insert_generation(&mut body, &generation, "steps");
        assert_eq!(
            (&body["size"], &body["steps"]),
            (&json!("512x768"), &json!(20))
        );
        let mut bare = Map::new();
        let steps_only = Generation {
            size: None,
            steps: Some(4),
        };
        insert_generation(&mut bare, &steps_only, "num_inference_steps");
        assert_eq!(
            bare,
            json!({"num_inference_steps": 4})
                .as_object()
                .unwrap()
                .clone()
        );
    }

    #[test]
    fn bodies() {
        let batch = RequestInput::Batch(vec!["a b c".into(), "d".into()]);
        let mut body = Map::new();
        insert_input(&mut body, Encoder::Embeddings, &batch).unwrap();
        assert_eq!(body["input"], json!(["a b c", "d"]));
        let mut body = Map::new();
        insert_input(
            &mut body,
            Encoder::Embeddings,
            &RequestInput::Text("x".into()),
        )
        .unwrap();
        assert_eq!(body["input"], json!("x"));
        let mut body = Map::new();
        insert_input(&mut body, Encoder::Rerank, &batch).unwrap();
        assert_eq!(body["query"], json!("a b c"));
        assert_eq!(body["documents"], json!(["a b c", "d"]));
        let empty = RequestInput::Batch(Vec::new());
        assert!(insert_input(&mut Map::new(), Encoder::Rerank, &empty).is_err());
    }
}
