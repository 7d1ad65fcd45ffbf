//! llama-server's wire quirks against goodput's client: tokens merged into fewer chunks (output
//! counts must come from `usage`), the role-only first chat chunk (not a token), usage on chat
//! only with `include_usage`, non-streamed answers.

use goodput_core::backend::openai::ApiKind;
use goodput_core::record::TokenSource;
use serde_json::{Value, json};

use crate::server::{LlamaServer, Model, Options};
use crate::{assert_all_ok, closed, exchange, ms, openai, run, spec};

/// Id of the byte token `<0xNN>` in the llama-spm vocabulary (ids 3–258).
fn byte_token(byte: u8) -> u32 {
    3 + u32::from(byte)
}

/// A `logit_bias` making the byte tokens of "あ" (E3 81 82) frequent. The server holds back the
/// text of a token that ends inside a UTF-8 sequence and sends it with the next chunk, so many
/// chunks carry two or more tokens — as with CJK text or emoji on real models.
fn merging_bias() -> Value {
    json!(
        [0xE3u8, 0x81, 0x82]
            .iter()
            .map(|&byte| json!([byte_token(byte), 6.0]))
            .collect::<Vec<_>>()
    )
}

#[tokio::test]
async fn output_tokens_come_from_usage_although_chunks_merge() {
    let server = LlamaServer::start(&Options::new(Model::Tiny, 2));
    for api in [ApiKind::Chat, ApiKind::Completions] {
        let mut config = openai(api);
        config
            .extra_body
            .insert("logit_bias".into(), merging_bias());
        let result = run(&server, closed(2, 4), config, 32, 200).await;
        assert_all_ok(&result.records);
        for record in &result.records {
            assert_eq!(record.output_tokens, 200, "{api:?}: exact, from usage");
            assert_eq!(record.output_tokens_source, TokenSource::Usage);
            assert_eq!(record.finish_reason.as_deref(), Some("length"));
            let chunk_tokens: u64 = record.chunks.iter().map(|c| c[1]).sum();
            assert_eq!(chunk_tokens, 200, "per-chunk counts add up to usage");
            assert!(
                (record.chunks.len() as u64) < record.output_tokens,
                "{api:?}: the server merged tokens: {} chunks for {} tokens",
                record.chunks.len(),
                record.output_tokens
            );
            let timings = record.server_timings.expect("llama.cpp timings");
            assert_eq!(timings.predicted_n, Some(200.0));
        }
        let tokens = &result.step.tokens;
        assert_eq!(tokens.output_total, 800);
        assert_eq!(tokens.output_from_usage, 4);
        assert_eq!(tokens.output_length_mismatches, 0);
        let chunks: usize = result.records.iter().map(|r| r.chunks.len()).sum();
        eprintln!("{api:?}: {chunks} output chunks carried 800 tokens");
    }
}

#[tokio::test]
async fn unbiased_output_is_exact_too() {
    let server = LlamaServer::start(&Options::new(Model::Tiny, 2));
    for api in [ApiKind::Chat, ApiKind::Completions] {
        let result = run(&server, closed(2, 4), openai(api), 32, 128).await;
        assert_all_ok(&result.records);
        for record in &result.records {
            assert_eq!(record.output_tokens, 128);
            assert_eq!(record.output_tokens_source, TokenSource::Usage);
            assert!(record.chunks.len() as u64 <= 128);
            assert!(
                record.input_tokens.unwrap() > 32,
                "the chat template counts too"
            );
            assert_eq!(record.input_tokens_source, TokenSource::Usage);
        }
        assert_eq!(result.step.tokens.output_length_mismatches, 0);
    }
}

#[tokio::test]
async fn the_role_only_first_chat_chunk_is_not_the_first_token() {
    // With `return_progress` llama-server sends the role-only chunk (with prompt progress) as
    // soon as the slot starts the prompt; the first token follows after the whole prefill.
    let server = LlamaServer::start(&Options::new(Model::Small, 1));
    let mut config = openai(ApiKind::Chat);
    config
        .extra_body
        .insert("return_progress".into(), Value::Bool(true));
    let prompt = "hello world ".repeat(700);
    let exchange = exchange(&server, config, &spec(&prompt, 8)).await;
    assert!(exchange.failure.is_none(), "{:?}", exchange.failure);
    let sent = exchange.sent_at.unwrap();
    let first_event = exchange.first_event_at.unwrap();
    let first_token = exchange.chunks[0].at();
    let prompt_ms = exchange.server_timings.unwrap().prompt_ms.unwrap();
    let ttft = ms(first_token - sent);
    let role = ms(first_event - sent);
    eprintln!(
        "role-only chunk after {role:.1} ms, first token after {ttft:.1} ms, server prefill {prompt_ms:.1} ms"
    );
    assert!(
        ttft >= prompt_ms,
        "the first token cannot arrive before the prefill ended"
    );
    assert!(
        first_event < first_token,
        "the role chunk came first, yet it is not counted"
    );
    assert_eq!(exchange.usage.unwrap().completion_tokens, 8);
    assert!(exchange.chunks.len() <= 8, "no chunk for the role");
}

#[tokio::test]
async fn chat_usage_arrives_only_with_include_usage() {
    let server = LlamaServer::start(&Options::new(Model::Tiny, 1));
    let prompt = "count the tokens";
    for (api, include_usage, usage_expected) in [
        (ApiKind::Chat, true, true),
        (ApiKind::Chat, false, false),
        (ApiKind::Completions, true, true),
        (ApiKind::Completions, false, true),
    ] {
        let mut config = openai(api);
        config.include_usage = include_usage;
        config.continuous_usage = false;
        let exchange = exchange(&server, config, &spec(prompt, 16)).await;
        assert!(exchange.failure.is_none(), "{:?}", exchange.failure);
        assert_eq!(
            exchange.usage.is_some(),
            usage_expected,
            "{api:?} include_usage={include_usage}"
        );
        assert!(exchange.server_timings.is_some(), "timings come regardless");
    }
    // Without usage goodput counts with its tokenizer and says so.
    let mut config = openai(ApiKind::Chat);
    config.include_usage = false;
    config.continuous_usage = false;
    let result = run(&server, closed(1, 2), config, 16, 16).await;
    assert_all_ok(&result.records);
    for record in &result.records {
        assert_eq!(record.output_tokens_source, TokenSource::Tokenizer);
    }
    assert_eq!(result.step.tokens.output_from_usage, 0);
}

#[tokio::test]
async fn non_streamed_answers_count_from_usage() {
    let server = LlamaServer::start(&Options::new(Model::Tiny, 1));
    for api in [ApiKind::Chat, ApiKind::Completions] {
        let mut config = openai(api);
        config.stream = false;
        let result = run(&server, closed(1, 2), config, 32, 64).await;
        assert_all_ok(&result.records);
        for record in &result.records {
            assert_eq!(record.output_tokens, 64);
            assert_eq!(record.output_tokens_source, TokenSource::Usage);
            assert_eq!(record.first_token_us, None, "no TTFT without streaming");
            assert!(record.server_timings.is_some());
        }
    }
}
