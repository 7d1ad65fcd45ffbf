//! How a request ended: [`OutcomeKind`] and, for a failure, [`Failure`].

use std::fmt;

use serde::{Deserialize, Serialize};

/// How a request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutcomeKind {
    /// Completed: a 2xx response whose stream (if any) ended properly.
    Ok,
    /// The server answered with a non-2xx status.
    Http,
    /// The request hit its timeout (`--request-timeout`) or the run's no-progress deadline.
    Timeout,
    /// Connecting, sending or receiving failed (refused, reset, DNS, TLS, closed early).
    Transport,
    /// The server's reply could not be understood (bad SSE, bad JSON, oversized line).
    Protocol,
    /// The server sent an error object inside a 2xx stream.
    StreamError,
    /// The run was stopped (Ctrl-C, deadline) while the request was in flight or queued.
    Cancelled,
    /// goodput could not build the request (e.g. a batch of prompts on the chat API); nothing
    /// was sent.
    Invalid,
    /// An in-process call ([`crate::measure`]) raised an exception or returned an error.
    Error,
}

impl OutcomeKind {
    /// Every kind, in report order.
    pub const ALL: [OutcomeKind; 9] = [
        OutcomeKind::Ok,
        OutcomeKind::Http,
        OutcomeKind::Timeout,
        OutcomeKind::Transport,
        OutcomeKind::Protocol,
        OutcomeKind::StreamError,
        OutcomeKind::Cancelled,
        OutcomeKind::Invalid,
        OutcomeKind::Error,
    ];

    /// The snake_case name used in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            OutcomeKind::Ok => "ok",
            OutcomeKind::Http => "http",
            OutcomeKind::Timeout => "timeout",
            OutcomeKind::Transport => "transport",
            OutcomeKind::Protocol => "protocol",
            OutcomeKind::StreamError => "stream_error",
            OutcomeKind::Cancelled => "cancelled",
            OutcomeKind::Invalid => "invalid",
            OutcomeKind::Error => "error",
        }
    }
}

impl fmt::Display for OutcomeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a request failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    /// Failure class.
    pub kind: OutcomeKind,
    /// HTTP status, for [`OutcomeKind::Http`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// What happened, for people (never contains credentials).
    pub message: String,
}

impl Failure {
    /// A failure of `kind` with a message.
    pub fn new(kind: OutcomeKind, message: impl Into<String>) -> Self {
        Failure {
            kind,
            status: None,
            message: message.into(),
        }
    }

    /// Whether the server turned the request away for overload — HTTP 429 (Too Many
    /// Requests), 503 (Service Unavailable) or 504 (Gateway Timeout) — or it timed out: what
    /// a server that caps its queue, or a gateway in front of one, does past capacity.
    pub fn is_shed(&self) -> bool {
        match self.kind {
            OutcomeKind::Timeout => true,
            OutcomeKind::Http => matches!(self.status, Some(429 | 503 | 504)),
            _ => false,
        }
    }

    /// An HTTP status failure.
    pub fn http(status: u16, message: impl Into<String>) -> Self {
        Failure {
            kind: OutcomeKind::Http,
            status: Some(status),
            message: message.into(),
        }
    }
}
