//! The encoder routes: `POST /v1/embeddings` (OpenAI shape: `input` a string, an array of
//! strings, of token ids, or of token-id arrays; one vector per input) and `POST /v1/rerank`
//! (also `/rerank`; the Cohere/Jina/vLLM/llama.cpp shape: `query`, `documents` as strings or
//! `{text}` objects, optional `top_n`; one scored result per document, best first).
//!
//! An encoder is prefill only: each input (for rerank each query–document pair, as a
//! cross-encoder reads them) goes to the engine as a prompt that generates a single token,
//! so it costs exactly what the prefill of that prompt costs under the same batching, KV and
//! queueing as generation requests; the answer leaves when every input's prefill is done.
//! Vectors ([`EMBEDDING_DIM`] floats) and scores are deterministic functions of the token ids.
//! Refusal faults (HTTP 500/429/400) apply; faults that strike mid-answer do not.

use hyper::{Response, StatusCode};
use rand::SeedableRng;
use rand::rngs::Xoshiro256PlusPlus;
use serde_json::{Value, json};

use super::ServerState;
use super::body::SimBody;
use super::faults::Fault;
use super::routes::{error_response, injected_refusal, json_response, submit_error_response};
use crate::driver::RequestUpdate;
use crate::engine::EngineRequest;
use crate::text::{Tokenizer, block_hashes, derive_seed};

/// Floats per embedding vector.
pub(crate) const EMBEDDING_DIM: usize = 16;
/// Purpose tag of the per-request generator (faults).
const ENCODER_RNG: u64 = 0x0e9c_0de5;

/// Which encoder route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    /// `/v1/embeddings`.
    Embeddings,
    /// `/v1/rerank`.
    Rerank,
    /// `/v2/models/{model}/infer` (KServe v2; see `infer.rs`).
    V2,
}

/// A parsed encoder request: the token ids of every engine prompt.
struct Parsed {
    prompts: Vec<Vec<u32>>,
    top_n: Option<usize>,
    /// Rerank: the document texts, returned when `return_documents` is set.
    documents: Option<Vec<String>>,
}

type Invalid = (String, &'static str);

fn texts(value: &Value, param: &'static str) -> Result<Vec<String>, Invalid> {
    let one = |item: &Value| match item {
        Value::String(text) => Some(text.clone()),
        Value::Object(map) => map.get("text").and_then(Value::as_str).map(str::to_string),
        _ => None,
    };
    let texts: Option<Vec<String>> = match value {
        Value::Array(items) => items.iter().map(one).collect(),
        other => one(other).map(|text| vec![text]),
    };
    match texts {
        Some(texts) if !texts.is_empty() => Ok(texts),
        _ => Err((
            format!("`{param}` must be a non-empty string or array of strings"),
            param,
        )),
    }
}

fn parse(state: &ServerState, route: Route, body: &[u8]) -> Result<Parsed, Invalid> {
    parse_with(&state.prompt_context.tokenizer, route, body)
}

/// The engine request of one encoder prompt: its prefill and one token.
pub(crate) fn engine_request(ids: &[u32], block_size: Option<u32>) -> EngineRequest {
    EngineRequest {
        id: 0,
        prompt_tokens: u32::try_from(ids.len()).unwrap_or(u32::MAX),
        block_hashes: block_size.map_or_else(Vec::new, |size| block_hashes(ids, size)),
        max_output_tokens: 1,
        stop_after_tokens: 1,
    }
}

fn parse_with(tokenizer: &Tokenizer, route: Route, body: &[u8]) -> Result<Parsed, Invalid> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|error| (format!("invalid JSON body: {error}"), "body"))?;
    match route {
        Route::V2 => Ok(Parsed {
            prompts: super::infer::prompts(tokenizer, &value).map_err(|m| (m, "inputs"))?,
            top_n: None,
            documents: None,
        }),
        Route::Embeddings => {
            let input = value.get("input").unwrap_or(&Value::Null);
            let prompts = match input {
                Value::Array(items) if items.first().is_some_and(Value::is_number) => {
                    vec![token_ids(items)?]
                }
                Value::Array(items) if items.first().is_some_and(Value::is_array) => items
                    .iter()
                    .map(|item| token_ids(item.as_array().map_or(&[][..], Vec::as_slice)))
                    .collect::<Result<_, _>>()?,
                other => texts(other, "input")?
                    .iter()
                    .map(|text| tokenizer.encode(text))
                    .collect(),
            };
            Ok(Parsed {
                prompts,
                top_n: None,
                documents: None,
            })
        }
        Route::Rerank => {
            let query = value
                .get("query")
                .and_then(Value::as_str)
                .ok_or_else(|| ("`query` must be a string".to_string(), "query"))?;
            let documents = texts(value.get("documents").unwrap_or(&Value::Null), "documents")?;
            let query = tokenizer.encode(query);
            let prompts = documents
                .iter()
                .map(|doc| [query.as_slice(), &tokenizer.encode(doc)].concat())
                .collect();
            let top_n = value
                .get("top_n")
                .and_then(Value::as_u64)
                .map(|n| usize::try_from(n).unwrap_or(usize::MAX));
            let keep = value.get("return_documents").and_then(Value::as_bool) == Some(true);
            Ok(Parsed {
                prompts,
                top_n,
                documents: keep.then_some(documents),
            })
        }
    }
}

fn token_ids(items: &[Value]) -> Result<Vec<u32>, Invalid> {
    let ids: Option<Vec<u32>> = items
        .iter()
        .map(|id| id.as_u64().and_then(|id| u32::try_from(id).ok()))
        .collect();
    match ids {
        Some(ids) if !ids.is_empty() => Ok(ids),
        _ => Err((
            "`input` token arrays must be non-empty arrays of token ids".into(),
            "input",
        )),
    }
}

/// Answers one encoder request whose body is `body`.
pub(crate) async fn answer(state: &ServerState, route: Route, body: &[u8]) -> Response<SimBody> {
    let parsed = match parse(state, route, body) {
        Ok(parsed) => parsed,
        Err((message, param)) => {
            state.driver.record_rejection("invalid_request");
            return refuse(route, &message, Some(param));
        }
    };
    let number = state.next_request_number();
    let seed = derive_seed(state.config.seed, number, ENCODER_RNG);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    if let Some(refusal) =
        Fault::draw(&state.config.faults, &mut rng).and_then(|fault| injected_refusal(state, fault))
    {
        return refusal;
    }
    let max_len = state.prompt_context.max_model_len.saturating_sub(1);
    if let Some(long) = parsed.prompts.iter().find(|p| p.len() > max_len as usize) {
        let message = format!(
            "an input of {} tokens exceeds the model's {} tokens",
            long.len(),
            state.prompt_context.max_model_len
        );
        return refuse(route, &message, None);
    }
    if let Err(response) = prefill(state, &parsed.prompts).await {
        return response;
    }
    let prompt_tokens: usize = parsed.prompts.iter().map(Vec::len).sum();
    let body = match route {
        Route::Embeddings => embeddings_body(state, &parsed, prompt_tokens),
        Route::Rerank => rerank_body(state, &parsed, prompt_tokens, number),
        Route::V2 => super::infer::body(state, &parsed.prompts, number),
    };
    json_response(StatusCode::OK, body)
}

/// A 400 for a body the route refuses: the OpenAI error object, or v2's `{"error": …}`.
fn refuse(route: Route, message: &str, param: Option<&str>) -> Response<SimBody> {
    match route {
        Route::V2 => json_response(StatusCode::BAD_REQUEST, super::infer::error_body(message)),
        _ => error_response(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            message,
            param,
        ),
    }
}

/// Runs every prompt's prefill (one generated token each) through the engine.
async fn prefill(state: &ServerState, prompts: &[Vec<u32>]) -> Result<(), Response<SimBody>> {
    let block_size = state.prompt_context.block_size;
    let requests = prompts
        .iter()
        .map(|ids| engine_request(ids, block_size))
        .collect();
    let mut events = match state.driver.submit(requests).await {
        Ok(events) => events,
        Err(error) => return Err(submit_error_response(&error, state.driver.clock())),
    };
    while let Some((_, update)) = events.recv().await {
        if let RequestUpdate::Aborted { reason } = update {
            let status = StatusCode::INTERNAL_SERVER_ERROR;
            return Err(error_response(status, "server_error", &reason, None));
        }
    }
    Ok(())
}

/// A deterministic value in [-1, 1) from a seed.
fn unit(seed: u64) -> f64 {
    (seed >> 11) as f64 / (1u64 << 52) as f64 - 1.0
}

fn embeddings_body(state: &ServerState, parsed: &Parsed, prompt_tokens: usize) -> Vec<u8> {
    let data: Vec<Value> = parsed
        .prompts
        .iter()
        .enumerate()
        .map(|(index, ids)| {
            let base = ids.iter().fold(state.config.seed, |h, &id| {
                derive_seed(h, u64::from(id), 0xe5)
            });
            let vector: Vec<f64> = (0..EMBEDDING_DIM as u64)
                .map(|k| (unit(derive_seed(base, k, 0x7)) * 1e4).round() / 1e4)
                .collect();
            json!({"object": "embedding", "index": index, "embedding": vector})
        })
        .collect();
    let body = json!({
        "object": "list",
        "data": data,
        "model": state.model_name,
        "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens},
    });
    serde_json::to_vec(&body).unwrap_or_default()
}

fn rerank_body(state: &ServerState, parsed: &Parsed, prompt_tokens: usize, number: u64) -> Vec<u8> {
    let mut results: Vec<(usize, f64)> = parsed
        .prompts
        .iter()
        .enumerate()
        .map(|(index, ids)| {
            let hash = ids.iter().fold(state.config.seed, |h, &id| {
                derive_seed(h, u64::from(id), 0x5c)
            });
            (index, ((unit(hash) + 1.0) / 2.0 * 1e4).round() / 1e4)
        })
        .collect();
    results.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    results.truncate(parsed.top_n.unwrap_or(usize::MAX).max(1));
    let results: Vec<Value> = results
        .iter()
        .map(|&(index, score)| {
            let mut entry = json!({"index": index, "relevance_score": score});
            if let Some(text) = parsed.documents.as_ref().and_then(|d| d.get(index)) {
                entry["document"] = json!({ "text": text });
            }
            entry
        })
        .collect();
    let body = json!({
        "id": format!("rerank-{:016x}", derive_seed(state.config.seed, number, 0x1d)),
        "model": state.model_name,
        "results": results,
        "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens},
    });
    serde_json::to_vec(&body).unwrap_or_default()
}
