//! The KServe v2 / Open Inference Protocol routes: `POST /v2/models/{model}/infer`,
//! `GET /v2/models/{model}` (metadata), `GET /v2/models/{model}/ready`, `GET
//! /v2/health/ready` and `/v2/health/live`.
//!
//! An inference request is an encoder request (see `encode.rs`): each batch row — the first
//! dimension of the inputs — is one engine prompt that generates a single token, with a
//! prefill of [`row_tokens`]: for a `BYTES` input, the tokens of the row's strings; for a
//! numeric or `BOOL` input, one token per [`ELEMENTS_PER_TOKEN`] elements of the row, rounded
//! up (a 16×16 RGB patch, as a ViT reads an image: a 3×224×224 row is 196 tokens); the
//! inputs of a request add up, and a row is at least one token. The answer is one output
//! `output`, FP32, shape `[rows, 16]`. A body the protocol does not allow — no inputs, a
//! shape whose element count is not the data's, inputs of different batch sizes — is refused
//! with 400 `{"error": "…"}` as KServe answers.

use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{Value, json};

use super::ServerState;
use super::body::SimBody;
use super::encode::Route;
use super::routes::{json_response, read_body};
use crate::text::{Tokenizer, derive_seed};

/// Tensor elements per prefill token of a numeric input (16 × 16 × 3).
pub(crate) const ELEMENTS_PER_TOKEN: usize = 768;
/// Floats per output row.
const OUTPUT_DIM: usize = 16;
/// Token ids of numeric chunks are drawn below this.
const VOCAB: u64 = 32_000;

/// A parsed input: its datatype, shape and flattened data.
struct Input<'a> {
    datatype: &'a str,
    shape: Vec<u64>,
    data: Vec<&'a Value>,
}

fn flatten<'a>(value: &'a Value, out: &mut Vec<&'a Value>) {
    match value {
        Value::Array(items) => items.iter().for_each(|item| flatten(item, out)),
        other => out.push(other),
    }
}

fn input(value: &Value) -> Result<Input<'_>, String> {
    let name = value.get("name").and_then(Value::as_str).unwrap_or("?");
    let datatype = value
        .get("datatype")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("input `{name}` has no datatype"))?;
    let shape: Option<Vec<u64>> = value
        .get("shape")
        .and_then(Value::as_array)
        .map(|dims| dims.iter().map(Value::as_u64).collect())
        .and_then(|dims: Option<Vec<u64>>| dims.filter(|d| !d.is_empty()));
    let shape = shape.ok_or_else(|| format!("input `{name}` has no valid shape"))?;
    let mut data = Vec::new();
    flatten(value.get("data").unwrap_or(&Value::Null), &mut data);
    let expected: u64 = shape.iter().product();
    if data.len() as u64 != expected || expected == 0 {
        return Err(format!(
            "input `{name}`: shape {shape:?} holds {expected} elements but data has {}",
            data.len()
        ));
    }
    Ok(Input {
        datatype,
        shape,
        data,
    })
}

/// The prefill token ids of row `row` of `input`.
fn row_tokens(tokenizer: &Tokenizer, input: &Input<'_>, row: usize) -> Vec<u32> {
    let rows = usize::try_from(input.shape[0]).unwrap_or(usize::MAX).max(1);
    let per_row = input.data.len() / rows;
    let cells = &input.data[row * per_row..(row + 1) * per_row];
    if input.datatype.eq_ignore_ascii_case("BYTES") {
        return cells
            .iter()
            .flat_map(|cell| tokenizer.encode(cell.as_str().unwrap_or_default()))
            .collect();
    }
    cells
        .chunks(ELEMENTS_PER_TOKEN)
        .map(|chunk| {
            let hash = chunk.iter().fold(0x5eed, |h, cell| {
                let bits = cell
                    .as_f64()
                    .map_or_else(|| u64::from(cell.as_bool() == Some(true)), f64::to_bits);
                derive_seed(h, bits, 0x7e)
            });
            u32::try_from(hash % VOCAB).unwrap_or(0)
        })
        .collect()
}

/// Serves a `/v2/…` path.
pub(crate) async fn route(state: &ServerState, request: Request<Incoming>) -> Response<SimBody> {
    let path = request.uri().path().to_string();
    let error = |status, message: String| json_response(status, error_body(&message));
    let get = request.method() == Method::GET;
    let post = request.method() == Method::POST;
    if let Some(rest) = path.strip_prefix("/v2/models/") {
        let (model, tail) = rest.split_once('/').unwrap_or((rest, ""));
        if model != state.model_name {
            let message = format!("Model with name {model} does not exist.");
            return error(StatusCode::NOT_FOUND, message);
        }
        return match (tail, get, post) {
            ("infer", _, true) => match read_body(request).await {
                Ok(body) => super::encode::answer(state, Route::V2, &body).await,
                Err(response) => response,
            },
            ("", true, _) => json_response(StatusCode::OK, metadata(state)),
            ("ready", true, _) => json_response(StatusCode::OK, ready(state)),
            _ => error(StatusCode::NOT_FOUND, format!("no route for {path}")),
        };
    }
    match (path.as_str(), get) {
        ("/v2/health/ready" | "/v2/health/live", true) => {
            json_response(StatusCode::OK, serde_json::to_vec(&json!({"ready": true, "live": true})).unwrap_or_default())
        }
        ("/v2", true) => json_response(
            StatusCode::OK,
            serde_json::to_vec(&json!({"name": "goodput-sim", "version": env!("CARGO_PKG_VERSION"), "extensions": []}))
                .unwrap_or_default(),
        ),
        _ => error(StatusCode::NOT_FOUND, format!("no route for {} {path}", request.method())),
    }
}

fn ready(state: &ServerState) -> Vec<u8> {
    serde_json::to_vec(&json!({"name": state.model_name, "ready": true})).unwrap_or_default()
}

/// The engine prompts of a v2 body: one per batch row, the row's tokens of every input.
pub(crate) fn prompts(tokenizer: &Tokenizer, value: &Value) -> Result<Vec<Vec<u32>>, String> {
    let inputs = value
        .get("inputs")
        .and_then(Value::as_array)
        .filter(|inputs| !inputs.is_empty())
        .ok_or("`inputs` must be a non-empty array of tensors")?;
    let inputs: Vec<Input<'_>> = inputs.iter().map(input).collect::<Result<_, _>>()?;
    let rows = inputs[0].shape[0];
    if let Some(other) = inputs.iter().find(|i| i.shape[0] != rows) {
        return Err(format!(
            "inputs have different batch sizes: {rows} and {}",
            other.shape[0]
        ));
    }
    let rows = usize::try_from(rows).unwrap_or(usize::MAX);
    Ok((0..rows)
        .map(|row| {
            let ids: Vec<u32> = inputs
                .iter()
                .flat_map(|input| row_tokens(tokenizer, input, row))
                .collect();
            if ids.is_empty() { vec![0] } else { ids }
        })
        .collect())
}

/// The answer to an inference of `prompts` (one per row), request `number`.
pub(crate) fn body(state: &ServerState, prompts: &[Vec<u32>], number: u64) -> Vec<u8> {
    let data: Vec<f64> = prompts
        .iter()
        .flat_map(|ids| {
            let base = ids.iter().fold(state.config.seed, |h, &id| {
                derive_seed(h, u64::from(id), 0x2f)
            });
            (0..OUTPUT_DIM as u64).map(move |k| {
                let bits = derive_seed(base, k, 0x3);
                ((bits >> 11) as f64 / (1u64 << 53) as f64 * 1e4).round() / 1e4
            })
        })
        .collect();
    let body = json!({
        "model_name": state.model_name,
        "id": format!("infer-{:016x}", derive_seed(state.config.seed, number, 0x1e)),
        "outputs": [{"name": "output", "shape": [prompts.len(), OUTPUT_DIM], "datatype": "FP32", "data": data}],
    });
    serde_json::to_vec(&body).unwrap_or_default()
}

/// `GET /v2/models/{model}`: the model's metadata.
pub(crate) fn metadata(state: &ServerState) -> Vec<u8> {
    let body = json!({
        "name": state.model_name,
        "versions": ["1"],
        "platform": "goodput-sim",
        "inputs": [{"name": "input", "datatype": "FP32", "shape": [-1, -1]}],
        "outputs": [{"name": "output", "datatype": "FP32", "shape": [-1, OUTPUT_DIM]}],
    });
    serde_json::to_vec(&body).unwrap_or_default()
}

/// A v2 error body.
pub(crate) fn error_body(message: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({ "error": message })).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::config::PromptTokenizer;

    #[test]
    fn rows_become_prompts_by_element_count_or_text() {
        let tokenizer = Tokenizer::new(PromptTokenizer::Words);
        let image = json!({"inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 3, 16, 17],
            "data": vec![0.5; 2 * 3 * 16 * 17]}]});
        let lengths: Vec<usize> = prompts(&tokenizer, &image)
            .unwrap()
            .iter()
            .map(Vec::len)
            .collect();
        assert_eq!(lengths, [2, 2], "816 elements a row: ceil(816 / 768)");
        let text = json!({"inputs": [{"name": "t", "datatype": "BYTES", "shape": [2], "data": ["a b c", "d"]}]});
        let lengths: Vec<usize> = prompts(&tokenizer, &text)
            .unwrap()
            .iter()
            .map(Vec::len)
            .collect();
        assert_eq!(lengths, [3, 1]);
        let bad =
            json!({"inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 3], "data": [1, 2]}]});
        let error = prompts(&tokenizer, &bad).unwrap_err();
        assert!(error.contains("6 elements but data has 2"), "{error}");
        assert!(prompts(&tokenizer, &json!({"inputs": []})).is_err());
    }
}
