//! `POST /tokenize`, shaped like vLLM's: `{"model"?, "prompt": text}` or
//! `{"model"?, "messages": [...]}` (counted with the chat template, as a chat request would
//! be) → `{"count", "max_model_len", "tokens"}`. `add_special_tokens` is accepted and has no
//! effect (the simulator's tokenizers add no special tokens). Unknown fields are ignored, as
//! vLLM does. Clients use it to build prompts of an exact length in the server's own tokens.

use goodput_protocol::ChatMessage;
use serde::{Deserialize, Serialize};

use super::request::PromptContext;

/// A `/tokenize` request body.
#[derive(Debug, Deserialize)]
struct TokenizeRequest {
    #[serde(default)]
    prompt: Option<String>,
    #[serde(default)]
    messages: Option<Vec<ChatMessage>>,
}

/// The answer.
#[derive(Debug, Serialize)]
pub(crate) struct TokenizeResponse {
    count: usize,
    max_model_len: u32,
    tokens: Vec<u32>,
}

/// Tokenizes a body, or says what is wrong with it (answered with 400).
pub(crate) fn tokenize(body: &[u8], context: &PromptContext) -> Result<TokenizeResponse, String> {
    let request: TokenizeRequest =
        serde_json::from_slice(body).map_err(|error| format!("invalid request body: {error}"))?;
    let tokens = match (request.prompt, request.messages) {
        (Some(prompt), None) => context.tokenizer.encode(&prompt),
        (None, Some(messages)) => context.tokenizer.encode_chat(&messages),
        _ => return Err("give exactly one of `prompt` and `messages`".to_string()),
    };
    Ok(TokenizeResponse {
        count: tokens.len(),
        max_model_len: context.max_model_len,
        tokens,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::config::PromptTokenizer;
    use crate::text::Tokenizer;

    fn context(mode: PromptTokenizer) -> PromptContext {
        PromptContext {
            tokenizer: Tokenizer::new(mode),
            block_size: None,
            max_model_len: 4096,
        }
    }

    #[test]
    fn prompts_and_messages_are_counted_like_generation_requests() {
        let words = context(PromptTokenizer::Words);
        let answer = tokenize(br#"{"model":"m","prompt":"a b c"}"#, &words).unwrap();
        assert_eq!((answer.count, answer.tokens.len()), (3, 3));
        assert_eq!(answer.max_model_len, 4096);
        let chat =
            br#"{"messages":[{"role":"user","content":"a b c"}],"add_special_tokens":false}"#;
        // 3 + role + content + 3 priming, as the chat endpoint counts it.
        assert_eq!(tokenize(chat, &words).unwrap().count, 10);
        let cl100k = context(PromptTokenizer::Cl100k);
        assert_eq!(
            tokenize(br#"{"prompt":"hello world"}"#, &cl100k)
                .unwrap()
                .count,
            2
        );
    }

    #[test]
    fn bad_bodies_say_why() {
        let words = context(PromptTokenizer::Words);
        assert!(
            tokenize(b"{", &words)
                .unwrap_err()
                .contains("invalid request body")
        );
        assert!(tokenize(b"{}", &words).unwrap_err().contains("exactly one"));
    }
}
