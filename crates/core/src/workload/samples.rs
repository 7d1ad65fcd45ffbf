//! The small sample files committed under `samples/` (one per supported format), generated
//! here from a fixed seed and text written for the project, so they can be rebuilt and checked
//! (`crates/core/tests/workload_files.rs` fails when `samples/` differs from this output; set
//! `GOODPUT_BLESS_SAMPLES=1` to rewrite them). Nothing is downloaded.

use std::fmt::Write;

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, Exp, LogNormal};
use serde_json::json;

/// Questions and instructions written for the project.
const PROMPTS: [&str; 16] = [
    "Explain why a benchmark should measure latency from the scheduled send time.",
    "Write a haiku about a queue that never drains.",
    "Summarise the trade-off between batch size and time to first token.",
    "List three ways a prefix cache can be defeated by a careless benchmark.",
    "What is the difference between throughput and goodput?",
    "Translate 'the server answered in time' into French and German.",
    "Give a recipe for a quick vegetable soup for four people.",
    "Describe a lighthouse at night in two sentences.",
    "Write a Python function that returns the 99th percentile of a list.",
    "Why do long conversations make each new turn slower to start?",
    "Plan a three-day walking trip through a mountain valley.",
    "Explain Little's law with an example from a coffee shop.",
    "Suggest names for a cat that likes to sit on keyboards.",
    "What should a capacity plan say about failures of one machine?",
    "Rewrite this sentence more clearly: the thing was done by us quickly.",
    "Compare open-loop and closed-loop load generation in a short table.",
];

/// Replies written for the project (their lengths become answer lengths).
const REPLIES: [&str; 8] = [
    "Because a request that waits in the client is still waiting for the user.",
    "Here is a short answer with the main points first, then the details.",
    "It depends on the prompt length, the batch, and how busy the server is.",
    "Start with the simplest measurement, then change one thing at a time.",
    "Yes. The second option keeps the tail latency lower under the same load.",
    "A queue that grows for the whole run means the load is above capacity.",
    "Three steps: measure, compare with the target, and repeat at a higher rate.",
    "The cache only helps when the shared part comes first and is identical.",
];

/// Every sample: file name (under `samples/`) and content.
pub fn sample_files() -> Vec<(&'static str, String)> {
    vec![
        ("prompts.jsonl", prompts_jsonl()),
        ("sharegpt.json", sharegpt_json()),
        ("agent_sessions.jsonl", AGENT_SESSIONS.to_string()),
        ("trace_goodput.csv", goodput_csv()),
        ("trace_azure.csv", azure_csv()),
        ("trace_burstgpt.csv", burstgpt_csv()),
        ("trace_mooncake.jsonl", mooncake_jsonl()),
    ]
}

/// Recorded agent sessions (`agent` dataset format), written for the project.
const AGENT_SESSIONS: &str = r##"{"id": "fix-failing-test", "system": "You are a coding agent. Use the tools to read files and run commands, then answer briefly.", "turns": [{"role": "user", "content": "The test parse_duration_rejects_negatives fails. Find out why and fix it.", "output_tokens": 48}, {"role": "assistant", "content": "I will read the parser first."}, {"role": "tool", "content": "pub fn parse_duration(text: &str) -> Result<Duration, String> { let value: f64 = text.trim_end_matches('s').parse().map_err(|e| format!(\"{e}\"))?; Ok(Duration::from_secs_f64(value)) }", "latency_ms": 120}, {"role": "assistant", "content": "The parser never checks the sign; Duration::from_secs_f64 panics on negative input. I will run the test to confirm."}, {"role": "tool", "content": "running 1 test\ntest parse_duration_rejects_negatives ... FAILED\nthread panicked at 'cannot convert float seconds to Duration: value is negative'", "latency_ms": 900}, {"role": "assistant", "content": "Confirmed. The fix is to reject values below zero before converting, returning an error that names the input."}, {"role": "user", "content": "Good. Also make it reject NaN and infinity, and show me the final function.", "think_time_ms": 4000}, {"role": "assistant", "content": "Here is the function with the three checks, each returning an error that quotes the text it could not read."}]}
{"id": "search-and-summarise", "system": "You are a research assistant with a web search tool.", "turns": [{"role": "user", "content": "What changed in the last release of the HTTP library we use? Summarise the breaking changes."}, {"role": "assistant", "content": "Searching the release notes."}, {"role": "tool", "content": "Release notes: the client builder no longer enables HTTP/2 by default; timeouts are now per request; the deprecated proxy API was removed; connection pools are keyed by host and port.", "latency_ms": 650, "output_tokens": 64}, {"role": "user", "content": "Which of these affect a load generator that keeps connections alive?", "think_time_ms": 2500, "output_tokens": 40}]}
{"id": "single-question", "turns": [{"role": "user", "content": "In one sentence, what is goodput?", "output_tokens": 24}]}
"##;

fn rng(tag: u64) -> Xoshiro256PlusPlus {
    Xoshiro256PlusPlus::seed_from_u64(0x5a4e_91e5 ^ tag)
}

fn prompts_jsonl() -> String {
    let mut text = String::new();
    for (i, prompt) in PROMPTS.iter().enumerate() {
        let line = match i % 4 {
            0 => json!({"prompt": prompt}),
            1 | 2 => json!({"prompt": prompt, "output_tokens": 32 * (i % 5 + 1)}),
            _ => json!({
                "messages": [
                    {"role": "system", "content": "You are a concise assistant."},
                    {"role": "user", "content": prompt},
                ],
                "output_tokens": 64,
            }),
        };
        let _ = writeln!(text, "{line}");
    }
    text
}

fn sharegpt_json() -> String {
    let mut conversations = Vec::new();
    for c in 0..4 {
        let mut messages = Vec::new();
        for t in 0..(2 + c % 3) {
            messages
                .push(json!({"from": "human", "value": PROMPTS[(c * 5 + t * 3) % PROMPTS.len()]}));
            messages.push(json!({"from": "gpt", "value": REPLIES[(c + t) % REPLIES.len()]}));
        }
        let mut conversation = json!({"id": format!("sample-{c}"), "conversations": messages});
        if c == 1 {
            conversation["system"] = json!("Answer in one paragraph.");
        }
        conversations.push(conversation);
    }
    let mut text = serde_json::to_string_pretty(&conversations).unwrap_or_default();
    text.push('\n');
    text
}

/// Arrival gaps (seconds, exponential with a burst in the middle) and lengths of `n` requests.
fn requests(tag: u64, n: usize) -> Vec<(f64, u32, u32)> {
    let mut rng = rng(tag);
    let gaps = Exp::new(4.0).unwrap_or_else(|_| unreachable!("a valid rate"));
    let burst = Exp::new(40.0).unwrap_or_else(|_| unreachable!("a valid rate"));
    let input = LogNormal::new(6.5, 0.9).unwrap_or_else(|_| unreachable!("valid parameters"));
    let output = LogNormal::new(4.5, 0.8).unwrap_or_else(|_| unreachable!("valid parameters"));
    let mut at = 0.0;
    (0..n)
        .map(|i| {
            let gap = if (n / 3..n / 2).contains(&i) {
                burst.sample(&mut rng)
            } else {
                gaps.sample(&mut rng)
            };
            at += gap;
            let input: f64 = input.sample(&mut rng);
            let output: f64 = output.sample(&mut rng);
            (
                at,
                input.clamp(8.0, 8000.0) as u32,
                output.clamp(1.0, 1000.0) as u32,
            )
        })
        .collect()
}

fn goodput_csv() -> String {
    let mut text = String::from("timestamp_ms,input_tokens,output_tokens\n");
    for (at, input, output) in requests(1, 30) {
        let _ = writeln!(text, "{:.3},{input},{output}", at * 1000.0);
    }
    text
}

fn azure_csv() -> String {
    let mut text = String::from("TIMESTAMP,ContextTokens,GeneratedTokens\n");
    for (at, input, output) in requests(2, 40) {
        let total = 15.0 * 60.0 + 46.680_590_0 + at;
        let (minutes, seconds) = ((total / 60.0).floor(), total % 60.0);
        let _ = writeln!(
            text,
            "2023-11-16 18:{minutes:02}:{seconds:010.7},{input},{output}"
        );
    }
    text
}

fn burstgpt_csv() -> String {
    let mut text =
        String::from("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n");
    for (i, (at, input, output)) in requests(3, 40).into_iter().enumerate() {
        let model = if i % 3 == 0 { "GPT-4" } else { "ChatGPT" };
        let _ = writeln!(
            text,
            "{:.0},{model},{input},{output},{},Conversation log",
            at.floor(),
            input + output
        );
    }
    text
}

fn mooncake_jsonl() -> String {
    let mut rng = rng(4);
    let mut text = String::new();
    let mut next_id = 100u64;
    let shared: Vec<Vec<u64>> = (0..3)
        .map(|g| (0..(2 + g)).map(|b| g as u64 * 10 + b as u64).collect())
        .collect();
    for (i, (at, _, output)) in requests(5, 30).into_iter().enumerate() {
        let mut ids = shared[rng.random_range(0..shared.len())].clone();
        let unique = rng.random_range(1..=3);
        ids.extend((0..unique).map(|_| {
            next_id += 1;
            next_id
        }));
        let input = (ids.len() as u32 - 1) * 512 + rng.random_range(1..=512);
        let line = json!({
            "timestamp": (at * 1000.0).round() as u64 + i as u64,
            "input_length": input,
            "output_length": output,
            "hash_ids": ids,
        });
        let _ = writeln!(text, "{line}");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_are_deterministic() {
        assert_eq!(sample_files(), sample_files());
        assert!(
            azure_csv()
                .lines()
                .nth(1)
                .is_some_and(|l| l.starts_with("2023-11-16 18:15:4"))
        );
    }
}
