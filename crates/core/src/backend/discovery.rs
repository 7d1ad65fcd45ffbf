//! Asking a target what it serves: `GET {api root}/models`, so `--model` can be left out.

use std::time::Duration;

use bytes::Bytes;
use goodput_protocol::models::ModelList;
use http_body_util::Full;

use crate::http::HttpClient;
use crate::record::Exchange;

/// Largest `/models` body read.
const MAX_MODELS_BODY: usize = 1 << 20;

/// Why the served models could not be listed.
#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    /// The request failed.
    #[error("GET {url} failed: {message}")]
    Request {
        /// The URL asked.
        url: String,
        /// What went wrong.
        message: String,
    },
    /// The answer is not a model list, or lists none.
    #[error("GET {url} did not list any model ({message}); pass --model")]
    NoModel {
        /// The URL asked.
        url: String,
        /// What was wrong with the answer.
        message: String,
    },
}

/// The ids of the models `client`'s target serves, in its order.
pub async fn list_models(
    client: &HttpClient,
    timeout: Duration,
) -> Result<Vec<String>, DiscoveryError> {
    let url = client.target().url("models");
    let request_error = |message: String| DiscoveryError::Request {
        url: url.clone(),
        message,
    };
    let request = http::Request::get(client.target().endpoint("models"))
        .body(Full::new(Bytes::new()))
        .map_err(|e| request_error(e.to_string()))?;
    let fetch = async {
        let mut exchange = Exchange::default();
        let mut response = client
            .send(request, &mut exchange)
            .await
            .map_err(|f| request_error(f.message))?;
        let status = response.status();
        let mut body = Vec::new();
        while let Some(frame) = response.body_mut().data().await {
            let frame = frame.map_err(|e| request_error(e.to_string()))?;
            if body.len() + frame.len() > MAX_MODELS_BODY {
                return Err(request_error("the answer is larger than 1 MiB".into()));
            }
            body.extend_from_slice(&frame);
        }
        if !status.is_success() {
            return Err(request_error(format!("HTTP {status}")));
        }
        Ok(body)
    };
    let body = tokio::time::timeout(timeout, fetch)
        .await
        .map_err(|_| request_error(format!("no answer within {timeout:?}")))??;
    let no_model = |message: String| DiscoveryError::NoModel {
        url: url.clone(),
        message,
    };
    let list: ModelList = serde_json::from_slice(&body).map_err(|e| no_model(e.to_string()))?;
    let ids: Vec<String> = list.data.into_iter().map(|card| card.id).collect();
    if ids.is_empty() {
        return Err(no_model("empty list".into()));
    }
    Ok(ids)
}
