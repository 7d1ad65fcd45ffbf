//! Dataset and trace files: the committed samples are what the project generates and every one
//! loads; bad files (empty, unreadable, malformed line, unknown column, negative length) give
//! errors naming the file, line and field, or are skipped and counted with `--skip-invalid`;
//! and arbitrary lines never panic a parser (property tests, bounded).
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use goodput_core::workload::agent_trace::load_agent_trace;
use goodput_core::workload::dataset::{
    DatasetFormat, load_prompts, load_sharegpt, parse_conversation, parse_prompt_line,
};
use goodput_core::workload::samples::sample_files;
use goodput_core::workload::source::{Place, RecordError, WorkloadFileError};
use goodput_core::workload::trace::{CsvHeader, TraceFormat, load_trace, parse_jsonl_row};
use proptest::prelude::*;

fn samples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../samples")
}

#[test]
fn committed_samples_are_what_the_project_generates() {
    let bless = std::env::var_os("GOODPUT_BLESS_SAMPLES").is_some();
    for (name, content) in sample_files() {
        let path = samples_dir().join(name);
        if bless {
            std::fs::create_dir_all(samples_dir()).unwrap();
            std::fs::write(&path, &content).unwrap();
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e} (GOODPUT_BLESS_SAMPLES=1 writes it)",
                path.display()
            )
        });
        assert_eq!(
            committed, content,
            "{name} is stale; GOODPUT_BLESS_SAMPLES=1 rewrites it"
        );
    }
}

#[test]
fn every_sample_loads() {
    let dir = samples_dir();
    let prompts = load_prompts(&dir.join("prompts.jsonl"), false).unwrap();
    assert_eq!(prompts.records.len(), 16);
    let sharegpt = load_sharegpt(&dir.join("sharegpt.json"), false).unwrap();
    assert_eq!(sharegpt.records.len(), 4);
    assert!(sharegpt.records.iter().all(|c| c.turns.len() >= 2));
    let agent = load_agent_trace(&dir.join("agent_sessions.jsonl"), false).unwrap();
    let turns: Vec<usize> = agent.records.iter().map(|s| s.turns.len()).collect();
    assert_eq!(turns, [4, 3, 1]);
    let tools = agent
        .records
        .iter()
        .flat_map(|s| &s.turns)
        .filter(|t| t.tool_result);
    assert_eq!(tools.count(), 3);
    let bytes = std::fs::read(dir.join("agent_sessions.jsonl")).unwrap();
    assert_eq!(DatasetFormat::detect(&bytes), DatasetFormat::Agent);
    for (name, format, rows) in [
        ("trace_goodput.csv", TraceFormat::Goodput, 30),
        ("trace_azure.csv", TraceFormat::Azure, 40),
        ("trace_burstgpt.csv", TraceFormat::BurstGpt, 40),
        ("trace_mooncake.jsonl", TraceFormat::Mooncake, 30),
    ] {
        let (detected, loaded) = load_trace(&dir.join(name), None, false).unwrap();
        assert_eq!(detected, format, "{name}");
        assert_eq!(loaded.records.len(), rows, "{name}");
    }
    let bytes = std::fs::read(dir.join("sharegpt.json")).unwrap();
    assert_eq!(DatasetFormat::detect(&bytes), DatasetFormat::ShareGpt);
}

fn write(dir: &tempfile::TempDir, name: &str, content: &str) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, content).unwrap();
    path
}

fn record_error(error: WorkloadFileError) -> RecordError {
    match error {
        WorkloadFileError::Record(error) => error,
        other => panic!("expected a record error, got {other}"),
    }
}

#[test]
fn bad_files_name_the_file_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let empty = write(&dir, "empty.jsonl", "\n  \n");
    let error = load_prompts(&empty, false).unwrap_err().to_string();
    assert!(
        error.contains("empty.jsonl") && error.contains("no records"),
        "{error}"
    );
    let missing = dir.path().join("missing.jsonl");
    let error = load_prompts(&missing, false).unwrap_err().to_string();
    assert!(
        error.contains("missing.jsonl") && error.contains("cannot read"),
        "{error}"
    );
    let text = "{\"prompt\": \"fine\"}\n{\"prompt\": \"x\", \"output_tokens\": -4}\n{oops\n";
    let bad = write(&dir, "bad.jsonl", text);
    let error = record_error(load_prompts(&bad, false).unwrap_err());
    assert_eq!((error.line, error.field.as_str()), (2, "output_tokens"));
    assert!(error.path.ends_with("bad.jsonl"));
    let message = load_prompts(&bad, false).unwrap_err().to_string();
    assert!(
        message.contains("bad.jsonl:2: field `output_tokens`: must not be negative"),
        "{message}"
    );
    assert!(message.contains("--skip-invalid"), "{message}");
    let skipped = load_prompts(&bad, true).unwrap();
    assert_eq!((skipped.records.len(), skipped.skipped), (1, 2));
    assert_eq!(skipped.first_skipped.unwrap().line, 2);
    let trace = write(
        &dir,
        "t.csv",
        "timestamp_ms,input_tokens,output_tokens,tenant\n1,2,3,a\n",
    );
    let error = record_error(load_trace(&trace, None, true).unwrap_err());
    assert_eq!((error.line, error.field.as_str()), (1, "tenant"));
    let all_bad = write(
        &dir,
        "all_bad.csv",
        "TIMESTAMP,ContextTokens,GeneratedTokens\nnow,1,2\n",
    );
    let error = load_trace(&all_bad, None, true).unwrap_err().to_string();
    assert!(
        error.contains("every one of its 1 records is invalid"),
        "{error}"
    );
    assert!(
        error.contains("all_bad.csv:2: field `TIMESTAMP`"),
        "{error}"
    );
    let array = write(
        &dir,
        "s.json",
        "[\n{\"conversations\": [{\"from\": \"human\", \"value\": \"hi\"}]},\n{\"conversations\": 3}\n]",
    );
    let error = record_error(load_sharegpt(&array, false).unwrap_err());
    assert_eq!((error.line, error.field.as_str()), (3, "conversations"));
}

/// Checks that a parse result is a record or a located error.
fn located<T>(result: Result<T, RecordError>, line: usize) -> Result<(), TestCaseError> {
    if let Err(error) = result {
        prop_assert_eq!(error.path, "f");
        prop_assert_eq!(error.line, line);
        prop_assert!(!error.field.is_empty());
        prop_assert!(!error.message.is_empty());
    }
    Ok(())
}

/// JSON-ish lines: objects with known and unknown keys and values of every type.
fn json_line(keys: &'static [&'static str]) -> impl Strategy<Value = Vec<u8>> {
    let value = prop_oneof![
        Just("null".to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<f64>().prop_map(|n| format!("{n}")),
        "[a-z ]{0,12}".prop_map(|s| format!("\"{s}\"")),
        Just("[1, -2, 3]".to_string()),
        Just("[{\"from\": \"human\", \"value\": \"hi\"}, {\"from\": \"gpt\"}]".to_string()),
        Just("[{\"role\": \"user\", \"content\": \"x\"}]".to_string()),
        Just("{}".to_string()),
    ];
    let key = prop_oneof![
        proptest::sample::select(keys).prop_map(str::to_string),
        "[a-z_]{1,8}"
    ];
    proptest::collection::vec((key, value), 0..5).prop_map(|pairs| {
        let body: Vec<String> = pairs.iter().map(|(k, v)| format!("\"{k}\": {v}")).collect();
        format!("{{{}}}", body.join(", ")).into_bytes()
    })
}

fn any_line() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..80),
        "[ -~]{0,80}".prop_map(String::into_bytes),
        "[0-9.,: -]{0,40}".prop_map(String::into_bytes),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn dataset_lines_never_panic(
        line in prop_oneof![any_line(), json_line(&["prompt", "messages", "output_tokens", "conversations", "id", "system"])],
        number in 1usize..10_000,
    ) {
        let place = Place { path: "f", line: number };
        located(parse_prompt_line(place, &line), number)?;
        located(parse_conversation(place, &line), number)?;
    }

    #[test]
    fn trace_lines_never_panic(
        line in prop_oneof![any_line(), json_line(&["timestamp", "timestamp_ms", "input_length", "output_length", "input_tokens", "output_tokens", "hash_ids"])],
        number in 2usize..10_000,
    ) {
        let place = Place { path: "f", line: number };
        for format in [TraceFormat::Mooncake, TraceFormat::Goodput] {
            located(parse_jsonl_row(place, format, &line), number)?;
        }
        let header_place = Place { path: "f", line: 1 };
        for header in [
            &b"TIMESTAMP,ContextTokens,GeneratedTokens"[..],
            b"Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type",
            b"timestamp_ms,input_tokens,output_tokens",
        ] {
            let header = CsvHeader::parse(header_place, header, None).unwrap();
            located(header.row(place, &line), number)?;
        }
        located(CsvHeader::parse(place, &line, None), number)?;
    }

    #[test]
    fn valid_trace_rows_round_trip(at in 0u64..10_000_000, input in 1u32..100_000, output in 1u32..5000) {
        let header = CsvHeader::parse(Place { path: "f", line: 1 }, b"timestamp_ms,input_tokens,output_tokens", None).unwrap();
        let line = format!("{at},{input},{output}");
        let row = header.row(Place { path: "f", line: 2 }, line.as_bytes()).unwrap();
        prop_assert_eq!((row.at_us, row.input_tokens, row.output_tokens), (at * 1000, input, output));
    }
}
