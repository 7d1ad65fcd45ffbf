//! The server's front end without HTTP: what `POST /v1/chat/completions` or `/v1/completions`
//! hands the engine for a request body — the same validation, tokenization, prefix-cache block
//! hashes, request numbering and answer-length draws — and the answer text it streams back.
//! Virtual-time runs use it, so a workload's requests reach the engine exactly as they would
//! over the wire, with no socket and no clock.

use rand::SeedableRng;
use rand::rngs::Xoshiro256PlusPlus;

use super::encode::{self, Route};
use super::faults::Fault;
use super::request::{Plan, PromptContext, parse_chat, parse_completion};
use super::routes::REQUEST_RNG;
use crate::config::{FaultConfig, SimConfig};
use crate::engine::EngineRequest;
use crate::text::{Tokenizer, WordGenerator, derive_seed};

/// Which generation endpoint a body is sent to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// `/v1/chat/completions`.
    Chat,
    /// `/v1/completions`.
    Completions,
    /// `/v1/embeddings` (a prefill and one token per input).
    Embeddings,
    /// `/v1/rerank` (a prefill and one token per query–document pair).
    Rerank,
    /// KServe v2 `/v2/models/{model}/infer` (a prefill and one token per batch row).
    V2,
}

/// A request the front end accepted: its number (as the server counts requests) and one
/// engine request per prompt, ids still to be assigned by the caller.
#[derive(Debug, Clone, PartialEq)]
pub struct Admission {
    /// The server's request number (seeds the answer's text and length draws).
    pub number: u64,
    /// One engine request per prompt (chat: exactly one).
    pub requests: Vec<EngineRequest>,
    /// Whether the answer would be streamed.
    pub stream: bool,
    /// Whether usage reports prompt tokens served from the prefix cache.
    pub cached_details: bool,
    /// An encoder request: the answer is one whole body of vectors or scores, no tokens.
    pub encoder: bool,
}

/// The simulator's request front end, numbering requests as the HTTP server does.
#[derive(Debug, Clone)]
pub struct Frontend {
    context: PromptContext,
    seed: u64,
    natural_mean: Option<f64>,
    faults: FaultConfig,
    cached_details: bool,
    next: u64,
}

impl Frontend {
    /// The front end of a server running `config`.
    pub fn new(config: &SimConfig) -> Frontend {
        let tokenizer =
            Tokenizer::new(config.prompt_tokenizer).with_chat_template(config.chat_template_tokens);
        tokenizer.warm_up();
        Frontend {
            context: PromptContext {
                tokenizer,
                block_size: super::cache_info(config).1,
                max_model_len: config.engine.max_model_len(),
            },
            seed: config.seed,
            natural_mean: config.natural_output_tokens_mean,
            faults: config.faults.clone(),
            cached_details: config.agent.prompt_tokens_details,
            next: 0,
        }
    }

    /// Parses `body` as the server would; an invalid body is refused with the server's
    /// message (and takes no request number, as over HTTP).
    pub fn admit(&mut self, api: Api, body: &[u8]) -> Result<Admission, String> {
        let plan: Plan = match api {
            Api::Chat => parse_chat(body, &self.context),
            Api::Completions => parse_completion(body, &self.context),
            Api::Embeddings => return self.admit_encoder(Route::Embeddings, body),
            Api::Rerank => return self.admit_encoder(Route::Rerank, body),
            Api::V2 => return self.admit_encoder(Route::V2, body),
        }
        .map_err(|invalid| invalid.message)?;
        let number = self.next;
        self.next += 1;
        let mut rng =
            Xoshiro256PlusPlus::seed_from_u64(derive_seed(self.seed, number, REQUEST_RNG));
        // The server draws the request's fault first; drawing it here keeps the answer-length
        // draws identical to a live run's.
        let _ = Fault::draw(&self.faults, &mut rng);
        Ok(Admission {
            number,
            requests: plan.engine_requests(&mut rng, self.natural_mean),
            stream: plan.stream,
            cached_details: self.cached_details,
            encoder: false,
        })
    }

    /// An embeddings, rerank or v2 infer body: every input's prefill, as `encode::answer` submits it.
    fn admit_encoder(&mut self, route: Route, body: &[u8]) -> Result<Admission, String> {
        let prompts = encode::prompts(&self.context.tokenizer, route, body)?;
        let number = self.next;
        self.next += 1;
        let max_len = self.context.max_model_len.saturating_sub(1) as usize;
        if let Some(long) = prompts.iter().find(|p| p.len() > max_len) {
            return Err(format!(
                "an input of {} tokens exceeds the model's {} tokens",
                long.len(),
                self.context.max_model_len
            ));
        }
        let block_size = self.context.block_size;
        Ok(Admission {
            number,
            requests: prompts
                .iter()
                .map(|ids| encode::engine_request(ids, block_size))
                .collect(),
            stream: false,
            cached_details: false,
            encoder: true,
        })
    }

    /// The text of `tokens` answer tokens of prompt `choice` of request `number`.
    pub fn answer_text(&self, number: u64, choice: u32, tokens: u32) -> String {
        WordGenerator::new(self.seed, number, choice).words(tokens)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::PromptTokenizer;

    fn words_config() -> SimConfig {
        SimConfig {
            prompt_tokenizer: PromptTokenizer::Words,
            ..SimConfig::default()
        }
    }

    #[test]
    fn chat_bodies_become_engine_requests_with_the_template_and_max_tokens() {
        let mut frontend = Frontend::new(&words_config());
        let body =
            br#"{"messages":[{"role":"user","content":"a b c d"}],"max_tokens":7,"stream":true}"#;
        let admission = frontend.admit(Api::Chat, body).unwrap();
        assert_eq!(admission.number, 0);
        assert!(admission.stream);
        let request = &admission.requests[0];
        // Four words, the role and four template marks, plus the assistant opening.
        assert_eq!(request.prompt_tokens, 4 + 1 + 3 + 3);
        assert_eq!(request.max_output_tokens, 7);
        assert_eq!(frontend.admit(Api::Chat, body).unwrap().number, 1);
    }

    #[test]
    fn invalid_bodies_are_refused_without_a_number() {
        let mut frontend = Frontend::new(&words_config());
        let error = frontend
            .admit(Api::Chat, br#"{"messages":[]}"#)
            .unwrap_err();
        assert!(error.contains("messages"), "{error}");
        let body = br#"{"prompt":["a b","c d e"],"max_tokens":3}"#;
        let admission = frontend.admit(Api::Completions, body).unwrap();
        assert_eq!(admission.number, 0);
        let prompts: Vec<u32> = admission.requests.iter().map(|r| r.prompt_tokens).collect();
        assert_eq!(prompts, [2, 3]);
    }

    #[test]
    fn encoder_bodies_prefill_every_input_for_one_token() {
        let mut frontend = Frontend::new(&words_config());
        let body = br#"{"input":["a b c","d e"]}"#;
        let admission = frontend.admit(Api::Embeddings, body).unwrap();
        assert!(admission.encoder && !admission.stream);
        let shape: Vec<(u32, u32)> = admission
            .requests
            .iter()
            .map(|r| (r.prompt_tokens, r.output_tokens()))
            .collect();
        assert_eq!(shape, [(3, 1), (2, 1)]);
        let rerank = br#"{"query":"q r","documents":["a b c","d"]}"#;
        let admission = frontend.admit(Api::Rerank, rerank).unwrap();
        let prompts: Vec<u32> = admission.requests.iter().map(|r| r.prompt_tokens).collect();
        assert_eq!(prompts, [5, 3], "query + document");
        assert!(
            frontend
                .admit(Api::Rerank, br#"{"documents":["a"]}"#)
                .is_err()
        );
    }

    #[test]
    fn answer_text_is_the_servers_words() {
        let frontend = Frontend::new(&words_config());
        let text = frontend.answer_text(3, 0, 5);
        assert_eq!(text.split_whitespace().count(), 5);
        assert_eq!(text, WordGenerator::new(0, 3, 0).words(5));
    }
}
