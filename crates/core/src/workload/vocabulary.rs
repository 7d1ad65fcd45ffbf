//! Exact-length prompt text for any tokenizer. A [`PromptVocabulary`] is a set of built-in
//! words ([`WORDS`]) that the run's tokenizer counts as exactly one token each after a space,
//! plus an opening word whose count (`base`, which includes any special token the tokenizer
//! adds) starts every prompt. A prompt of `n` tokens is the opening followed by `n − base`
//! random words, so its count is exact by construction.
//!
//! For `cl100k_base` every word of [`WORDS`] qualifies, with and without a leading space
//! (checked in `tokens.rs`). For any other tokenizer — a local `tokenizer.json`, `o200k_base`,
//! or the target's own `/tokenize` endpoint — the vocabulary is found by [`Calibration`]: the
//! opening is counted alone, then groups of words are counted behind it (a group of `k` words
//! that adds exactly `k` tokens is kept whole; others are split and tried again, down to single
//! words), then sample prompts of several lengths are built and counted to verify that counts
//! add up. Calibration is a small state machine over batches of texts, so the same steps run
//! against a synchronous counter or an asynchronous remote endpoint, before the run starts.

use goodput_protocol::vocabulary::WORDS;
use rand::RngExt;
use rand::rngs::Xoshiro256PlusPlus;

use crate::tokens::TokenCounter;

/// Fewest usable words for a vocabulary (prompts stay unique: 32¹⁶ blocks of 16 tokens).
pub const MIN_WORDS: usize = 32;

/// Group sizes tried in turn during calibration.
const GROUP_SIZES: [usize; 3] = [64, 8, 1];

/// Lengths of the sample prompts verified at the end of calibration (above `base`).
const VERIFY_EXTRA_TOKENS: [u32; 4] = [0, 1, 37, 700];

/// Why a tokenizer cannot give exact-length prompts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VocabularyError {
    /// Too few built-in words are single tokens.
    #[error(
        "tokenizer {tokenizer}: only {found} of the built-in words are one token each (need \
         {MIN_WORDS}); exact-length prompts are not possible with it — use --tokenizer \
         cl100k_base, or a dataset"
    )]
    TooFewWords {
        /// Tokenizer name.
        tokenizer: String,
        /// Words that qualified.
        found: usize,
    },
    /// Counts do not add up word by word.
    #[error(
        "tokenizer {tokenizer}: a prompt built for {wanted} tokens counts {counted}; its counts \
         do not add up word by word, so exact lengths are not possible with it"
    )]
    NotAdditive {
        /// Tokenizer name.
        tokenizer: String,
        /// Length built for.
        wanted: u64,
        /// Length counted.
        counted: u64,
    },
    /// The counter answered with the wrong number of counts.
    #[error("tokenizer {tokenizer}: asked for {asked} counts, got {got}")]
    CountMismatch {
        /// Tokenizer name.
        tokenizer: String,
        /// Texts sent.
        asked: usize,
        /// Counts received.
        got: usize,
    },
}

/// How a prompt opens.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Opening {
    /// Any vocabulary word, one token at the start of a text (`cl100k_base`).
    AnyWord,
    /// This word, counted `base` tokens alone.
    Word(&'static str),
}

/// Words that build prompts of an exact token length in one tokenizer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptVocabulary {
    tokenizer: String,
    opening: Opening,
    base: u32,
    words: Vec<&'static str>,
}

impl PromptVocabulary {
    /// The vocabulary of `cl100k_base`: every built-in word, any of them opening a prompt.
    pub fn cl100k() -> Self {
        PromptVocabulary {
            tokenizer: "cl100k_base".to_string(),
            opening: Opening::AnyWord,
            base: 1,
            words: WORDS.to_vec(),
        }
    }

    /// Calibrates against a local counter (see the module documentation).
    pub fn calibrate(counter: &dyn TokenCounter) -> Result<Self, VocabularyError> {
        if counter.name() == "cl100k_base" {
            return Ok(Self::cl100k());
        }
        let mut calibration = Calibration::new(counter.name());
        while let Some(texts) = calibration.texts() {
            let counts: Vec<u64> = texts.iter().map(|text| counter.count(text)).collect();
            calibration.feed(&counts)?;
        }
        calibration.finish()
    }

    /// The tokenizer's name.
    pub fn tokenizer(&self) -> &str {
        &self.tokenizer
    }

    /// Words in use.
    pub fn len(&self) -> usize {
        self.words.len()
    }

    /// Whether no word is in use (never true for a built vocabulary).
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// The shortest prompt possible: the opening alone.
    pub fn min_tokens(&self) -> u32 {
        self.base
    }

    /// A prompt of exactly `tokens` tokens (the opening alone when `tokens` is below
    /// [`Self::min_tokens`]).
    pub fn prompt(&self, rng: &mut Xoshiro256PlusPlus, tokens: u32) -> String {
        let rest = tokens.saturating_sub(self.base);
        let mut text = String::with_capacity(rest as usize * 6 + 8);
        match self.opening {
            Opening::AnyWord => text.push_str(self.word(rng)),
            Opening::Word(word) => text.push_str(word),
        }
        for _ in 0..rest {
            text.push(' ');
            text.push_str(self.word(rng));
        }
        text
    }

    /// `tokens` words separated by spaces, to follow another text after a space (each word is
    /// then one token).
    pub fn continuation(&self, rng: &mut Xoshiro256PlusPlus, tokens: u32) -> String {
        let mut text = String::with_capacity(tokens as usize * 6);
        for i in 0..tokens {
            if i > 0 {
                text.push(' ');
            }
            text.push_str(self.word(rng));
        }
        text
    }

    fn word(&self, rng: &mut Xoshiro256PlusPlus) -> &'static str {
        self.words[rng.random_range(0..self.words.len())]
    }
}

/// Where a calibration stands.
#[derive(Debug, Clone)]
enum Stage {
    /// Count the opening alone.
    Base,
    /// Count these groups of words behind the opening.
    Groups(Vec<Vec<&'static str>>),
    /// Count sample prompts of these lengths.
    Verify(Vec<u32>),
    Done,
}

/// Finding a tokenizer's [`PromptVocabulary`] from batches of counts: call
/// [`Calibration::texts`], count every text, hand the counts to [`Calibration::feed`], until
/// `texts` returns `None`; then [`Calibration::finish`].
#[derive(Debug, Clone)]
pub struct Calibration {
    vocabulary: PromptVocabulary,
    stage: Stage,
}

impl Calibration {
    /// A calibration for the tokenizer called `tokenizer`.
    pub fn new(tokenizer: &str) -> Self {
        Calibration {
            vocabulary: PromptVocabulary {
                tokenizer: tokenizer.to_string(),
                opening: Opening::Word(WORDS[0]),
                base: 1,
                words: Vec::new(),
            },
            stage: Stage::Base,
        }
    }

    /// The texts to count next, or `None` when calibration is over.
    pub fn texts(&self) -> Option<Vec<String>> {
        let opening = match self.vocabulary.opening {
            Opening::Word(word) => word,
            Opening::AnyWord => WORDS[0],
        };
        match &self.stage {
            Stage::Base => Some(vec![opening.to_string()]),
            Stage::Groups(groups) => Some(
                groups
                    .iter()
                    .map(|group| format!("{opening} {}", group.join(" ")))
                    .collect(),
            ),
            Stage::Verify(lengths) => Some(
                lengths
                    .iter()
                    .map(|&tokens| self.sample_prompt(tokens))
                    .collect(),
            ),
            Stage::Done => None,
        }
    }

    fn sample_prompt(&self, tokens: u32) -> String {
        use rand::SeedableRng;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(u64::from(tokens));
        self.vocabulary.prompt(&mut rng, tokens)
    }

    /// Takes the counts of the last [`Calibration::texts`], in order.
    pub fn feed(&mut self, counts: &[u64]) -> Result<(), VocabularyError> {
        let asked = self.texts().map_or(0, |texts| texts.len());
        if counts.len() != asked {
            return Err(VocabularyError::CountMismatch {
                tokenizer: self.vocabulary.tokenizer.clone(),
                asked,
                got: counts.len(),
            });
        }
        let stage = std::mem::replace(&mut self.stage, Stage::Done);
        self.stage = match stage {
            Stage::Base => {
                self.vocabulary.base = u32::try_from(counts[0]).unwrap_or(u32::MAX).max(1);
                Stage::Groups(
                    WORDS[1..]
                        .chunks(GROUP_SIZES[0])
                        .map(<[_]>::to_vec)
                        .collect(),
                )
            }
            Stage::Groups(groups) => self.sort_groups(groups, counts)?,
            Stage::Verify(lengths) => {
                for (&tokens, &counted) in lengths.iter().zip(counts) {
                    if counted != u64::from(tokens) {
                        return Err(VocabularyError::NotAdditive {
                            tokenizer: self.vocabulary.tokenizer.clone(),
                            wanted: u64::from(tokens),
                            counted,
                        });
                    }
                }
                Stage::Done
            }
            Stage::Done => Stage::Done,
        };
        Ok(())
    }

    /// Keeps groups that added one token per word, splits the others.
    fn sort_groups(
        &mut self,
        groups: Vec<Vec<&'static str>>,
        counts: &[u64],
    ) -> Result<Stage, VocabularyError> {
        let base = u64::from(self.vocabulary.base);
        let mut retry = Vec::new();
        for (group, &count) in groups.into_iter().zip(counts) {
            if count.checked_sub(base) == Some(group.len() as u64) {
                self.vocabulary.words.extend(group);
            } else if group.len() > 1 {
                let size = GROUP_SIZES
                    .iter()
                    .copied()
                    .find(|&size| size < group.len())
                    .unwrap_or(1);
                retry.extend(group.chunks(size).map(<[_]>::to_vec));
            }
        }
        if !retry.is_empty() {
            return Ok(Stage::Groups(retry));
        }
        let found = self.vocabulary.words.len();
        if found < MIN_WORDS {
            return Err(VocabularyError::TooFewWords {
                tokenizer: self.vocabulary.tokenizer.clone(),
                found,
            });
        }
        self.vocabulary.words.sort_unstable();
        let base = self.vocabulary.base;
        Ok(Stage::Verify(
            VERIFY_EXTRA_TOKENS
                .iter()
                .map(|extra| base + extra)
                .collect(),
        ))
    }

    /// The vocabulary found (an error when calibration is not over or failed).
    pub fn finish(self) -> Result<PromptVocabulary, VocabularyError> {
        match self.stage {
            Stage::Done if self.vocabulary.words.len() >= MIN_WORDS => Ok(self.vocabulary),
            _ => Err(VocabularyError::TooFewWords {
                found: self.vocabulary.words.len(),
                tokenizer: self.vocabulary.tokenizer,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use rand::SeedableRng;

    use super::*;
    use crate::tokens::Tiktoken;

    /// Counts whitespace words, plus one for a begin-of-sequence token, and splits words that
    /// contain a `q`, `x` or `z` into one token per letter.
    #[derive(Debug)]
    struct Quirky;

    impl TokenCounter for Quirky {
        fn count(&self, text: &str) -> u64 {
            1 + text
                .split_whitespace()
                .map(|w| {
                    if w.contains(['q', 'x', 'z']) {
                        w.len() as u64
                    } else {
                        1
                    }
                })
                .sum::<u64>()
        }

        fn name(&self) -> &str {
            "quirky"
        }
    }

    #[test]
    fn cl100k_prompts_have_the_exact_length() {
        let vocabulary = PromptVocabulary::calibrate(&Tiktoken::cl100k()).unwrap();
        assert_eq!(vocabulary.len(), WORDS.len());
        let counter = Tiktoken::cl100k();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        for tokens in [1, 2, 16, 513, 4000] {
            assert_eq!(
                counter.count(&vocabulary.prompt(&mut rng, tokens)),
                u64::from(tokens)
            );
        }
        let joined = format!(
            "{} {}",
            vocabulary.prompt(&mut rng, 10),
            vocabulary.continuation(&mut rng, 7)
        );
        assert_eq!(counter.count(&joined), 17);
    }

    #[test]
    fn calibration_drops_words_that_split_and_counts_special_tokens() {
        let vocabulary = PromptVocabulary::calibrate(&Quirky).unwrap();
        assert_eq!(vocabulary.min_tokens(), 2, "the opening plus the BOS token");
        assert!(vocabulary.len() >= MIN_WORDS);
        assert!(
            vocabulary
                .words
                .iter()
                .all(|w| !w.contains(['q', 'x', 'z']))
        );
        let expected = WORDS[1..]
            .iter()
            .filter(|w| !w.contains(['q', 'x', 'z']))
            .count();
        assert_eq!(vocabulary.len(), expected);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(9);
        for tokens in [2, 3, 100, 2048] {
            assert_eq!(
                Quirky.count(&vocabulary.prompt(&mut rng, tokens)),
                u64::from(tokens)
            );
        }
    }

    #[test]
    fn o200k_calibrates_to_exact_lengths() {
        let counter = Tiktoken::o200k();
        let vocabulary = PromptVocabulary::calibrate(&counter).unwrap();
        assert!(vocabulary.len() > 300, "{}", vocabulary.len());
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
        for tokens in [1, 64, 1000] {
            assert_eq!(
                counter.count(&vocabulary.prompt(&mut rng, tokens)),
                u64::from(tokens)
            );
        }
    }

    #[test]
    fn a_tokenizer_that_splits_everything_is_refused() {
        #[derive(Debug)]
        struct Letters;
        impl TokenCounter for Letters {
            fn count(&self, text: &str) -> u64 {
                text.chars().filter(|c| !c.is_whitespace()).count() as u64
            }
            fn name(&self) -> &str {
                "letters"
            }
        }
        let error = PromptVocabulary::calibrate(&Letters).unwrap_err();
        assert!(
            matches!(error, VocabularyError::TooFewWords { .. }),
            "{error}"
        );
        assert!(error.to_string().contains("letters"));
    }
}
