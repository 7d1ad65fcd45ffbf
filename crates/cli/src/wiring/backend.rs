//! The backend of `--api` (an OpenAI-compatible API, a JSON template for `http`, KServe v2
//! tensors for `v2`) and the model name it sends.

use std::sync::Arc;

use anyhow::{Context, Result, bail};
use goodput_core::backend::Backend;
use goodput_core::backend::openai::{OpenAiBackend, OpenAiConfig};
use goodput_core::backend::template::{TemplateBackend, TemplateConfig};
use goodput_core::backend::v2::{V2Backend, V2Config};
use goodput_core::http::HttpClient;

use super::session::{Endpoint, first_model};
use crate::options::run::{Api, RequestOptions, RunOptions};

/// The model to name: `--model`, the simulator's, else the first the target lists (`--api
/// http` lists nothing: its template names the model, if any).
pub(crate) async fn model_name(
    options: &RunOptions,
    endpoint: &Endpoint,
    client: &HttpClient,
) -> Result<String> {
    let api = options.request.api;
    match options.model.clone().or_else(|| endpoint.model.clone()) {
        Some(model) => Ok(model),
        None if api == Api::Http => Ok(String::new()),
        None if api == Api::V2 => {
            bail!("--api v2 needs --model: the model of /v2/models/{{model}}/infer")
        }
        None => first_model(client).await,
    }
}

/// The backend of `--api`: a JSON template (`http`), KServe v2 tensors (`v2`) or an
/// OpenAI-compatible API.
pub(crate) fn backend(
    request: &RequestOptions,
    openai: OpenAiConfig,
    client: HttpClient,
) -> Result<Arc<dyn Backend>> {
    if let Some(http) = request.template.clone() {
        let config = TemplateConfig {
            template: http.template,
            items: http.items,
            stream: http.stream,
            tokens: http.tokens,
            headers: openai.headers,
            api_key: openai.api_key,
            max_body_bytes: openai.max_body_bytes,
        };
        let backend = TemplateBackend::new(config, client).context("backend configuration")?;
        return Ok(Arc::new(backend));
    }
    if let Some(source) = request.tensors.clone() {
        let config = V2Config {
            model: openai.model,
            source,
            headers: openai.headers,
            api_key: openai.api_key,
            max_body_bytes: openai.max_body_bytes,
        };
        let backend = V2Backend::new(config, client).context("backend configuration")?;
        return Ok(Arc::new(backend));
    }
    Ok(Arc::new(
        OpenAiBackend::new(openai, client).context("backend configuration")?,
    ))
}
