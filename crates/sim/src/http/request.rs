//! Turns `/v1/chat/completions` and `/v1/completions` bodies into a generation plan: validated
//! options, each prompt's token count and prefix-cache block hashes, and its `max_tokens`;
//! then into engine requests, with the end-of-sequence position drawn when the model may stop.

use goodput_protocol::{ChatCompletionRequest, CompletionRequest, Prompt, StreamOptions};
use rand::RngExt;
use rand::rngs::Xoshiro256PlusPlus;
use rand_distr::Geometric;

use crate::engine::EngineRequest;
use crate::text::{Tokenizer, block_hashes};

/// vLLM's default `max_tokens` for `/v1/completions`.
pub(crate) const COMPLETIONS_DEFAULT_MAX_TOKENS: u32 = 16;

/// Which endpoint a request came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    /// `/v1/chat/completions`.
    Chat,
    /// `/v1/completions`.
    Completions,
    /// `/v1/messages` (Anthropic Messages).
    Messages,
}

/// A request the server refuses with 400 `invalid_request_error`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct InvalidRequest {
    /// What is wrong.
    pub(crate) message: String,
    /// The parameter at fault.
    pub(crate) param: Option<&'static str>,
}

impl InvalidRequest {
    /// A refusal with `message`, blaming `param`.
    pub(crate) fn new(message: impl Into<String>, param: Option<&'static str>) -> Self {
        InvalidRequest {
            message: message.into(),
            param,
        }
    }
}

/// What the server needs to know to tokenize prompts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PromptContext {
    /// Prompt tokenizer.
    pub(crate) tokenizer: Tokenizer,
    /// KV block size when the engine caches prefixes (hashes are computed only then).
    pub(crate) block_size: Option<u32>,
    /// Longest prompt plus output accepted.
    pub(crate) max_model_len: u32,
}

impl PromptContext {
    fn prompt(
        &self,
        ids: &[u32],
        max_tokens: Option<u32>,
        default: impl Fn(u32) -> u32,
    ) -> PromptPlan {
        let prompt_tokens = u32::try_from(ids.len()).unwrap_or(u32::MAX);
        PromptPlan {
            prompt_tokens,
            block_hashes: self
                .block_size
                .map_or_else(Vec::new, |size| block_hashes(ids, size)),
            max_tokens: max_tokens.unwrap_or_else(|| default(prompt_tokens)),
        }
    }
}

/// One prompt, ready for the engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PromptPlan {
    /// Prompt length in tokens.
    pub(crate) prompt_tokens: u32,
    /// Chained hashes of its full blocks.
    pub(crate) block_hashes: Vec<u64>,
    /// Most tokens to generate.
    pub(crate) max_tokens: u32,
}

/// A validated generation request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Plan {
    /// Endpoint.
    pub(crate) dialect: Dialect,
    /// One entry per prompt (chat: exactly one).
    pub(crate) prompts: Vec<PromptPlan>,
    /// Generate exactly `max_tokens`.
    pub(crate) ignore_eos: bool,
    /// Fewest tokens before the model may stop.
    pub(crate) min_tokens: u32,
    /// Answer as server-sent events.
    pub(crate) stream: bool,
    /// Send a final usage chunk.
    pub(crate) include_usage: bool,
    /// Send cumulative usage on every chunk.
    pub(crate) continuous_usage: bool,
    /// The request offers tools the model may call.
    pub(crate) tools: bool,
}

impl Plan {
    /// The engine requests, one per prompt. When the request lets the model stop and
    /// `natural_mean` is set, each answer's end-of-sequence position is drawn from a geometric
    /// distribution with that mean, never below `min_tokens`.
    pub(crate) fn engine_requests(
        &self,
        rng: &mut Xoshiro256PlusPlus,
        natural_mean: Option<f64>,
    ) -> Vec<EngineRequest> {
        let natural = natural_mean
            .filter(|_| !self.ignore_eos)
            .and_then(|mean| Geometric::new(1.0 / mean).ok());
        self.prompts
            .iter()
            .map(|prompt| {
                let stop_after_tokens = match &natural {
                    Some(distribution) => {
                        let failures: u64 = rng.sample(distribution);
                        let length = u32::try_from(failures.saturating_add(1)).unwrap_or(u32::MAX);
                        length.max(self.min_tokens)
                    }
                    None => prompt.max_tokens,
                };
                EngineRequest {
                    id: 0,
                    prompt_tokens: prompt.prompt_tokens,
                    block_hashes: prompt.block_hashes.clone(),
                    max_output_tokens: prompt.max_tokens,
                    stop_after_tokens,
                }
            })
            .collect()
    }

    /// `(include_usage, continuous_usage_stats)` from a request's `stream_options`.
    fn stream_options(options: Option<StreamOptions>) -> (bool, bool) {
        let options = options.unwrap_or_default();
        (
            options.include_usage.unwrap_or(false),
            options.continuous_usage_stats.unwrap_or(false),
        )
    }
}

/// Parses and validates a chat completion request.
pub(crate) fn parse_chat(body: &[u8], context: &PromptContext) -> Result<Plan, InvalidRequest> {
    let request: ChatCompletionRequest = parse_json(body)?;
    check_n(request.n)?;
    if request.messages.is_empty() {
        return Err(InvalidRequest::new(
            "`messages` must contain at least one message",
            Some("messages"),
        ));
    }
    let param = if request.max_completion_tokens.is_some() {
        "max_completion_tokens"
    } else {
        "max_tokens"
    };
    let max_tokens = check_max_tokens(request.max_output_tokens(), param)?;
    let min_tokens = check_min_tokens(request.min_tokens, max_tokens)?;
    let ids = context.tokenizer.encode_chat(&request.messages);
    let max_model_len = context.max_model_len;
    let prompt = context.prompt(&ids, max_tokens, |prompt| {
        max_model_len.saturating_sub(prompt).max(1)
    });
    let (include_usage, continuous_usage) = Plan::stream_options(request.stream_options);
    Ok(Plan {
        dialect: Dialect::Chat,
        prompts: vec![prompt],
        ignore_eos: request.ignore_eos.unwrap_or(false),
        min_tokens,
        stream: request.stream.unwrap_or(false),
        include_usage,
        continuous_usage,
        tools: request.tools.is_some_and(|tools| !tools.is_empty()),
    })
}

/// Parses and validates a text completion request (one plan entry per prompt).
pub(crate) fn parse_completion(
    body: &[u8],
    context: &PromptContext,
) -> Result<Plan, InvalidRequest> {
    let request: CompletionRequest = parse_json(body)?;
    check_n(request.n)?;
    let max_tokens = check_max_tokens(request.max_tokens, "max_tokens")?;
    let min_tokens = check_min_tokens(request.min_tokens, max_tokens)?;
    let empty = || InvalidRequest::new("`prompt` must not be empty", Some("prompt"));
    let prompt_ids: Vec<Vec<u32>> = match request.prompt {
        Prompt::Text(text) => vec![context.tokenizer.encode(&text)],
        Prompt::TextBatch(texts) => texts
            .iter()
            .map(|text| context.tokenizer.encode(text))
            .collect(),
        Prompt::Tokens(ids) => vec![ids],
        Prompt::TokenBatch(batch) => batch,
    };
    if prompt_ids.is_empty() || prompt_ids.iter().any(Vec::is_empty) {
        return Err(empty());
    }
    let prompts = prompt_ids
        .iter()
        .map(|ids| context.prompt(ids, max_tokens, |_| COMPLETIONS_DEFAULT_MAX_TOKENS))
        .collect();
    let (include_usage, continuous_usage) = Plan::stream_options(request.stream_options);
    Ok(Plan {
        dialect: Dialect::Completions,
        prompts,
        ignore_eos: request.ignore_eos.unwrap_or(false),
        min_tokens,
        stream: request.stream.unwrap_or(false),
        include_usage,
        continuous_usage,
        tools: false,
    })
}

fn parse_json<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, InvalidRequest> {
    serde_json::from_slice(body)
        .map_err(|error| InvalidRequest::new(format!("invalid request body: {error}"), None))
}

fn check_n(n: Option<u64>) -> Result<(), InvalidRequest> {
    match n {
        None | Some(1) => Ok(()),
        Some(n) => Err(InvalidRequest::new(
            format!("`n` must be 1 (got {n}); the simulator generates one choice per prompt"),
            Some("n"),
        )),
    }
}

/// `max_tokens` as the engine takes it (saturating: a huge value is then "too long").
fn check_max_tokens(
    max_tokens: Option<u64>,
    param: &'static str,
) -> Result<Option<u32>, InvalidRequest> {
    match max_tokens {
        Some(0) => Err(InvalidRequest::new(
            format!("`{param}` must be at least 1"),
            Some(param),
        )),
        Some(value) => Ok(Some(u32::try_from(value).unwrap_or(u32::MAX))),
        None => Ok(None),
    }
}

fn check_min_tokens(
    min_tokens: Option<u64>,
    max_tokens: Option<u32>,
) -> Result<u32, InvalidRequest> {
    let min_tokens = u32::try_from(min_tokens.unwrap_or(0)).unwrap_or(u32::MAX);
    match max_tokens {
        Some(max) if min_tokens > max => Err(InvalidRequest::new(
            format!("`min_tokens` ({min_tokens}) must be at most `max_tokens` ({max})"),
            Some("min_tokens"),
        )),
        _ => Ok(min_tokens),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use rand::SeedableRng;

    use super::*;
    use crate::config::PromptTokenizer;

    fn context() -> PromptContext {
        PromptContext {
            tokenizer: Tokenizer::new(PromptTokenizer::Words),
            block_size: Some(2),
            max_model_len: 100,
        }
    }

    #[test]
    fn chat_defaults_fill_the_context() {
        let body = br#"{"messages":[{"role":"user","content":"a b c"}]}"#;
        let plan = parse_chat(body, &context()).unwrap();
        // 3 + role (1) + content (3) + 3 priming = 10 tokens; 90 left.
        assert_eq!(plan.prompts[0].prompt_tokens, 10);
        assert_eq!(plan.prompts[0].max_tokens, 90);
        assert_eq!(plan.prompts[0].block_hashes.len(), 5);
        assert!(!plan.stream);
    }

    #[test]
    fn completions_default_to_16_tokens_per_prompt() {
        let body =
            br#"{"prompt":["a b","c"],"stream":true,"stream_options":{"include_usage":true}}"#;
        let plan = parse_completion(body, &context()).unwrap();
        assert_eq!(plan.prompts.len(), 2);
        assert!(plan.prompts.iter().all(|p| p.max_tokens == 16));
        assert!(plan.stream && plan.include_usage && !plan.continuous_usage);
    }

    #[test]
    fn invalid_requests_name_the_parameter() {
        let cases: [(&[u8], Option<&str>); 6] = [
            (br#"{"messages":[]}"#, Some("messages")),
            (
                br#"{"messages":[{"role":"user","content":"x"}],"n":2}"#,
                Some("n"),
            ),
            (
                br#"{"messages":[{"role":"user","content":"x"}],"max_tokens":0}"#,
                Some("max_tokens"),
            ),
            (
                br#"{"messages":[{"role":"user","content":"x"}],"max_tokens":2,"min_tokens":3}"#,
                Some("min_tokens"),
            ),
            (br#"{"messages":"#, None),
            (
                br#"{"messages":[{"role":"user","content":"x"}],"max_tokens":"ten"}"#,
                None,
            ),
        ];
        for (body, param) in cases {
            let error = parse_chat(body, &context()).unwrap_err();
            assert_eq!(error.param, param, "{}", error.message);
        }
        let error = parse_completion(br#"{"prompt":[]}"#, &context()).unwrap_err();
        assert_eq!(error.param, Some("prompt"));
        let error = parse_completion(br#"{"prompt":""}"#, &context()).unwrap_err();
        assert_eq!(error.param, Some("prompt"));
    }

    #[test]
    fn natural_lengths_have_the_configured_mean_and_respect_min_tokens() {
        let body = br#"{"prompt":"a","max_tokens":100000,"min_tokens":3}"#;
        let mut context = context();
        context.max_model_len = 1_000_000;
        let plan = parse_completion(body, &context).unwrap();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
        let lengths: Vec<u32> = (0..20_000)
            .map(|_| plan.engine_requests(&mut rng, Some(50.0))[0].stop_after_tokens)
            .collect();
        assert!(lengths.iter().all(|&n| n >= 3));
        let mean = lengths.iter().map(|&n| f64::from(n)).sum::<f64>() / lengths.len() as f64;
        assert!((mean - 50.0).abs() < 2.0, "{mean}");
        let ignore: Plan = Plan {
            ignore_eos: true,
            ..plan
        };
        assert_eq!(
            ignore.engine_requests(&mut rng, Some(50.0))[0].stop_after_tokens,
            100_000
        );
    }
}
