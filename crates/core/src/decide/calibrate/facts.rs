//! What a server says about its own limits and model: llama.cpp's `/props` (slots, context per
//! slot, batch size), its chat prompts' common start (`/apply-template`, `/tokenize`) and its
//! `/v1/models` entries (vLLM's `max_model_len`; llama.cpp's `meta`: width, vocabulary,
//! parameter count, weight format), and the limits its Prometheus `/metrics` state (vLLM's KV
//! cache and scheduler, SGLang's and TGI's KV cache: [`super::metric_limits`]).
//! Every figure is optional: other servers answer none of it.

use std::time::Duration;

use bytes::Bytes;
use http::Uri;
use http_body_util::Full;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::metric_limits;
use crate::http::HttpClient;
use crate::observe::server::concepts::Flavour;
use crate::observe::server::prometheus;
use crate::observe::server::scrape::{default_metrics_url, split_metrics_url};
use crate::record::Exchange;

/// Largest body read.
const MAX_BODY: usize = 4 << 20;

/// A server's own account of its limits and model.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ServerFacts {
    /// Sequences served at once (`/props` `total_slots`; `goodput calibrate` measures them
    /// with [`super::batch_limit`] when the server does not say).
    pub slots: Option<u32>,
    /// Whether the slots are llama.cpp's (reported by its `/props`): pinnable with `id_slot`,
    /// and each with a KV stream of its own that splits every step into micro-batches by slot
    /// unless they share one cache ([`super::slot_split`] tells where a micro-batch costs,
    /// [`super::kv_sharing`] where it does not). Slots found by the waves or
    /// stated in `/metrics` are another engine's: one batch a step.
    #[serde(default)]
    pub llama_slots: bool,
    /// Context of one slot, tokens (`/props` `default_generation_settings.n_ctx`, else the
    /// model card's `max_model_len`).
    pub context_per_slot: Option<u32>,
    /// Tokens of one engine step (`n_batch`), when reported (`goodput calibrate` measures it
    /// with [`super::step_budget`] when the server does not say).
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
    /// Tokens every chat prompt starts with, BOS included (llama.cpp's `/apply-template` and
    /// `/tokenize` of two one-message chats: their common prefix).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_prefix_tokens: Option<u32>,
    /// Two requests decoding in slots 0 and 1, then 0 and 2 (llama.cpp's `id_slot`): whether
    /// the server splits its steps by slot ([`super::slot_split`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot_split: Option<super::SlotSplit>,
    /// Whether llama.cpp's slots share one KV cache, where the slot split could not tell
    /// ([`super::kv_sharing`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_cache: Option<super::CacheReading>,
    /// The server family its `/metrics` names belong to (vLLM, SGLang, TGI, llama.cpp, the
    /// simulator), when it serves them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<Flavour>,
    /// Tokens its KV cache holds, when its metrics say ([`super::metric_limits`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_tokens: Option<u64>,
    /// Whether it reuses the KV of prompt prefixes it has seen, when its metrics say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_caching: Option<bool>,
    /// Data-parallel engines behind the endpoint, when its metrics show more than one (vLLM's
    /// `engine` labels): the sequences and KV cache read are theirs together, the step budget
    /// one engine's; the simulator runs them as that many replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engines: Option<u32>,
    /// Which queued request a freed slot takes, when the queue-order probe read it
    /// ([`super::queue_order`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_order: Option<goodput_protocol::QueueOrder>,
    /// Where each figure came from, for the report.
    pub sources: Vec<String>,
}

/// Asks `client`'s server for its facts; what it does not answer stays `None`.
pub async fn server_facts(client: &HttpClient, timeout: Duration) -> ServerFacts {
    let mut facts = ServerFacts::default();
    if let Some(props) = get_json(client, "/props", timeout).await {
        let settings = &props["default_generation_settings"];
        facts.slots = as_u32(&props["total_slots"]);
        facts.llama_slots = facts.slots.is_some();
        facts.context_per_slot = as_u32(&settings["n_ctx"]);
        facts.batch_tokens = as_u32(&settings["n_batch"]).or(as_u32(&props["n_batch"]));
        facts.ubatch_tokens = as_u32(&settings["n_ubatch"]).or(as_u32(&props["n_ubatch"]));
        facts.sources.push("/props".into());
        facts.shared_prefix_tokens = shared_prefix_tokens(client, timeout).await;
        if facts.shared_prefix_tokens.is_some() {
            facts.sources.push("/apply-template, /tokenize".into());
        }
    }
    let models = client.target().endpoint("models").to_string();
    let list = get_json(client, &models, timeout).await;
    // vLLM (and the simulator) give every model card its context.
    if facts.context_per_slot.is_none()
        && let Some(context) = list
            .as_ref()
            .and_then(|list| as_u32(&list["data"][0]["max_model_len"]))
    {
        facts.context_per_slot = Some(context);
        facts.sources.push(format!("{models} (max_model_len)"));
    }
    if let Some(list) = list
        && let Some(meta) = list["data"].get(0).map(|card| &card["meta"])
        && meta.is_object()
    {
        facts.hidden = as_u32(&meta["n_embd"]);
        facts.vocab = as_u32(&meta["n_vocab"]);
        facts.params = meta["n_params"].as_f64();
        facts.weight_format = meta["ftype"].as_str().map(str::to_string);
        facts.sources.push(format!("{models} (meta)"));
    }
    with_metric_limits(client, &mut facts, timeout).await;
    facts
}

/// What the server's `/metrics` (its root's, beside `/v1`) say of its limits, where `/props`
/// did not: its sequences and step budget (vLLM's scheduler), its KV cache, prefix caching,
/// and its family.
async fn with_metric_limits(client: &HttpClient, facts: &mut ServerFacts, timeout: Duration) {
    let url = default_metrics_url(client.target());
    let Ok((_, path)) = split_metrics_url(&url) else {
        return;
    };
    let Some(body) = get_body(client, &path, timeout).await else {
        return;
    };
    let limits = metric_limits(&prometheus::parse(&body));
    let mut read = Vec::new();
    if facts.slots.is_none() && limits.max_seqs.is_some() {
        facts.slots = limits.max_seqs;
        read.push("max_num_seqs");
    }
    if facts.batch_tokens.is_none() && limits.batch_tokens.is_some() {
        facts.batch_tokens = limits.batch_tokens;
        read.push("max_num_batched_tokens");
    }
    if limits.kv_tokens.is_some() {
        read.push("KV cache");
    }
    if limits.prefix_caching.is_some() {
        read.push("prefix caching");
    }
    facts.engine = limits.engine;
    facts.kv_tokens = limits.kv_tokens;
    facts.prefix_caching = limits.prefix_caching;
    facts.engines = limits.engines;
    if let Some(engine) = limits.engine {
        let mut what = if read.is_empty() {
            "no limit".to_string()
        } else {
            read.join(", ")
        };
        if let Some(n) = limits.engines {
            what.push_str(&format!(
                "; {n} data-parallel engines, their caches and sequences summed"
            ));
        }
        facts
            .sources
            .push(format!("{path} ({}: {what})", engine.as_str()));
    }
}

fn as_u32(value: &Value) -> Option<u32> {
    value.as_u64().and_then(|v| u32::try_from(v).ok())
}

/// The common prefix, in the server's tokens, of two one-message chats whose texts differ
/// from their first token: what every chat prompt starts with.
async fn shared_prefix_tokens(client: &HttpClient, timeout: Duration) -> Option<u32> {
    let mut prompts = Vec::new();
    for text in ["alpha", "omega"] {
        let chat = json!({"messages": [{"role": "user", "content": text}]});
        let templated = post_json(client, "/apply-template", &chat, timeout).await?;
        let content = json!({"content": templated["prompt"].as_str()?, "add_special": true});
        let tokenized = post_json(client, "/tokenize", &content, timeout).await?;
        let ids: Option<Vec<u64>> = tokenized["tokens"]
            .as_array()?
            .iter()
            .map(Value::as_u64)
            .collect();
        prompts.push(ids?);
    }
    let common = prompts[0]
        .iter()
        .zip(&prompts[1])
        .take_while(|(a, b)| a == b)
        .count();
    u32::try_from(common).ok()
}

/// `POST path` with a JSON `body`, answered as JSON; `None` on any failure.
async fn post_json(
    client: &HttpClient,
    path: &str,
    body: &Value,
    timeout: Duration,
) -> Option<Value> {
    let request = http::Request::post(path.parse::<Uri>().ok()?)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .ok()?;
    fetch_json(client, request, timeout).await
}

/// `GET path` as JSON; `None` on any failure (the figure is then unknown, not an error).
async fn get_json(client: &HttpClient, path: &str, timeout: Duration) -> Option<Value> {
    serde_json::from_slice(&get_body(client, path, timeout).await?).ok()
}

/// `GET path`'s body; `None` on any failure.
async fn get_body(client: &HttpClient, path: &str, timeout: Duration) -> Option<Vec<u8>> {
    let uri: Uri = path.parse().ok()?;
    let request = http::Request::get(uri).body(Full::new(Bytes::new())).ok()?;
    fetch_body(client, request, timeout).await
}

/// Sends `request`, reads its answer as JSON; `None` on any failure or after `timeout`.
async fn fetch_json(
    client: &HttpClient,
    request: http::Request<Full<Bytes>>,
    timeout: Duration,
) -> Option<Value> {
    serde_json::from_slice(&fetch_body(client, request, timeout).await?).ok()
}

/// Sends `request`, reads its successful answer's body (at most [`MAX_BODY`]); `None` on any
/// failure or after `timeout`.
async fn fetch_body(
    client: &HttpClient,
    request: http::Request<Full<Bytes>>,
    timeout: Duration,
) -> Option<Vec<u8>> {
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
        Some(body)
    };
    tokio::time::timeout(timeout, fetch).await.ok().flatten()
}
