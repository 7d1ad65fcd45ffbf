//! OpenAI-style error bodies: `{"error": {"message", "type", "param", "code"}}`.

use serde::{Deserialize, Serialize};

/// The body of an error response, as OpenAI and vLLM send it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApiErrorBody {
    /// The error itself.
    pub error: ApiError,
}

/// One error object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApiError {
    /// Human-readable message.
    pub message: String,
    /// Error class, e.g. `invalid_request_error`, `rate_limit_error`, `server_error`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The request parameter at fault, when there is one.
    #[serde(default)]
    pub param: Option<String>,
    /// Numeric or string code (vLLM sends the HTTP status here).
    #[serde(default)]
    pub code: Option<serde_json::Value>,
}

impl ApiErrorBody {
    /// An error body with the given class, message, optional parameter and status code.
    pub fn new(kind: &str, message: impl Into<String>, param: Option<&str>, status: u16) -> Self {
        ApiErrorBody {
            error: ApiError {
                message: message.into(),
                kind: kind.to_string(),
                param: param.map(str::to_string),
                code: Some(serde_json::Value::from(status)),
            },
        }
    }
}
