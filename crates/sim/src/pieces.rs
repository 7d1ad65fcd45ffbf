//! A fast, exact path through `cl100k_base` for text made of the shared goodput vocabulary
//! (what generated prompts and answers are made of): every word, with or without its leading
//! space, is one known token, and a piece of ASCII letters is exactly what the encoder's
//! pre-tokenizer would cut, so looking pieces up gives the encoder's own ids without running
//! its regular expressions. Any other text falls back to the encoder.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::OnceLock;

use tiktoken_rs::CoreBPE;

use crate::text::VOCABULARY;

/// FNV-1a: short keys, no adversary, much cheaper than SipHash per lookup.
#[derive(Default)]
struct Fnv(u64);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let start = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        self.0 = bytes.iter().fold(start, |hash, &byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
        });
    }
}

type Table = HashMap<String, u32, BuildHasherDefault<Fnv>>;

/// The one-token pieces of the vocabulary (`word` and ` word`) and their ids.
fn table(encoder: &CoreBPE) -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut table = Table::default();
        for word in VOCABULARY {
            for piece in [word.to_string(), format!(" {word}")] {
                if let [id] = encoder.encode_ordinary(&piece)[..] {
                    table.insert(piece, id);
                }
            }
        }
        table
    })
}

/// The ids of `text` when it is vocabulary words separated by single spaces; `None`
/// otherwise (the caller then runs the encoder).
pub(crate) fn encode_words(encoder: &CoreBPE, text: &str) -> Option<Vec<u32>> {
    let table = table(encoder);
    let mut ids = Vec::with_capacity(text.len() / 5 + 1);
    let bytes = text.as_bytes();
    let mut start = 0;
    while start < bytes.len() {
        let letters = usize::from(bytes[start] == b' ') + start;
        let end = bytes[letters..]
            .iter()
            .position(|b| !b.is_ascii_alphabetic())
            .map_or(bytes.len(), |i| letters + i);
        if end == letters || (end < bytes.len() && bytes[end] != b' ') {
            return None;
        }
        ids.push(*table.get(&text[start..end])?);
        start = end;
    }
    Some(ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoder() -> CoreBPE {
        tiktoken_rs::cl100k_base().unwrap()
    }

    #[test]
    fn vocabulary_text_gets_the_encoders_ids() {
        let encoder = encoder();
        let text = VOCABULARY[..40].join(" ");
        for text in [text.clone(), format!(" {text}")] {
            assert_eq!(
                encode_words(&encoder, &text),
                Some(encoder.encode_ordinary(&text))
            );
        }
    }

    #[test]
    fn anything_else_is_left_to_the_encoder() {
        let encoder = encoder();
        let word = VOCABULARY[0];
        for text in [
            format!("{word}  {word}"),
            format!("{word} "),
            format!("{word}, {word}"),
            format!("{word} don't"),
            "zzqxjv".to_string(),
            format!("{word}\n{word}"),
        ] {
            assert_eq!(encode_words(&encoder, &text), None, "{text:?}");
        }
        assert_eq!(encode_words(&encoder, ""), Some(Vec::new()));
    }
}
