//! Speculative decoding acceptance: per decode step a draft model proposes K tokens and the
//! target accepts the leading run of them, position `i` with conditional probability `r_i`.
//! A step therefore yields `1 + accepted` tokens, `1 + r1 + r1·r2 + …` on average.

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};

use super::SpeculativeStats;
use crate::config::SpeculativeConfig;

/// Draws acceptances and keeps vLLM-style counters.
#[derive(Debug, Clone)]
pub struct AcceptanceSampler {
    acceptance: Vec<f64>,
    rng: Xoshiro256PlusPlus,
    stats: SpeculativeStats,
}

impl AcceptanceSampler {
    /// A sampler for `config`, seeded.
    pub fn new(config: &SpeculativeConfig, seed: u64) -> Self {
        AcceptanceSampler {
            acceptance: config.acceptance.clone(),
            rng: Xoshiro256PlusPlus::seed_from_u64(seed ^ 0x5eed_5bec),
            stats: SpeculativeStats {
                accepted_per_position: vec![0; config.acceptance.len()],
                ..SpeculativeStats::default()
            },
        }
    }

    /// Draft tokens proposed per step (K).
    pub fn num_draft_tokens(&self) -> u32 {
        u32::try_from(self.acceptance.len()).unwrap_or(u32::MAX)
    }

    /// One verification with `drafts` proposed tokens (≤ K, fewer near the output limit):
    /// returns how many were accepted, stopping at the first rejection.
    pub fn verify(&mut self, drafts: u32) -> u32 {
        let mut accepted = 0;
        for position in 0..drafts.min(self.num_draft_tokens()) as usize {
            if self.rng.random::<f64>() >= self.acceptance[position] {
                break;
            }
            self.stats.accepted_per_position[position] += 1;
            accepted += 1;
        }
        if drafts > 0 {
            self.stats.drafts += 1;
            self.stats.draft_tokens += u64::from(drafts);
            self.stats.accepted_tokens += u64::from(accepted);
        }
        accepted
    }

    /// Counters so far.
    pub fn stats(&self) -> &SpeculativeStats {
        &self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_tokens_per_step_matches_the_product_series() {
        let config = SpeculativeConfig {
            acceptance: vec![0.85, 0.6, 0.3],
            draft_cost_ratio: 0.05,
        };
        let mut sampler = AcceptanceSampler::new(&config, 42);
        let steps: u32 = 200_000;
        let tokens: u64 = (0..steps).map(|_| 1 + u64::from(sampler.verify(3))).sum();
        let mean = tokens as f64 / f64::from(steps);
        let expected = config.expected_tokens_per_step();
        assert!((mean - expected).abs() < 0.01, "{mean} vs {expected}");
        let stats = sampler.stats();
        assert_eq!(stats.drafts, u64::from(steps));
        assert_eq!(
            stats.accepted_per_position.iter().sum::<u64>(),
            stats.accepted_tokens
        );
    }

    #[test]
    fn same_seed_same_draws() {
        let config = SpeculativeConfig {
            acceptance: vec![0.5; 4],
            draft_cost_ratio: 0.0,
        };
        let mut a = AcceptanceSampler::new(&config, 9);
        let mut b = AcceptanceSampler::new(&config, 9);
        let draws_a: Vec<u32> = (0..100).map(|_| a.verify(4)).collect();
        let draws_b: Vec<u32> = (0..100).map(|_| b.verify(4)).collect();
        assert_eq!(draws_a, draws_b);
    }
}
