//! [`GeneratedWorkload`]: synthetic prompts whose input and output lengths follow
//! [`LengthDistribution`]s, built to the exact length in the run's tokenizer from a
//! [`PromptVocabulary`], unique per request — optionally behind a [`SharedPrefix`]: N groups,
//! each with a common system prompt of L tokens, to measure prefix caching.
//!
//! Everything is drawn from generators seeded by (seed, index) — lengths, text and prefix
//! group from independent streams — so the same seed gives the same requests, byte for byte,
//! in any order.

use std::collections::BTreeMap;
use std::sync::Arc;

use goodput_protocol::ChatMessage;
use rand::SeedableRng;
use rand::rngs::Xoshiro256PlusPlus;
use serde_json::json;

use super::lengths::LengthDistribution;
use super::vocabulary::PromptVocabulary;
use super::{Workload, mix_seed};
use crate::backend::{RequestInput, RequestSpec};

/// Stream tags: each kind of draw gets its own generator.
const LENGTHS: u64 = 0x1e4_6745;
const GROUPS: u64 = 0x6a0_0b5;
const PREFIXES: u64 = 0x9ef_1c5;

/// A generator for draw `index` of the stream `tag`.
pub(crate) fn stream(seed: u64, tag: u64, index: u64) -> Xoshiro256PlusPlus {
    Xoshiro256PlusPlus::seed_from_u64(mix_seed(
        seed ^ tag.wrapping_mul(0x2545_f491_4f6c_dd1d),
        index,
    ))
}

/// Shared system prompts: `groups` of them, `tokens` long each; every request belongs to one
/// group, drawn at random.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SharedPrefix {
    /// Number of distinct prefixes.
    pub groups: u32,
    /// Length of each, tokens.
    pub tokens: u32,
}

impl SharedPrefix {
    /// The group of request `index`.
    pub fn group_of(&self, seed: u64, index: u64) -> u32 {
        (mix_seed(seed ^ GROUPS, index) % u64::from(self.groups.max(1))) as u32
    }

    /// The system prompt of `group`.
    pub fn text(&self, vocabulary: &PromptVocabulary, seed: u64, group: u32) -> String {
        vocabulary.prompt(&mut stream(seed, PREFIXES, u64::from(group)), self.tokens)
    }

    /// For the report.
    pub fn describe(&self) -> serde_json::Value {
        json!({"groups": self.groups, "tokens": self.tokens})
    }
}

/// Prompts and answers of lengths drawn from distributions.
#[derive(Debug, Clone)]
pub struct GeneratedWorkload {
    /// Prompt length (the unique part, without any shared prefix).
    pub input: LengthDistribution,
    /// Answer length asked for (`max_tokens`); `None`: the server decides.
    pub output: Option<LengthDistribution>,
    /// Shared system prompts.
    pub prefix: Option<SharedPrefix>,
    /// Words that build exact lengths.
    pub vocabulary: Arc<PromptVocabulary>,
    /// Seed.
    pub seed: u64,
}

impl GeneratedWorkload {
    /// Input and output lengths of request `index`.
    pub fn lengths(&self, index: u64) -> (u32, Option<u32>) {
        let mut rng = stream(self.seed, LENGTHS, index);
        let input = self.input.sample(&mut rng);
        let output = self.output.as_ref().map(|d| d.sample(&mut rng));
        (input, output)
    }
}

impl Workload for GeneratedWorkload {
    fn request(&self, index: u64) -> RequestSpec {
        let (input_tokens, output_tokens) = self.lengths(index);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(mix_seed(self.seed, index));
        let body = self.vocabulary.prompt(&mut rng, input_tokens);
        let (input, expected) = match &self.prefix {
            None => (RequestInput::Text(body), input_tokens),
            Some(prefix) => {
                let group = prefix.group_of(self.seed, index);
                let system = prefix.text(&self.vocabulary, self.seed, group);
                let messages = vec![
                    ChatMessage::new("system", system),
                    ChatMessage::new("user", body),
                ];
                (
                    RequestInput::Messages(messages),
                    prefix.tokens + input_tokens,
                )
            }
        };
        RequestSpec {
            index,
            input,
            expected_input_tokens: Some(u64::from(expected)),
            max_output_tokens: output_tokens.map(u64::from),
            turn: None,
            tags: Default::default(),
        }
    }

    fn expected_prefix_tokens(&self, _index: u64) -> Option<u64> {
        self.prefix
            .map(|prefix| u64::from(prefix.tokens))
            .filter(|tokens| *tokens > 0)
    }

    fn describe(&self) -> BTreeMap<String, serde_json::Value> {
        let mut description = BTreeMap::from([
            ("kind".to_string(), json!("synthetic")),
            ("input_tokens".to_string(), json!(self.input.to_string())),
            (
                "output_tokens".to_string(),
                json!(self.output.as_ref().map(ToString::to_string)),
            ),
            ("tokenizer".to_string(), json!(self.vocabulary.tokenizer())),
            ("seed".to_string(), json!(self.seed)),
        ]);
        if let Some(prefix) = &self.prefix {
            description.insert("shared_prefix".into(), prefix.describe());
        }
        description
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::tokens::{Tiktoken, TokenCounter};

    fn workload(prefix: Option<SharedPrefix>) -> GeneratedWorkload {
        GeneratedWorkload {
            input: "uniform:10..400".parse().unwrap(),
            output: Some("mix:50%=8,50%=64".parse().unwrap()),
            prefix,
            vocabulary: Arc::new(PromptVocabulary::cl100k()),
            seed: 42,
        }
    }

    #[test]
    fn prompts_have_their_drawn_length_and_are_reproducible() {
        let workload = workload(None);
        let counter = Tiktoken::cl100k();
        for index in 0..20 {
            let spec = workload.request(index);
            let RequestInput::Text(text) = &spec.input else {
                panic!("text")
            };
            assert_eq!(Some(counter.count(text)), spec.expected_input_tokens);
            assert!(matches!(spec.max_output_tokens, Some(8 | 64)));
            assert_eq!(workload.request(index), spec, "byte for byte");
        }
        assert_ne!(workload.request(1).input, workload.request(2).input);
    }

    #[test]
    fn shared_prefixes_repeat_within_a_group_only() {
        let prefix = SharedPrefix {
            groups: 3,
            tokens: 50,
        };
        let workload = workload(Some(prefix));
        let counter = Tiktoken::cl100k();
        let mut systems: BTreeMap<u32, String> = BTreeMap::new();
        for index in 0..60 {
            let spec = workload.request(index);
            let RequestInput::Messages(messages) = &spec.input else {
                panic!("messages")
            };
            let system = messages[0].content.text();
            let user = messages[1].content.text();
            assert_eq!(counter.count(&system), 50);
            assert_eq!(Some(50 + counter.count(&user)), spec.expected_input_tokens);
            let group = prefix.group_of(42, index);
            assert_eq!(
                systems.entry(group).or_insert_with(|| system.clone()),
                &system
            );
        }
        assert_eq!(systems.len(), 3, "every group is used");
        let distinct: std::collections::BTreeSet<&String> = systems.values().collect();
        assert_eq!(distinct.len(), 3);
    }
}
