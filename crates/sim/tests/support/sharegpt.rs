//! A seeded stand-in for ShareGPT conversations as the serving benchmarks sample them, and
//! Poisson arrivals: the dataset cannot be downloaded here, so published serving points on
//! ShareGPT are re-run on lengths of the same shape and mean (`docs/simulator.md`, "Published
//! points at scale").

use std::time::Duration;

/// Log-normal scale (median) of a prompt, tokens: with [`SIGMA`] and the samplers' cuts the
/// mean prompt is ~215 tokens, as ShareGPT's under Llama 3's tokenizer (1000 conversations:
/// 215 196 prompt tokens, `vllm-project/vllm#7567`).
const PROMPT_MEDIAN: f64 = 153.0;
/// Log-normal scale of an answer, tokens: the mean answer is ~194 tokens, as in SGLang's
/// offline run of 5000 conversations (3856.01 output tok/s at 19.84 req/s,
/// `sgl-project/sglang` `benchmark/benchmark_vllm_060/README.md`).
const ANSWER_MEDIAN: f64 = 115.0;
/// Log-normal shape of both lengths.
const SIGMA: f64 = 1.1;

/// A seeded xorshift64* stream of uniforms in (0, 1).
pub struct Uniforms(u64);

impl Uniforms {
    pub fn new(seed: u64) -> Self {
        Uniforms(seed.max(1))
    }

    pub fn next(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let bits = self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11;
        (bits as f64 + 0.5) / (1u64 << 53) as f64
    }

    /// A standard normal (Box–Muller, one of the pair).
    fn normal(&mut self) -> f64 {
        let (u, v) = (self.next(), self.next());
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }

    fn log_normal(&mut self, median: f64) -> u32 {
        (median * (SIGMA * self.normal()).exp()) as u32
    }
}

/// `count` (prompt, answer) lengths cut as vLLM's and SGLang's ShareGPT samplers cut them:
/// at least 4 tokens each, a prompt of at most 1024, prompt + answer at most 2048.
pub fn lengths(count: usize, seed: u64) -> Vec<(u32, u32)> {
    let mut rng = Uniforms::new(seed);
    let mut out = Vec::with_capacity(count);
    while out.len() < count {
        let (prompt, answer) = (rng.log_normal(PROMPT_MEDIAN), rng.log_normal(ANSWER_MEDIAN));
        if prompt >= 4 && answer >= 4 && prompt <= 1024 && prompt + answer <= 2048 {
            out.push((prompt, answer));
        }
    }
    out
}

/// Arrival times of `count` requests as a Poisson process at `rate` per second.
pub fn poisson_arrivals(count: usize, rate: f64, seed: u64) -> Vec<Duration> {
    let mut rng = Uniforms::new(seed);
    let mut at = 0.0;
    (0..count)
        .map(|_| {
            at += -rng.next().ln() / rate;
            Duration::from_secs_f64(at)
        })
        .collect()
}
