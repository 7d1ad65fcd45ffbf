//! `GET /v1/models` response.

use serde::{Deserialize, Serialize};

/// The list of served models.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelList {
    /// Always `"list"`.
    #[serde(default)]
    pub object: String,
    /// The models.
    pub data: Vec<ModelCard>,
}

/// One served model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelCard {
    /// Model name to put in requests.
    pub id: String,
    /// Always `"model"`.
    #[serde(default)]
    pub object: String,
    /// Unix time the model was loaded.
    #[serde(default)]
    pub created: u64,
    /// Owner string.
    #[serde(default)]
    pub owned_by: String,
    /// Maximum context length (vLLM extension).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_model_len: Option<u64>,
}
