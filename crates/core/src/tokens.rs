//! Token counting on the client side. Server `usage` is the first source of truth; a
//! [`TokenCounter`] is the fallback (and the cross-check), and the exact-length prompt builder
//! of the synthetic workload. The embedded encodings (`cl100k_base`, `o200k_base`) work offline.

use std::fmt;

use tiktoken_rs::CoreBPE;

/// Counts tokens in text.
pub trait TokenCounter: Send + Sync + fmt::Debug {
    /// Tokens in `text`.
    fn count(&self, text: &str) -> u64;

    /// Name for reports, e.g. `cl100k_base`.
    fn name(&self) -> &str;
}

/// One of the embedded OpenAI BPE encodings.
#[derive(Clone, Copy)]
pub struct Tiktoken {
    name: &'static str,
    bpe: &'static CoreBPE,
}

impl fmt::Debug for Tiktoken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tiktoken")
            .field("name", &self.name)
            .finish()
    }
}

impl Tiktoken {
    /// `cl100k_base` (GPT-3.5/4 family; close to most Llama-3-era vocabularies in length).
    pub fn cl100k() -> Self {
        Tiktoken {
            name: "cl100k_base",
            bpe: tiktoken_rs::cl100k_base_singleton(),
        }
    }

    /// `o200k_base` (GPT-4o family).
    pub fn o200k() -> Self {
        Tiktoken {
            name: "o200k_base",
            bpe: tiktoken_rs::o200k_base_singleton(),
        }
    }

    /// An embedded encoding by name (`cl100k_base` or `o200k_base`).
    pub fn by_name(name: &str) -> Option<Self> {
        match name {
            "cl100k_base" | "cl100k" => Some(Self::cl100k()),
            "o200k_base" | "o200k" => Some(Self::o200k()),
            _ => None,
        }
    }
}

impl TokenCounter for Tiktoken {
    fn count(&self, text: &str) -> u64 {
        self.bpe.encode_ordinary(text).len() as u64
    }

    fn name(&self) -> &str {
        self.name
    }
}

/// A Hugging Face tokenizer loaded from a local `tokenizer.json` (never downloaded).
#[cfg(feature = "hf-tokenizer")]
pub struct HfTokenizer {
    name: String,
    tokenizer: tokenizers::Tokenizer,
}

#[cfg(feature = "hf-tokenizer")]
impl fmt::Debug for HfTokenizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HfTokenizer")
            .field("name", &self.name)
            .finish()
    }
}

/// A tokenizer that could not be loaded.
#[derive(Debug, thiserror::Error)]
#[error("cannot load tokenizer {path}: {message}")]
pub struct TokenizerError {
    /// What was asked for.
    pub path: String,
    /// Why it failed.
    pub message: String,
}

#[cfg(feature = "hf-tokenizer")]
impl HfTokenizer {
    /// Loads `path` (a `tokenizer.json`).
    pub fn from_file(path: &std::path::Path) -> Result<Self, TokenizerError> {
        let tokenizer = tokenizers::Tokenizer::from_file(path).map_err(|e| TokenizerError {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        Ok(HfTokenizer {
            name: path.display().to_string(),
            tokenizer,
        })
    }
}

#[cfg(feature = "hf-tokenizer")]
impl TokenCounter for HfTokenizer {
    fn count(&self, text: &str) -> u64 {
        // Encoding plain text without special tokens cannot fail for a loaded tokenizer;
        // should it, the text is counted as empty rather than aborting the run.
        self.tokenizer
            .encode(text, false)
            .map_or(0, |encoding| encoding.len() as u64)
    }

    fn name(&self) -> &str {
        &self.name
    }
}

/// A token counter by name: `cl100k_base`, `o200k_base`, or a path to a `tokenizer.json`.
pub fn counter_by_name(name: &str) -> Result<std::sync::Arc<dyn TokenCounter>, TokenizerError> {
    if let Some(tiktoken) = Tiktoken::by_name(name) {
        return Ok(std::sync::Arc::new(tiktoken));
    }
    #[cfg(feature = "hf-tokenizer")]
    {
        Ok(std::sync::Arc::new(HfTokenizer::from_file(
            std::path::Path::new(name),
        )?))
    }
    #[cfg(not(feature = "hf-tokenizer"))]
    Err(TokenizerError {
        path: name.to_string(),
        message: "not an embedded encoding (cl100k_base, o200k_base), and this build has no \
                  tokenizer.json support (feature hf-tokenizer)"
            .into(),
    })
}

/// Splits `total` tokens over parts in proportion to `weights` (largest remainder), so the
/// parts sum to `total` exactly. All-zero weights split evenly.
pub fn apportion(total: u64, weights: &[u64]) -> Vec<u64> {
    if weights.is_empty() {
        return Vec::new();
    }
    let weight_sum: u64 = weights.iter().sum();
    let weights: Vec<u64> = if weight_sum == 0 {
        vec![1; weights.len()]
    } else {
        weights.to_vec()
    };
    let weight_sum: u128 = weights.iter().map(|&w| u128::from(w)).sum();
    let mut shares: Vec<(u64, u128, usize)> = weights
        .iter()
        .enumerate()
        .map(|(i, &w)| {
            let exact = u128::from(total) * u128::from(w);
            ((exact / weight_sum) as u64, exact % weight_sum, i)
        })
        .collect();
    let assigned: u64 = shares.iter().map(|s| s.0).sum();
    let mut left = total - assigned;
    let mut order: Vec<usize> = (0..shares.len()).collect();
    order.sort_by(|&a, &b| shares[b].1.cmp(&shares[a].1).then(a.cmp(&b)));
    for i in order {
        if left == 0 {
            break;
        }
        shares[i].0 += 1;
        left -= 1;
    }
    shares.into_iter().map(|s| s.0).collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use goodput_protocol::vocabulary::WORDS;

    use super::*;

    #[test]
    fn every_vocabulary_word_is_one_token_with_and_without_a_space() {
        let counter = Tiktoken::cl100k();
        for word in WORDS {
            assert_eq!(counter.count(word), 1, "{word}");
            assert_eq!(counter.count(&format!(" {word}")), 1, "{word}");
        }
        let text = WORDS.join(" ");
        assert_eq!(counter.count(&text), WORDS.len() as u64);
    }

    #[test]
    fn counters_by_name_include_local_tokenizer_json() {
        assert_eq!(counter_by_name("o200k_base").unwrap().name(), "o200k_base");
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/tokenizer.json");
        let counter = counter_by_name(path).unwrap();
        assert_eq!(counter.count("hello world the dog"), 4);
        let error = counter_by_name("/nonexistent/tokenizer.json")
            .unwrap_err()
            .to_string();
        assert!(error.contains("/nonexistent/tokenizer.json"), "{error}");
    }

    #[test]
    fn apportion_sums_exactly_and_follows_weights() {
        assert_eq!(apportion(10, &[1, 1, 1, 1]), vec![3, 3, 2, 2]);
        assert_eq!(apportion(7, &[0, 0]), vec![4, 3]);
        assert_eq!(apportion(5, &[2, 0, 3]), vec![2, 0, 3]);
        assert_eq!(apportion(0, &[3, 4]), vec![0, 0]);
        let parts = apportion(1000, &[7, 13, 1, 0, 99]);
        assert_eq!(parts.iter().sum::<u64>(), 1000);
    }
}
