//! What a server says about its own limits and model: llama.cpp's `/props` (slots, context per
//! slot, batch size) and the `meta` of its `/v1/models` entries (width, vocabulary, parameter
//! count, weight format). Every figure is optional: other servers answer none of it.

use std::time::Duration;

use bytes::Bytes;
use http::Uri;
use http_body_util::Full;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::http::HttpClient;
use crate::record::Exchange;

/// Largest body read.
const MAX_BODY: usize = 4 << 20;

/// A server's own account of its limits and model.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ServerFacts {
    /// Sequences served at once (`/props` `total_slots`).
    pub slots: Option<u32>,
    /// Context of one slot, tokens (`/props` `default_generation_settings.n_ctx`).
    pub context_per_slot: Option<u32>,
    /// Tokens of one engine step (`n_batch`), when reported.
    pub batch_tokens: Option<u32>,
    /// Tokens of one micro-batch (`n_ubatch`), when reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ubatch_tokens: Option<u32>,
    /// Model width (`meta.n_embd`).
    pub hidden: Option<u32>,
    /// Vocabulary (`meta.n_vocab`).
    pub vocab: Option<u32>,
    /// Parameters (`meta.n_params`).
    pub params: Option<f64>,
    /// Weight format as the server names it (`meta.ftype`, e.g. `all F32`, `Q4_0`).
    pub weight_format: Option<String>,
    /// Where each figure came from, for the report.
    pub sources: Vec<String>,
}

/// Asks `client`'s server for its facts; what it does not answer stays `None`.
pub async fn server_facts(client: &HttpClient, timeout: Duration) -> ServerFacts {
    let mut facts = ServerFacts::default();
    if let Some(props) = get_json(client, "/props", timeout).await {
        let settings = &props["default_generation_settings"];
        facts.slots = as_u32(&props["total_slots"]);
        facts.context_per_slot = as_u32(&settings["n_ctx"]);
        facts.batch_tokens = as_u32(&settings["n_batch"]).or(as_u32(&props["n_batch"]));
        facts.ubatch_tokens = as_u32(&settings["n_ubatch"]).or(as_u32(&props["n_ubatch"]));
        facts.sources.push("/props".into());
    }
    let models = client.target().endpoint("models").to_string();
    if let Some(list) = get_json(client, &models, timeout).await
        && let Some(meta) = list["data"].get(0).map(|card| &card["meta"])
        && meta.is_object()
    {
        facts.hidden = as_u32(&meta["n_embd"]);
        facts.vocab = as_u32(&meta["n_vocab"]);
        facts.params = meta["n_params"].as_f64();
        facts.weight_format = meta["ftype"].as_str().map(str::to_string);
        facts.sources.push(format!("{models} (meta)"));
    }
    facts
}

fn as_u32(value: &Value) -> Option<u32> {
    value.as_u64().and_then(|v| u32::try_from(v).ok())
}

/// `GET path` as JSON; `None` on any failure (the figure is then unknown, not an error).
async fn get_json(client: &HttpClient, path: &str, timeout: Duration) -> Option<Value> {
    let uri: Uri = path.parse().ok()?;
    let request = http::Request::get(uri).body(Full::new(Bytes::new())).ok()?;
    let fetch = async {
        let mut exchange = Exchange::default();
        let mut response = client.send(request, &mut exchange).await.ok()?;
        if !response.status().is_success() {
            return None;
        }
        let mut body = Vec::new();
        while let Some(frame) = response.body_mut().data().await {
            let frame = frame.ok()?;
            if body.len() + frame.len() > MAX_BODY {
                return None;
            }
            body.extend_from_slice(&frame);
        }
        serde_json::from_slice(&body).ok()
    };
    tokio::time::timeout(timeout, fetch).await.ok().flatten()
}
