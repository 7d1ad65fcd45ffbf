//! Tokens and generated text: prompt token counting for honest `usage.prompt_tokens`, chained
//! block hashes of prompt tokens for prefix caching, and the seeded word generator that
//! produces answers whose length in tokens is exactly what `usage.completion_tokens` says.
//!
//! # Counting prompt tokens
//!
//! [`PromptTokenizer::Cl100k`] encodes text with OpenAI's `cl100k_base` BPE (embedded in
//! `tiktoken-rs`, loaded once); [`PromptTokenizer::Words`] counts whitespace-separated words.
//! A chat prompt is counted with OpenAI's rule for chat models: every message costs
//! `3 + tokens(role) + tokens(content)` (the three are the template's start, separator and end
//! markers) and the reply is primed with 3 more tokens (`<|start|>assistant<|message|>`).
//! The token sequence built for hashing has exactly that length: each message becomes
//! `[start] role [separator] content [end]` and the priming adds `[start] [assistant] [separator]`,
//! with reserved ids standing in for the template markers. A configured `chat_template_tokens`
//! puts that many more template ids before the first message (a real template's preamble); a
//! negative one drops that many ids from the start (a server that counts a chat as its text
//! alone), leaving at least one.
//!
//! # Prefix-cache block hashes
//!
//! The hash of block `i` is FNV-1a (64 bit) over the hash of block `i − 1` followed by the
//! block's token ids (little-endian); only full blocks of `block_size` tokens are hashed. FNV
//! is fixed by specification, so hashes agree across runs, builds and machines. In
//! [`PromptTokenizer::Words`] mode each word's id is its 32-bit FNV-1a hash.
//!
//! # Generated text
//!
//! Every generated token is one word of [`VOCABULARY`] with a leading space, and `" " + word`
//! is exactly one `cl100k_base` token. A client that re-tokenizes the answer therefore counts
//! the same number of tokens the server reports.

use std::sync::OnceLock;

use goodput_protocol::ChatMessage;
use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use tiktoken_rs::CoreBPE;

use crate::config::PromptTokenizer;

/// Tokens added per chat message by the template (start, separator, end).
pub const TOKENS_PER_MESSAGE: u32 = 3;
/// Tokens that prime the assistant's reply after the last message.
pub const REPLY_PRIMING_TOKENS: u32 = 3;

/// Reserved ids standing in for chat-template markers (outside every real vocabulary).
const MARK_START: u32 = u32::MAX;
const MARK_SEPARATOR: u32 = u32::MAX - 1;
const MARK_END: u32 = u32::MAX - 2;
const MARK_ASSISTANT: u32 = u32::MAX - 3;
const MARK_PREAMBLE: u32 = u32::MAX - 4;
/// The top of the ids of image tokens (below the markers).
const MARK_IMAGE: u32 = u32::MAX - 16;

const FNV64_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV64_PRIME: u64 = 0x0000_0100_0000_01b3;
const FNV32_OFFSET: u32 = 0x811c_9dc5;
const FNV32_PRIME: u32 = 0x0100_0193;

/// The `cl100k_base` encoder, built on first use (`None` if the embedded data cannot be read,
/// in which case counting falls back to words).
fn cl100k() -> Option<&'static CoreBPE> {
    static ENCODER: OnceLock<Option<CoreBPE>> = OnceLock::new();
    ENCODER
        .get_or_init(|| tiktoken_rs::cl100k_base().ok())
        .as_ref()
}

/// Turns prompt text into token ids the way the configuration asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tokenizer {
    mode: PromptTokenizer,
    /// Template tokens every chat prompt starts with (`chat_template_tokens`); negative:
    /// ids dropped from its start.
    preamble: i32,
}

impl Tokenizer {
    /// A tokenizer in `mode`; the first `cl100k_base` use loads the encoder (a few ms).
    pub fn new(mode: PromptTokenizer) -> Self {
        Tokenizer { mode, preamble: 0 }
    }

    /// This tokenizer with `tokens` template tokens at the start of every chat prompt
    /// (negative: that many fewer).
    pub fn with_chat_template(self, tokens: i32) -> Self {
        Tokenizer {
            preamble: tokens,
            ..self
        }
    }

    /// Loads the encoder now, so the first request does not pay for it.
    pub fn warm_up(&self) {
        if self.mode == PromptTokenizer::Cl100k {
            let _ = cl100k();
        }
    }

    /// Token ids of `text`: `cl100k_base` ids, or one FNV-1a hash per whitespace word.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        match (self.mode, cl100k()) {
            (PromptTokenizer::Cl100k, Some(encoder)) => crate::pieces::encode_words(encoder, text)
                .unwrap_or_else(|| encoder.encode_ordinary(text)),
            _ => text
                .split_whitespace()
                .map(|word| fnv1a_32(word.as_bytes()))
                .collect(),
        }
    }

    /// Number of tokens in `text`.
    pub fn count(&self, text: &str) -> usize {
        match (self.mode, cl100k()) {
            (PromptTokenizer::Cl100k, Some(_)) => self.encode(text).len(),
            _ => text.split_whitespace().count(),
        }
    }

    /// Token ids of a chat prompt with its template markers (see the module documentation);
    /// its length is the prompt's token count.
    pub fn encode_chat(&self, messages: &[ChatMessage]) -> Vec<u32> {
        let mut ids = vec![MARK_PREAMBLE; self.preamble.max(0).unsigned_abs() as usize];
        for message in messages {
            ids.push(MARK_START);
            ids.extend(self.encode(&message.role));
            ids.push(MARK_SEPARATOR);
            ids.extend(self.encode(&message.content.text()));
            for (i, tokens) in crate::image::content_image_tokens(&message.content)
                .into_iter()
                .enumerate()
            {
                // Image tokens: ids of their own, the same for the same image position and size.
                let seed = fnv1a_32(&[i as u8, (tokens & 0xFF) as u8, (tokens >> 8) as u8]);
                ids.extend(
                    (0..tokens).map(|k| MARK_IMAGE - (seed.wrapping_add(k as u32) % (1 << 20))),
                );
            }
            ids.push(MARK_END);
        }
        ids.extend([MARK_START, MARK_ASSISTANT, MARK_SEPARATOR]);
        let dropped = (self.preamble.min(0).unsigned_abs() as usize).min(ids.len() - 1);
        ids.drain(..dropped);
        ids
    }
}

/// 32-bit FNV-1a of `bytes`.
fn fnv1a_32(bytes: &[u8]) -> u32 {
    bytes.iter().fold(FNV32_OFFSET, |hash, &byte| {
        (hash ^ u32::from(byte)).wrapping_mul(FNV32_PRIME)
    })
}

/// 64-bit FNV-1a continuing from `hash` over `bytes`.
fn fnv1a_64(hash: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(hash, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(FNV64_PRIME)
    })
}

/// Chained hashes of every full block of `block_size` tokens of `ids` (none if `block_size`
/// is 0): block `i` hashes the hash of block `i − 1` and its own token ids.
pub fn block_hashes(ids: &[u32], block_size: u32) -> Vec<u64> {
    if block_size == 0 {
        return Vec::new();
    }
    let mut previous = 0u64;
    ids.chunks_exact(block_size as usize)
        .map(|block| {
            let mut hash = fnv1a_64(FNV64_OFFSET, &previous.to_le_bytes());
            for id in block {
                hash = fnv1a_64(hash, &id.to_le_bytes());
            }
            previous = hash;
            hash
        })
        .collect()
}

/// A seed for one purpose of one request, derived from the configured seed (SplitMix64 mixing,
/// so neighbouring request numbers give unrelated streams).
pub fn derive_seed(seed: u64, request_number: u64, purpose: u64) -> u64 {
    let mut state = seed;
    for value in [request_number, purpose] {
        state = splitmix64(state ^ splitmix64(value));
    }
    state
}

fn splitmix64(value: u64) -> u64 {
    let mut z = value.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Produces an answer one word (one token) at a time, reproducibly from a seed.
#[derive(Debug, Clone)]
pub struct WordGenerator {
    rng: Xoshiro256PlusPlus,
}

impl WordGenerator {
    /// A generator for choice `choice` of request number `request_number`.
    pub fn new(seed: u64, request_number: u64, choice: u32) -> Self {
        let seed = derive_seed(seed, request_number, 0x7e47_0000 + u64::from(choice));
        WordGenerator {
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
        }
    }

    /// Appends `count` words, each with a leading space (`count` tokens), to `out`.
    pub fn push_words(&mut self, count: u32, out: &mut String) {
        for _ in 0..count {
            let word = VOCABULARY[self.rng.random_range(0..VOCABULARY.len())];
            out.push(' ');
            out.push_str(word);
        }
    }

    /// `count` words, each with a leading space.
    pub fn words(&mut self, count: u32) -> String {
        let mut out = String::with_capacity(count as usize * 7);
        self.push_words(count, &mut out);
        out
    }
}

/// The words generated answers are made of: the shared goodput vocabulary, where
/// `" " + word` is exactly one `cl100k_base` token for every entry.
pub use goodput_protocol::vocabulary::WORDS as VOCABULARY;

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn cl100k_tokens(text: &str) -> usize {
        cl100k().unwrap().encode_ordinary(text).len()
    }

    #[test]
    fn every_vocabulary_word_with_a_leading_space_is_one_token() {
        for word in VOCABULARY {
            assert_eq!(cl100k_tokens(&format!(" {word}")), 1, "{word:?}");
        }
    }

    #[test]
    fn a_generated_answer_retokenizes_to_its_word_count() {
        let mut generator = WordGenerator::new(42, 7, 0);
        for count in [1, 2, 17, 500, 3000] {
            let text = generator.words(count);
            assert_eq!(cl100k_tokens(&text), count as usize);
            assert_eq!(text.split_whitespace().count(), count as usize);
        }
    }

    #[test]
    fn generation_is_reproducible_per_seed_request_and_choice() {
        let words = |seed, request, choice| WordGenerator::new(seed, request, choice).words(32);
        assert_eq!(words(1, 2, 0), words(1, 2, 0));
        assert_ne!(words(1, 2, 0), words(1, 3, 0));
        assert_ne!(words(1, 2, 0), words(1, 2, 1));
        assert_ne!(words(1, 2, 0), words(2, 2, 0));
    }

    #[test]
    fn chat_prompt_follows_the_openai_counting_rule() {
        let tokenizer = Tokenizer::new(PromptTokenizer::Cl100k);
        let messages = [
            ChatMessage::new("system", "You are a helpful assistant."),
            ChatMessage::new("user", "Hello there, how are you?"),
        ];
        let expected: usize = messages
            .iter()
            .map(|m| 3 + tokenizer.count(&m.role) + tokenizer.count(&m.content.text()))
            .sum::<usize>()
            + 3;
        assert_eq!(tokenizer.encode_chat(&messages).len(), expected);
        // "system" is 1 token and its content 6; "user" is 1 token and its content 7.
        assert_eq!(expected, (3 + 1 + 6) + (3 + 1 + 7) + 3);
    }

    #[test]
    fn a_chat_template_adds_its_tokens_before_the_first_message() {
        let plain = Tokenizer::new(PromptTokenizer::Words);
        let templated = plain.with_chat_template(22);
        let messages = [ChatMessage::new("user", "hi there")];
        let (a, b) = (
            plain.encode_chat(&messages),
            templated.encode_chat(&messages),
        );
        assert_eq!(b.len(), a.len() + 22);
        assert_eq!(
            &b[22..],
            &a[..],
            "the preamble comes first, the rest unchanged"
        );
        // Text alone is not a chat: no template.
        assert_eq!(templated.count("hi there"), 2);
        // A server counting the text alone: the 7 markers dropped, from the start.
        let fewer = plain.with_chat_template(-7);
        assert_eq!(fewer.encode_chat(&messages), a[7..].to_vec());
        assert_eq!(fewer.encode_chat(&messages).len(), 2);
        // Never fewer than one token.
        assert_eq!(
            plain.with_chat_template(-100).encode_chat(&messages).len(),
            1
        );
    }

    #[test]
    fn words_mode_counts_whitespace_words() {
        let tokenizer = Tokenizer::new(PromptTokenizer::Words);
        assert_eq!(tokenizer.count("  one two\tthree\nfour "), 4);
        assert_eq!(
            tokenizer.encode("a b a"),
            vec![fnv1a_32(b"a"), fnv1a_32(b"b"), fnv1a_32(b"a")]
        );
        let chat = tokenizer.encode_chat(&[ChatMessage::new("user", "hi there")]);
        assert_eq!(chat.len(), 3 + 1 + 2 + 3);
    }

    #[test]
    fn block_hashes_cover_full_blocks_and_chain() {
        let ids: Vec<u32> = (0..40).collect();
        let hashes = block_hashes(&ids, 16);
        assert_eq!(hashes.len(), 2);
        // Same first block, different second block: first hash equal, second differs.
        let mut other = ids.clone();
        other[20] = 999;
        let other_hashes = block_hashes(&other, 16);
        assert_eq!(hashes[0], other_hashes[0]);
        assert_ne!(hashes[1], other_hashes[1]);
        // A different first block changes every later hash (chaining).
        let mut shifted = ids.clone();
        shifted[0] = 999;
        let shifted_hashes = block_hashes(&shifted, 16);
        assert_ne!(hashes[1], shifted_hashes[1]);
        assert!(block_hashes(&ids, 0).is_empty());
    }

    #[test]
    fn block_hashes_are_stable_across_builds() {
        // FNV-1a is fully specified: this value must never change.
        assert_eq!(fnv1a_64(FNV64_OFFSET, b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a_32(b"a"), 0xe40c_292c);
        let ids: Vec<u32> = (0..16).collect();
        assert_eq!(block_hashes(&ids, 16), block_hashes(&ids, 16));
    }
}
