//! Datasets made ready to send: every text counted once, before the run, with the run's
//! tokenizer (or the target's `/tokenize`), so `Workload::request` stays cheap and
//! deterministic. [`DatasetWorkload`] sends prompts JSONL records in file order (cycling);
//! [`DatasetConversations`] plays ShareGPT conversations and agent traces as multi-turn
//! sessions.
//!
//! Answer lengths: the record's `output_tokens` (prompts) or the token count of the dataset's
//! reference reply (ShareGPT, agent traces); when there is none, a draw from the fallback distribution
//! (`--output-tokens`).

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::json;

use super::Workload;
use super::agent_trace::AgentTraceSession;
use super::dataset::{DatasetPrompt, PromptRecord, SharegptConversation};
use super::generated::stream;
use super::lengths::LengthDistribution;
use super::session::{Conversation, Conversations, ThinkTime, Turn};
use super::source::Loaded;
use super::tokenize::{LengthCounter, TokenizeError};
use crate::backend::{RequestInput, RequestSpec};

const FALLBACK: u64 = 0xfa11;

/// What every dataset description holds.
fn describe_file<T>(
    kind: &str,
    loaded: &Loaded<T>,
    counter: &LengthCounter,
    fallback: Option<&LengthDistribution>,
    seed: u64,
) -> BTreeMap<String, serde_json::Value> {
    BTreeMap::from([
        ("kind".to_string(), json!(kind)),
        ("path".to_string(), json!(loaded.path)),
        ("records".to_string(), json!(loaded.records.len())),
        ("skipped_invalid".to_string(), json!(loaded.skipped)),
        (
            "first_skipped".to_string(),
            json!(loaded.first_skipped.as_ref().map(ToString::to_string)),
        ),
        ("tokenizer".to_string(), json!(counter.name())),
        (
            "output_tokens_fallback".to_string(),
            json!(fallback.map(ToString::to_string)),
        ),
        ("seed".to_string(), json!(seed)),
    ])
}

/// A prompt ready to send.
#[derive(Debug, Clone)]
struct PreparedPrompt {
    input: RequestInput,
    tokens: u64,
    output_tokens: Option<u32>,
}

/// Prompts from a dataset, in file order, cycling.
#[derive(Debug, Clone)]
pub struct DatasetWorkload {
    entries: Vec<PreparedPrompt>,
    fallback: Option<LengthDistribution>,
    seed: u64,
    description: BTreeMap<String, serde_json::Value>,
}

impl DatasetWorkload {
    /// Counts every prompt of `loaded` with `counter`.
    pub async fn prepare(
        loaded: Loaded<PromptRecord>,
        counter: &LengthCounter,
        fallback: Option<LengthDistribution>,
        seed: u64,
    ) -> Result<Self, TokenizeError> {
        let mut texts = Vec::new();
        for record in &loaded.records {
            match &record.prompt {
                DatasetPrompt::Text(text) => texts.push(text.clone()),
                DatasetPrompt::Messages(messages) => {
                    texts.extend(messages.iter().map(|m| m.content.text()));
                }
            }
        }
        let counts = counter.count_all(&texts).await?;
        let mut counts = counts.into_iter();
        let description = describe_file("dataset", &loaded, counter, fallback.as_ref(), seed);
        let entries = loaded
            .records
            .into_iter()
            .map(|record| {
                let (input, tokens) = match record.prompt {
                    DatasetPrompt::Text(text) => {
                        (RequestInput::Text(text), counts.next().unwrap_or(0))
                    }
                    DatasetPrompt::Messages(messages) => {
                        let tokens = messages.iter().map(|_| counts.next().unwrap_or(0)).sum();
                        (RequestInput::Messages(messages), tokens)
                    }
                };
                PreparedPrompt {
                    input,
                    tokens,
                    output_tokens: record.output_tokens,
                }
            })
            .collect();
        let mut workload = DatasetWorkload {
            entries,
            fallback,
            seed,
            description,
        };
        workload
            .description
            .insert("format".into(), json!("prompts"));
        Ok(workload)
    }

    /// Records in the dataset.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the dataset is empty (never, once loaded).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// The answer length: the dataset's, else a draw from the fallback.
fn output_or_fallback(
    output: Option<u32>,
    fallback: Option<&LengthDistribution>,
    seed: u64,
    key: u64,
) -> Option<u64> {
    output
        .or_else(|| fallback.map(|d| d.sample(&mut stream(seed, FALLBACK, key))))
        .map(u64::from)
}

impl Workload for DatasetWorkload {
    fn request(&self, index: u64) -> RequestSpec {
        let position = usize::try_from(index).unwrap_or(0) % self.entries.len().max(1);
        let Some(entry) = self.entries.get(position) else {
            return RequestSpec {
                index,
                input: RequestInput::Text(String::new()),
                expected_input_tokens: None,
                max_output_tokens: None,
                turn: None,
                tags: Default::default(),
            };
        };
        RequestSpec {
            index,
            input: entry.input.clone(),
            expected_input_tokens: Some(entry.tokens),
            max_output_tokens: output_or_fallback(
                entry.output_tokens,
                self.fallback.as_ref(),
                self.seed,
                index,
            ),
            turn: None,
            tags: Default::default(),
        }
    }

    fn describe(&self) -> BTreeMap<String, serde_json::Value> {
        self.description.clone()
    }
}

/// ShareGPT conversations or agent traces played as sessions, in file order, cycling.
#[derive(Debug, Clone)]
pub struct DatasetConversations {
    conversations: Vec<Conversation>,
    /// Per conversation and turn, the recorded wait before it (agent traces); drawn otherwise.
    waits: Vec<Vec<Option<Duration>>>,
    think_time: ThinkTime,
    fallback: Option<LengthDistribution>,
    seed: u64,
    description: BTreeMap<String, serde_json::Value>,
}

impl DatasetConversations {
    /// Counts every text of `loaded` with `counter`.
    pub async fn prepare(
        loaded: Loaded<SharegptConversation>,
        counter: &LengthCounter,
        fallback: Option<LengthDistribution>,
        think_time: ThinkTime,
        seed: u64,
    ) -> Result<Self, TokenizeError> {
        let mut texts = Vec::new();
        for conversation in &loaded.records {
            texts.extend(conversation.system.iter().cloned());
            for turn in &conversation.turns {
                texts.push(turn.user.clone());
                texts.extend(turn.reference.iter().cloned());
            }
        }
        let mut counts = counter.count_all(&texts).await?.into_iter();
        let mut description = describe_file("sharegpt", &loaded, counter, fallback.as_ref(), seed);
        let turns: usize = loaded.records.iter().map(|c| c.turns.len()).sum();
        description.insert("turns".into(), json!(turns));
        description.insert("think_time".into(), json!(think_time.to_string()));
        let conversations = loaded
            .records
            .into_iter()
            .map(|conversation| Conversation {
                system: conversation
                    .system
                    .map(|text| (text, Some(counts.next().unwrap_or(0)))),
                turns: conversation
                    .turns
                    .into_iter()
                    .map(|turn| Turn {
                        user: turn.user,
                        user_tokens: Some(counts.next().unwrap_or(0)),
                        max_output_tokens: turn
                            .reference
                            .map(|_| counts.next().unwrap_or(0).max(1)),
                        think_time: Duration::ZERO,
                        tool_result: false,
                    })
                    .collect(),
            })
            .collect();
        Ok(DatasetConversations {
            conversations,
            waits: Vec::new(),
            think_time,
            fallback,
            seed,
            description,
        })
    }

    /// Counts every text of an agent trace with `counter`.
    pub async fn prepare_agent(
        loaded: Loaded<AgentTraceSession>,
        counter: &LengthCounter,
        fallback: Option<LengthDistribution>,
        think_time: ThinkTime,
        seed: u64,
    ) -> Result<Self, TokenizeError> {
        let mut texts = Vec::new();
        for session in &loaded.records {
            texts.extend(session.system.iter().cloned());
            for turn in &session.turns {
                texts.push(turn.content.clone());
                texts.extend(turn.reference.iter().cloned());
            }
        }
        let mut counts = counter.count_all(&texts).await?.into_iter();
        let mut description =
            describe_file("agent_trace", &loaded, counter, fallback.as_ref(), seed);
        let turns = loaded.records.iter().flat_map(|s| &s.turns);
        let tool_results = turns.clone().filter(|t| t.tool_result).count();
        description.insert("turns".into(), json!(turns.count()));
        description.insert("tool_result_turns".into(), json!(tool_results));
        description.insert("think_time".into(), json!(think_time.to_string()));
        let waits = loaded
            .records
            .iter()
            .map(|session| session.turns.iter().map(|turn| turn.wait).collect())
            .collect();
        let conversations = loaded
            .records
            .into_iter()
            .map(|session| agent_conversation(session, &mut counts))
            .collect();
        Ok(DatasetConversations {
            conversations,
            waits,
            think_time,
            fallback,
            seed,
            description,
        })
    }

    /// Conversations in the dataset.
    pub fn len(&self) -> usize {
        self.conversations.len()
    }

    /// Whether there are none (never, once loaded).
    pub fn is_empty(&self) -> bool {
        self.conversations.is_empty()
    }
}

/// A recorded agent session as a script, its texts' counts taken from `counts` in order.
fn agent_conversation(
    session: AgentTraceSession,
    counts: &mut impl Iterator<Item = u64>,
) -> Conversation {
    Conversation {
        system: session
            .system
            .map(|text| (text, Some(counts.next().unwrap_or(0)))),
        turns: session
            .turns
            .into_iter()
            .map(|turn| {
                let user_tokens = Some(counts.next().unwrap_or(0));
                let reference = turn.reference.map(|_| counts.next().unwrap_or(0).max(1));
                Turn {
                    user: turn.content,
                    user_tokens,
                    max_output_tokens: turn.output_tokens.map(u64::from).or(reference),
                    think_time: Duration::ZERO,
                    tool_result: turn.tool_result,
                }
            })
            .collect(),
    }
}

impl Conversations for DatasetConversations {
    fn conversation(&self, session: u64) -> Conversation {
        let position = usize::try_from(session).unwrap_or(0) % self.conversations.len().max(1);
        let mut conversation = self
            .conversations
            .get(position)
            .cloned()
            .unwrap_or_default();
        let waits = self.waits.get(position);
        for (turn_index, turn) in conversation.turns.iter_mut().enumerate() {
            let key = session.wrapping_mul(1 << 20) ^ turn_index as u64;
            let recorded = waits.and_then(|w| w.get(turn_index)).copied().flatten();
            turn.think_time = match recorded {
                Some(wait) => wait,
                None if turn.tool_result => Duration::ZERO,
                None => self.think_time.draw(self.seed, session, turn_index as u64),
            };
            if turn.max_output_tokens.is_none() {
                turn.max_output_tokens =
                    output_or_fallback(None, self.fallback.as_ref(), self.seed, key);
            }
        }
        conversation
    }
}

impl Workload for DatasetConversations {
    fn request(&self, index: u64) -> RequestSpec {
        self.conversation(index).opening_request(index)
    }

    fn describe(&self) -> BTreeMap<String, serde_json::Value> {
        self.description.clone()
    }

    fn conversations(&self) -> Option<&dyn Conversations> {
        Some(self)
    }
}
