//! Shared vocabulary of goodput: the OpenAI-compatible wire types (requests, streamed chunks,
//! usage, error bodies, model lists), the model/accelerator descriptions with their derived
//! roofline figures, KServe v2's gRPC messages (prost), base64, the order a server admits
//! queued requests in, and time on a scaled clock. Used by both the client (`goodput-core`) and
//! the simulator (`goodput-sim`), so neither depends on the other. No I/O and no async here:
//! serde types and arithmetic only.
#![deny(missing_docs)]

pub mod base64;
pub mod chat;
pub mod completions;
pub mod error;
pub mod hardware;
pub mod image;
pub mod models;
pub mod queue;
pub mod stream;
pub mod time_scale;
pub mod usage;
pub mod v2_grpc;
pub mod vocabulary;

pub use chat::{ChatCompletionRequest, ChatMessage, MessageContent, ToolCall};
pub use completions::{CompletionRequest, Prompt};
pub use error::{ApiError, ApiErrorBody};
pub use queue::QueueOrder;
pub use usage::{StreamOptions, Usage};
