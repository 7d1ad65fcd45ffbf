//! Counting tokens with the target's own `POST /tokenize`, for models whose tokenizer is not on
//! disk, and [`LengthCounter`], which counts workload texts before a run with either a local
//! [`TokenCounter`] or the remote endpoint (never on the hot path).
//!
//! The endpoint sits at the server root (the API root without its version segment:
//! `http://host:8000/v1` → `http://host:8000/tokenize`). Three shapes are spoken:
//!
//! | API | body | answer |
//! |---|---|---|
//! | vLLM (and the simulator) | `{"model", "prompt", "add_special_tokens": false}` | `{"count", "tokens", …}` |
//! | llama.cpp | `{"content"}` | `{"tokens": […]}` |
//! | TGI | `{"inputs"}` | `[{"id", "text", …}, …]` |
//!
//! [`RemoteTokenizer::connect`] tries them in that order (unless one is named) and keeps the
//! first that answers with a count.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{CONTENT_TYPE, HeaderMap, HeaderValue};
use http::{Method, Request, Uri};
use http_body_util::Full;
use serde_json::{Value, json};

use super::vocabulary::{Calibration, PromptVocabulary, VocabularyError};
use crate::http::HttpClient;
use crate::record::Exchange;
use crate::tokens::TokenCounter;

/// Largest answer read from `/tokenize`.
const MAX_ANSWER_BYTES: usize = 16 << 20;
/// Requests in flight while counting many texts.
const PARALLEL_REQUESTS: usize = 8;
/// Longest wait for one answer.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// Which `/tokenize` dialect a server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenizeApi {
    /// vLLM (also SGLang's and the simulator's).
    Vllm,
    /// llama.cpp server.
    LlamaCpp,
    /// Hugging Face text-generation-inference.
    Tgi,
}

impl TokenizeApi {
    /// Every dialect, in the order they are tried.
    pub const ALL: [TokenizeApi; 3] = [TokenizeApi::Vllm, TokenizeApi::LlamaCpp, TokenizeApi::Tgi];

    /// `vllm`, `llamacpp` or `tgi`.
    pub fn as_str(self) -> &'static str {
        match self {
            TokenizeApi::Vllm => "vllm",
            TokenizeApi::LlamaCpp => "llamacpp",
            TokenizeApi::Tgi => "tgi",
        }
    }

    /// A dialect by name.
    pub fn by_name(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|api| api.as_str() == name.trim().to_ascii_lowercase().replace(['-', '.'], ""))
    }

    fn body(self, model: &str, text: &str) -> Value {
        match self {
            TokenizeApi::Vllm => {
                json!({"model": model, "prompt": text, "add_special_tokens": false})
            }
            TokenizeApi::LlamaCpp => json!({"content": text}),
            TokenizeApi::Tgi => json!({"inputs": text}),
        }
    }
}

/// A `/tokenize` call that failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "POST {url}: {message} (the target's /tokenize is used because of --tokenizer server; \
     use --tokenizer cl100k_base or a local tokenizer.json when it has none)"
)]
pub struct TokenizeError {
    /// Where it was sent.
    pub url: String,
    /// What went wrong.
    pub message: String,
}

/// The target's `/tokenize`, spoken in one dialect.
#[derive(Clone)]
pub struct RemoteTokenizer {
    client: HttpClient,
    uri: Uri,
    url: String,
    api: TokenizeApi,
    model: String,
    headers: HeaderMap,
}

impl fmt::Debug for RemoteTokenizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RemoteTokenizer")
            .field("url", &self.url)
            .field("api", &self.api)
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

impl RemoteTokenizer {
    /// Finds the target's `/tokenize` (trying `api`, or every dialect in turn). `headers` are
    /// added to every request (authorization).
    pub async fn connect(
        client: HttpClient,
        model: &str,
        headers: HeaderMap,
        api: Option<TokenizeApi>,
    ) -> Result<Self, TokenizeError> {
        let target = client.target();
        let root = target
            .api_root()
            .rsplit_once('/')
            .map_or("", |(parent, _)| parent);
        let path = format!("{root}/tokenize");
        let url = format!(
            "{}://{}{path}",
            if target.is_https() { "https" } else { "http" },
            target.authority()
        );
        let uri: Uri = path.parse().map_err(|_| TokenizeError {
            url: url.clone(),
            message: "not a valid path".into(),
        })?;
        let mut tokenizer = RemoteTokenizer {
            client,
            uri,
            url,
            api: TokenizeApi::Vllm,
            model: model.to_string(),
            headers,
        };
        let candidates = api.map_or(TokenizeApi::ALL.to_vec(), |api| vec![api]);
        let mut failures = Vec::new();
        for candidate in candidates {
            tokenizer.api = candidate;
            match tokenizer.count("hello world").await {
                Ok(count) if count > 0 => return Ok(tokenizer),
                Ok(_) => failures.push(format!("{}: counted nothing", candidate.as_str())),
                Err(error) => failures.push(format!("{}: {}", candidate.as_str(), error.message)),
            }
        }
        Err(tokenizer.error(format!("no dialect answered ({})", failures.join("; "))))
    }

    /// `server:vllm`, `server:llamacpp` or `server:tgi`.
    pub fn name(&self) -> String {
        format!("server:{}", self.api.as_str())
    }

    /// The dialect in use.
    pub fn api(&self) -> TokenizeApi {
        self.api
    }

    fn error(&self, message: impl Into<String>) -> TokenizeError {
        TokenizeError {
            url: self.url.clone(),
            message: message.into(),
        }
    }

    /// Tokens in `text`, as the server counts them.
    pub async fn count(&self, text: &str) -> Result<u64, TokenizeError> {
        let body = serde_json::to_vec(&self.api.body(&self.model, text))
            .map_err(|e| self.error(e.to_string()))?;
        let mut request = Request::new(Full::new(Bytes::from(body)));
        *request.method_mut() = Method::POST;
        *request.uri_mut() = self.uri.clone();
        *request.headers_mut() = self.headers.clone();
        request
            .headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let answer = tokio::time::timeout(REQUEST_TIMEOUT, self.exchange(request))
            .await
            .map_err(|_| self.error(format!("no answer within {REQUEST_TIMEOUT:?}")))??;
        count_in(&answer).ok_or_else(|| self.error("the answer holds no token count or list"))
    }

    async fn exchange(&self, request: Request<Full<Bytes>>) -> Result<Value, TokenizeError> {
        let mut exchange = Exchange::default();
        let mut response = self
            .client
            .send(request, &mut exchange)
            .await
            .map_err(|failure| self.error(failure.message))?;
        let status = response.status();
        let mut body = Vec::new();
        while let Some(frame) = response.body_mut().data().await {
            let frame = frame.map_err(|e| self.error(e.to_string()))?;
            if body.len() + frame.len() > MAX_ANSWER_BYTES {
                return Err(self.error("the answer is larger than 16 MiB"));
            }
            body.extend_from_slice(&frame);
        }
        if !status.is_success() {
            let text = String::from_utf8_lossy(&body);
            let text: String = text.chars().take(300).collect();
            return Err(self.error(format!("HTTP {status}: {text}")));
        }
        serde_json::from_slice(&body).map_err(|e| self.error(format!("not JSON: {e}")))
    }

    /// Counts every text, a few requests at a time, in order.
    pub async fn count_all(&self, texts: &[String]) -> Result<Vec<u64>, TokenizeError> {
        let mut counts = Vec::with_capacity(texts.len());
        for batch in texts.chunks(PARALLEL_REQUESTS) {
            let answers =
                futures_util::future::join_all(batch.iter().map(|text| self.count(text))).await;
            for answer in answers {
                counts.push(answer?);
            }
        }
        Ok(counts)
    }

    /// The prompt vocabulary of the server's tokenizer (see `vocabulary.rs`).
    pub async fn calibrate(&self) -> Result<PromptVocabulary, CalibrationError> {
        let mut calibration = Calibration::new(&self.name());
        while let Some(texts) = calibration.texts() {
            let counts = self.count_all(&texts).await?;
            calibration.feed(&counts)?;
        }
        Ok(calibration.finish()?)
    }
}

/// The token count in a `/tokenize` answer of any dialect.
fn count_in(answer: &Value) -> Option<u64> {
    match answer {
        Value::Array(tokens) => Some(tokens.len() as u64),
        Value::Object(map) => match (map.get("count"), map.get("tokens")) {
            (Some(count), _) => count.as_u64(),
            (None, Some(Value::Array(tokens))) => Some(tokens.len() as u64),
            _ => None,
        },
        _ => None,
    }
}

/// Calibration against a remote tokenizer failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CalibrationError {
    /// A request failed.
    #[error(transparent)]
    Tokenize(#[from] TokenizeError),
    /// The counts do not allow exact lengths.
    #[error(transparent)]
    Vocabulary(#[from] VocabularyError),
}

/// Counts workload texts before a run: locally, or with the target's `/tokenize`.
#[derive(Debug, Clone)]
pub enum LengthCounter {
    /// A local tokenizer.
    Local(Arc<dyn TokenCounter>),
    /// The target's endpoint.
    Remote(Box<RemoteTokenizer>),
}

impl LengthCounter {
    /// The tokenizer's name for reports.
    pub fn name(&self) -> String {
        match self {
            LengthCounter::Local(counter) => counter.name().to_string(),
            LengthCounter::Remote(remote) => remote.name(),
        }
    }

    /// Counts every text, in order.
    pub async fn count_all(&self, texts: &[String]) -> Result<Vec<u64>, TokenizeError> {
        match self {
            LengthCounter::Local(counter) => Ok(texts.iter().map(|t| counter.count(t)).collect()),
            LengthCounter::Remote(remote) => remote.count_all(texts).await,
        }
    }

    /// The prompt vocabulary of this tokenizer.
    pub async fn vocabulary(&self) -> Result<PromptVocabulary, CalibrationError> {
        match self {
            LengthCounter::Local(counter) => Ok(PromptVocabulary::calibrate(counter.as_ref())?),
            LengthCounter::Remote(remote) => remote.calibrate().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_read_from_every_dialect() {
        assert_eq!(count_in(&json!({"count": 7, "tokens": [1, 2]})), Some(7));
        assert_eq!(count_in(&json!({"tokens": [1, 2, 3]})), Some(3));
        assert_eq!(count_in(&json!([{"id": 1}, {"id": 2}])), Some(2));
        assert_eq!(count_in(&json!({"error": "no"})), None);
        assert_eq!(
            TokenizeApi::by_name("llama.cpp"),
            Some(TokenizeApi::LlamaCpp)
        );
        assert_eq!(TokenizeApi::by_name("TGI"), Some(TokenizeApi::Tgi));
    }
}
