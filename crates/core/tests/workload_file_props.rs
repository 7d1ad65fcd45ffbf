//! Property tests of the dataset and trace parsers: records built from a model round-trip
//! exactly through their file formats (prompts JSONL, ShareGPT, goodput CSV and JSONL traces,
//! Mooncake), and arbitrary bytes never panic — every file either loads or fails with an
//! error naming the file. Bounded case counts.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

use goodput_core::workload::dataset::{DatasetPrompt, PromptRecord, load_prompts, load_sharegpt};
use goodput_core::workload::source::WorkloadFileError;
use goodput_core::workload::trace::{TraceFormat, load_trace};
use proptest::prelude::*;
use serde_json::json;

fn write(dir: &tempfile::TempDir, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// Prompt text with something visible in it (an all-blank prompt is rejected, rightly).
fn prompt_text() -> impl Strategy<Value = String> {
    ("\\PC{0,40}", "[a-zA-Z0-9]{1,8}", "\\PC{0,40}").prop_map(|(a, b, c)| format!("{a}{b}{c}"))
}

/// The error of a file that did not load names the file.
fn names_the_file(error: &WorkloadFileError, path: &std::path::Path) -> bool {
    error.to_string().contains(&path.display().to_string())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn prompts_jsonl_round_trips(
        records in prop::collection::vec((prompt_text(), prop::option::of(1u32..100_000)), 1..20)
    ) {
        let dir = tempfile::tempdir().unwrap();
        let mut text = String::new();
        for (prompt, output_tokens) in &records {
            let mut line = json!({ "prompt": prompt });
            if let Some(n) = output_tokens {
                line["output_tokens"] = json!(n);
            }
            text.push_str(&line.to_string());
            text.push('\n');
        }
        let path = write(&dir, "prompts.jsonl", text.as_bytes());
        let loaded = load_prompts(&path, false).unwrap();
        let expected: Vec<PromptRecord> = records
            .iter()
            .map(|(prompt, output_tokens)| PromptRecord {
                prompt: DatasetPrompt::Text(prompt.clone()),
                output_tokens: *output_tokens,
            })
            .collect();
        prop_assert_eq!(loaded.records, expected);
        prop_assert_eq!(loaded.skipped, 0);
    }

    #[test]
    fn sharegpt_keeps_every_user_turn_in_order(
        conversations in prop::collection::vec(prop::collection::vec((prompt_text(), prompt_text()), 1..5), 1..8)
    ) {
        let dir = tempfile::tempdir().unwrap();
        let elements: Vec<serde_json::Value> = conversations
            .iter()
            .enumerate()
            .map(|(i, turns)| {
                let messages: Vec<serde_json::Value> = turns
                    .iter()
                    .flat_map(|(user, reply)| {
                        [json!({"from": "human", "value": user}), json!({"from": "gpt", "value": reply})]
                    })
                    .collect();
                json!({ "id": format!("c{i}"), "conversations": messages })
            })
            .collect();
        let path = write(&dir, "sharegpt.json", serde_json::to_string_pretty(&elements).unwrap().as_bytes());
        let loaded = load_sharegpt(&path, false).unwrap();
        prop_assert_eq!(loaded.records.len(), conversations.len());
        for (conversation, turns) in loaded.records.iter().zip(&conversations) {
            let users: Vec<&str> = conversation.turns.iter().map(|t| t.user.as_str()).collect();
            let expected: Vec<&str> = turns.iter().map(|(user, _)| user.as_str()).collect();
            prop_assert_eq!(users, expected);
        }
    }

    #[test]
    fn goodput_traces_round_trip_in_csv_and_jsonl(
        rows in prop::collection::vec((0u64..10_000_000, 1u32..200_000, 1u32..20_000), 1..30)
    ) {
        let dir = tempfile::tempdir().unwrap();
        let mut at_us = 0u64;
        let rows: Vec<(u64, u32, u32)> = rows
            .into_iter()
            .map(|(gap_us, input, output)| {
                at_us += gap_us / 1000 * 1000; // whole milliseconds: exact in both forms
                (at_us, input, output)
            })
            .collect();
        let mut csv = String::from("timestamp_ms,input_tokens,output_tokens\n");
        let mut jsonl = String::new();
        for (at, input, output) in &rows {
            csv.push_str(&format!("{},{input},{output}\n", at / 1000));
            jsonl.push_str(&json!({"timestamp_ms": at / 1000, "input_tokens": input, "output_tokens": output}).to_string());
            jsonl.push('\n');
        }
        for (name, text) in [("trace.csv", csv), ("trace.jsonl", jsonl)] {
            let path = write(&dir, name, text.as_bytes());
            let (format, loaded) = load_trace(&path, None, false).unwrap();
            prop_assert_eq!(format, TraceFormat::Goodput);
            let got: Vec<(u64, u32, u32)> = loaded
                .records
                .iter()
                .map(|r| (r.at_us, r.input_tokens, r.output_tokens))
                .collect();
            prop_assert_eq!(&got, &rows);
        }
    }

    #[test]
    fn mooncake_keeps_hash_ids(
        rows in prop::collection::vec((0u64..100_000, 1u32..100_000, 1u32..4_000, prop::collection::vec(0u64..1_000, 0..8)), 1..20)
    ) {
        let dir = tempfile::tempdir().unwrap();
        let text: String = rows
            .iter()
            .map(|(at, input, output, hashes)| {
                json!({"timestamp": at, "input_length": input, "output_length": output, "hash_ids": hashes})
                    .to_string()
                    + "\n"
            })
            .collect();
        let path = write(&dir, "mooncake.jsonl", text.as_bytes());
        let (format, loaded) = load_trace(&path, None, false).unwrap();
        prop_assert_eq!(format, TraceFormat::Mooncake);
        for (row, (at, input, output, hashes)) in loaded.records.iter().zip(&rows) {
            prop_assert_eq!(row.at_us, at * 1000);
            prop_assert_eq!((row.input_tokens, row.output_tokens), (*input, *output));
            prop_assert_eq!(&row.hash_ids, hashes);
        }
    }

    #[test]
    fn arbitrary_bytes_load_or_fail_naming_the_file(
        bytes in prop::collection::vec(any::<u8>(), 0..400),
        prefix in prop::sample::select(vec![
            "", "{\"prompt\": ", "[{\"conversations\": ", "timestamp_ms,input_tokens,output_tokens\n",
            "{\"timestamp\": 1, ", "TIMESTAMP,ContextTokens,GeneratedTokens\n",
        ]),
        skip_invalid in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let mut content = prefix.as_bytes().to_vec();
        content.extend_from_slice(&bytes);
        let path = write(&dir, "input.dat", &content);
        if let Err(error) = load_prompts(&path, skip_invalid) {
            prop_assert!(names_the_file(&error, &path), "{error}");
        }
        if let Err(error) = load_sharegpt(&path, skip_invalid) {
            prop_assert!(names_the_file(&error, &path), "{error}");
        }
        if let Err(error) = load_trace(&path, None, skip_invalid) {
            prop_assert!(names_the_file(&error, &path), "{error}");
        }
    }
}
