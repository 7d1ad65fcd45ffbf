//! Multi-turn sessions: a [`Conversations`] workload hands the runner a script per session —
//! an optional system prompt and the user turns, each with its answer length and the think
//! time before it — and the runner plays it: each turn is sent after the previous reply plus
//! the think time, with the whole history, *including the server's actual replies*, so the
//! context grows as it does in production.
//!
//! [`SyntheticConversations`] draws the number of turns, each user message's length and each
//! answer's length from [`LengthDistribution`]s, seeded by (seed, session, turn).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use goodput_protocol::ChatMessage;
use rand::RngExt;
use serde_json::json;

use super::Workload;
use super::agent::AgentTurns;
use super::generated::{SharedPrefix, stream};
use super::lengths::LengthDistribution;
use super::vocabulary::PromptVocabulary;
use crate::backend::{RequestInput, RequestSpec};
use crate::units::{format_duration, parse_duration};

const TURNS: u64 = 0x7u64 << 40;
const TURN_LENGTHS: u64 = 0x7e_4d;
const TURN_TEXT: u64 = 0x7e_7e;
const THINK: u64 = 0x7_1c;
/// Separates the tool-latency draws from the think-time draws of the same turn.
const TOOL: u64 = 0x700_0000_0000;

/// Longest think time drawn (one day).
pub const MAX_THINK_TIME: Duration = Duration::from_secs(86_400);

/// One user turn of a session.
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    /// What the user says.
    pub user: String,
    /// Tokens of `user`, when counted.
    pub user_tokens: Option<u64>,
    /// `max_tokens` of the answer.
    pub max_output_tokens: Option<u64>,
    /// Wait between the previous reply's end and this turn (ignored for the first turn).
    pub think_time: Duration,
    /// The turn feeds a tool's result back (`user` is the result): the previous reply is sent
    /// as a tool call and this turn as its `tool` message; `think_time` is the tool's latency.
    pub tool_result: bool,
}

/// The script of one session.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Conversation {
    /// System prompt and its token count.
    pub system: Option<(String, Option<u64>)>,
    /// User turns, in order.
    pub turns: Vec<Turn>,
}

impl Conversation {
    /// The first turn as a request (no history yet).
    pub fn opening_request(&self, index: u64) -> RequestSpec {
        let mut messages = Vec::new();
        let mut tokens = Some(0u64);
        if let Some((system, count)) = &self.system {
            messages.push(ChatMessage::new("system", system.clone()));
            tokens = tokens.zip(*count).map(|(a, b)| a + b);
        }
        let first = self.turns.first();
        if let Some(turn) = first {
            messages.push(ChatMessage::new("user", turn.user.clone()));
            tokens = tokens.zip(turn.user_tokens).map(|(a, b)| a + b);
        }
        RequestSpec {
            index,
            input: RequestInput::Messages(messages),
            expected_input_tokens: tokens,
            max_output_tokens: first.and_then(|t| t.max_output_tokens),
            turn: Some(0),
            tags: Default::default(),
        }
    }
}

/// A workload of multi-turn sessions.
pub trait Conversations: Send + Sync + fmt::Debug {
    /// The script of session `session` (deterministic).
    fn conversation(&self, session: u64) -> Conversation;
}

/// Time between a reply and the user's next turn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ThinkTime {
    /// Always the same.
    Fixed(Duration),
    /// Exponentially distributed with this mean.
    Exponential(Duration),
}

impl ThinkTime {
    /// `2s` (fixed) or `exp:2s` (exponential with mean 2 s).
    pub fn parse(text: &str) -> Result<ThinkTime, String> {
        let text = text.trim();
        let (exponential, value) = match text.strip_prefix("exp:") {
            Some(mean) => (true, mean),
            None => (false, text),
        };
        let duration =
            parse_duration(value).map_err(|e| format!("{e}; or exp:2s for exponential"))?;
        Ok(if exponential {
            ThinkTime::Exponential(duration)
        } else {
            ThinkTime::Fixed(duration)
        })
    }

    /// The think time before turn `turn` of `session` (at most [`MAX_THINK_TIME`]).
    pub fn draw(&self, seed: u64, session: u64, turn: u64) -> Duration {
        match *self {
            ThinkTime::Fixed(duration) => duration.min(MAX_THINK_TIME),
            ThinkTime::Exponential(mean) => {
                let mut rng = stream(seed, THINK, session.wrapping_mul(1 << 20) ^ turn);
                let u: f64 = rng.random();
                let seconds = mean.as_secs_f64() * -(1.0 - u).ln();
                Duration::try_from_secs_f64(seconds)
                    .unwrap_or(MAX_THINK_TIME)
                    .min(MAX_THINK_TIME)
            }
        }
    }
}

impl fmt::Display for ThinkTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ThinkTime::Fixed(d) => f.write_str(&format_duration(*d)),
            ThinkTime::Exponential(d) => write!(f, "exp:{}", format_duration(*d)),
        }
    }
}

/// Synthetic sessions: turns, user-message and answer lengths from distributions.
#[derive(Debug, Clone)]
pub struct SyntheticConversations {
    /// Turns per session.
    pub turns: LengthDistribution,
    /// Length of each user message.
    pub user_tokens: LengthDistribution,
    /// Length of each answer (`max_tokens`).
    pub output_tokens: Option<LengthDistribution>,
    /// Think time between a reply and the next turn.
    pub think_time: ThinkTime,
    /// Shared system prompts.
    pub prefix: Option<SharedPrefix>,
    /// Agentic sessions: turns that are tool results.
    pub agent: Option<AgentTurns>,
    /// Words that build exact lengths.
    pub vocabulary: Arc<PromptVocabulary>,
    /// Seed.
    pub seed: u64,
}

impl Conversations for SyntheticConversations {
    fn conversation(&self, session: u64) -> Conversation {
        let count = self.turns.sample(&mut stream(self.seed, TURNS, session));
        let system = self.prefix.map(|prefix| {
            let group = prefix.group_of(self.seed, session);
            let text = prefix.text(&self.vocabulary, self.seed, group);
            (text, Some(u64::from(prefix.tokens)))
        });
        let turns = (0..u64::from(count))
            .map(|turn| {
                let key = session.wrapping_mul(1 << 20) ^ turn;
                let mut lengths = stream(self.seed, TURN_LENGTHS, key);
                let tool = self
                    .agent
                    .as_ref()
                    .filter(|agent| agent.is_tool_result(self.seed, session, turn));
                let user_tokens = match tool {
                    Some(agent) => agent.result_tokens.sample(&mut lengths),
                    None => self.user_tokens.sample(&mut lengths),
                };
                let output = self.output_tokens.as_ref().map(|d| d.sample(&mut lengths));
                let user = self
                    .vocabulary
                    .prompt(&mut stream(self.seed, TURN_TEXT, key), user_tokens);
                let think_time = match tool {
                    Some(agent) => agent.tool_latency.draw(self.seed, session ^ TOOL, turn),
                    None => self.think_time.draw(self.seed, session, turn),
                };
                Turn {
                    user,
                    user_tokens: Some(u64::from(user_tokens)),
                    max_output_tokens: output.map(u64::from),
                    think_time,
                    tool_result: tool.is_some(),
                }
            })
            .collect();
        Conversation { system, turns }
    }
}

impl Workload for SyntheticConversations {
    fn request(&self, index: u64) -> RequestSpec {
        self.conversation(index).opening_request(index)
    }

    fn describe(&self) -> BTreeMap<String, serde_json::Value> {
        let mut description = BTreeMap::from([
            ("kind".to_string(), json!("synthetic_sessions")),
            ("turns".to_string(), json!(self.turns.to_string())),
            (
                "input_tokens".to_string(),
                json!(self.user_tokens.to_string()),
            ),
            (
                "output_tokens".to_string(),
                json!(self.output_tokens.as_ref().map(ToString::to_string)),
            ),
            ("think_time".to_string(), json!(self.think_time.to_string())),
            ("tokenizer".to_string(), json!(self.vocabulary.tokenizer())),
            ("seed".to_string(), json!(self.seed)),
        ]);
        if let Some(prefix) = &self.prefix {
            description.insert("shared_prefix".into(), prefix.describe());
        }
        if let Some(agent) = &self.agent {
            description.insert("agent".into(), agent.describe());
        }
        description
    }

    fn conversations(&self) -> Option<&dyn Conversations> {
        Some(self)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn sessions_are_reproducible_and_follow_their_distributions() {
        let sessions = SyntheticConversations {
            turns: "uniform:2..5".parse().unwrap(),
            user_tokens: "32".parse().unwrap(),
            output_tokens: Some("16".parse().unwrap()),
            think_time: ThinkTime::parse("exp:1s").unwrap(),
            prefix: Some(SharedPrefix {
                groups: 2,
                tokens: 20,
            }),
            agent: None,
            vocabulary: Arc::new(PromptVocabulary::cl100k()),
            seed: 3,
        };
        let first = sessions.conversation(7);
        assert_eq!(sessions.conversation(7), first);
        assert!((2..=5).contains(&first.turns.len()));
        assert!(first.turns.iter().all(|t| t.user_tokens == Some(32)));
        assert_ne!(first.turns[0].user, first.turns[1].user);
        let opening = sessions.request(7);
        assert_eq!(opening.turn, Some(0));
        assert_eq!(opening.expected_input_tokens, Some(52));
        let mean_think: f64 = (0..2000)
            .map(|s| sessions.think_time.draw(3, s, 1).as_secs_f64())
            .sum::<f64>()
            / 2000.0;
        assert!((mean_think - 1.0).abs() < 0.08, "{mean_think}");
    }

    #[test]
    fn think_times_parse() {
        assert_eq!(
            ThinkTime::parse("250ms").unwrap(),
            ThinkTime::Fixed(Duration::from_millis(250))
        );
        assert_eq!(ThinkTime::parse("exp:2s").unwrap().to_string(), "exp:2s");
        assert!(ThinkTime::parse("soon").is_err());
    }
}
