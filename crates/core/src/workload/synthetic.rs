//! Synthetic prompts of an exact token length: words from [`WORDS`] (each one `cl100k_base`
//! token with or without a leading space) drawn from a generator seeded by (seed, index), so
//! every request's prompt is different — no accidental prefix-cache hits — and reproducible.

use std::collections::BTreeMap;

use goodput_protocol::vocabulary::WORDS;
use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use serde_json::json;

use super::{Workload, mix_seed};
use crate::backend::{RequestInput, RequestSpec};

/// Fixed input and output lengths.
#[derive(Debug, Clone, PartialEq)]
pub struct SyntheticWorkload {
    /// Prompt tokens (in `cl100k_base`).
    pub input_tokens: u32,
    /// `max_tokens` to ask for (`None`: the server decides).
    pub output_tokens: Option<u32>,
    /// Seed.
    pub seed: u64,
}

/// `tokens` words from the vocabulary joined by spaces: exactly `tokens` `cl100k_base` tokens.
pub fn prompt_of_length(rng: &mut Xoshiro256PlusPlus, tokens: u32) -> String {
    let mut text = String::with_capacity(tokens as usize * 6);
    for i in 0..tokens {
        if i > 0 {
            text.push(' ');
        }
        text.push_str(WORDS[rng.random_range(0..WORDS.len())]);
    }
    text
}

/// Request `index` of a workload seeded by `seed`: a prompt of exactly `input_tokens` (its words
/// drawn by (seed, index)), asking for `output_tokens` (`None`: the server decides).
pub fn synthetic_request(
    seed: u64,
    index: u64,
    input_tokens: u32,
    output_tokens: Option<u32>,
) -> RequestSpec {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(mix_seed(seed, index));
    RequestSpec {
        index,
        input: RequestInput::Text(prompt_of_length(&mut rng, input_tokens)),
        expected_input_tokens: Some(u64::from(input_tokens)),
        max_output_tokens: output_tokens.map(u64::from),
        turn: None,
        tags: Default::default(),
    }
}

impl Workload for SyntheticWorkload {
    fn request(&self, index: u64) -> RequestSpec {
        synthetic_request(self.seed, index, self.input_tokens, self.output_tokens)
    }

    fn describe(&self) -> BTreeMap<String, serde_json::Value> {
        BTreeMap::from([
            ("kind".to_string(), json!("synthetic")),
            ("input_tokens".to_string(), json!(self.input_tokens)),
            ("output_tokens".to_string(), json!(self.output_tokens)),
            ("tokenizer".to_string(), json!("cl100k_base")),
            ("seed".to_string(), json!(self.seed)),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokens::{Tiktoken, TokenCounter};

    #[test]
    fn prompts_have_the_exact_length_and_differ_per_request() {
        let workload = SyntheticWorkload {
            input_tokens: 300,
            output_tokens: Some(10),
            seed: 1,
        };
        let counter = Tiktoken::cl100k();
        let first = workload.request(0);
        let second = workload.request(1);
        for spec in [&first, &second] {
            let RequestInput::Text(text) = &spec.input else {
                panic!("text prompt")
            };
            assert_eq!(counter.count(text), 300);
        }
        assert_ne!(first.input, second.input);
        assert_eq!(
            workload.request(0),
            first,
            "same seed and index, same request"
        );
    }
}
