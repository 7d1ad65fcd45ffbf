//! CSV exports: `summary.csv` (one row per step, one column per figure of the report, named by
//! its path) and `requests.csv` (one row per journaled request with its derived latencies).

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};
use goodput_core::decide::report_path::leaves;
use goodput_core::record::{Phase, RequestRecord};
use goodput_core::report::Report;

/// Step sections that are series, not figures.
const SERIES: [&str; 2] = ["windows", "distributions_ms"];

/// `summary.csv`: one row per step.
pub(crate) fn summary(report: &Report) -> Result<String> {
    let value = serde_json::to_value(report).context("serializing the report")?;
    let steps = value["steps"].as_array().cloned().unwrap_or_default();
    let rows: Vec<Vec<(String, f64)>> = steps
        .iter()
        .map(|step| {
            let mut step = step.clone();
            if let Some(map) = step.as_object_mut() {
                for key in SERIES {
                    map.remove(key);
                }
            }
            leaves(&step)
        })
        .collect();
    let mut columns: Vec<String> = Vec::new();
    let mut seen = BTreeSet::new();
    for row in &rows {
        for (path, _) in row {
            if seen.insert(path.clone()) {
                columns.push(path.clone());
            }
        }
    }
    let mut out = String::from("step,load.mode");
    for column in &columns {
        out.push(',');
        out.push_str(&field(column));
    }
    out.push('\n');
    for (i, row) in rows.iter().enumerate() {
        let mode = steps[i]["load"]["mode"].as_str().unwrap_or("");
        let _ = write!(out, "{i},{}", field(mode));
        for column in &columns {
            out.push(',');
            if let Some((_, v)) = row.iter().find(|(p, _)| p == column) {
                let _ = write!(out, "{v}");
            }
        }
        out.push('\n');
    }
    Ok(out)
}

const REQUEST_COLUMNS: &str = "index,phase,outcome,status,scheduled_s,sent_s,first_token_s,end_s,\
ttft_ms,ttft_from_send_ms,tpot_ms,e2e_ms,e2e_from_send_ms,dispatch_lag_ms,client_queue_wait_ms,\
input_tokens,output_tokens,requested_output_tokens,chunks,finish_reason,retries,failure,\
reasoning_tokens,answer_tokens,ttfat_ms,thinking_ms,tool_calls,time_to_first_tool_call_ms,\
ended_in_tool_call,session,turn,tool_result_turn,expected_prefix_tokens,cached_input_tokens,images,\
request_id,server_request_id,response_id,model,adapter,class,target,replica,\
audio_input_seconds,audio_output_seconds,real_time_factor,image_size,image_steps";

/// `requests.csv`: one row per request of the journal, in journal order.
pub(crate) fn requests(records: &[RequestRecord]) -> String {
    let mut out = String::from(REQUEST_COLUMNS);
    out.push('\n');
    let ms = |d: Option<std::time::Duration>| {
        d.map(|d| format!("{}", d.as_micros() as f64 / 1000.0))
            .unwrap_or_default()
    };
    let secs = |us: Option<u64>| {
        us.map(|us| format!("{}", us as f64 / 1e6))
            .unwrap_or_default()
    };
    for r in records {
        let phase = match r.phase {
            Phase::Warmup => "warmup",
            Phase::Measure => "measure",
        };
        let cells = [
            r.index.to_string(),
            phase.to_string(),
            r.outcome().to_string(),
            r.status.map(|s| s.to_string()).unwrap_or_default(),
            secs(Some(r.scheduled_us)),
            secs(r.sent_us),
            secs(r.first_token_us),
            secs(Some(r.end_us)),
            ms(r.ttft()),
            ms(r.ttft_from_send()),
            ms(r.tpot()),
            ms(r.e2e()),
            ms(r.e2e_from_send()),
            ms(r.dispatch_lag()),
            ms(Some(r.client_queue_wait())),
            r.input_tokens.map(|t| t.to_string()).unwrap_or_default(),
            r.output_tokens.to_string(),
            r.requested_output_tokens
                .map(|t| t.to_string())
                .unwrap_or_default(),
            r.chunks.len().to_string(),
            r.finish_reason.clone().unwrap_or_default(),
            r.retries.to_string(),
            r.failure
                .as_ref()
                .map(|f| f.message.clone())
                .unwrap_or_default(),
        ];
        let cells: Vec<String> = cells
            .into_iter()
            .chain(channel_cells(r, ms))
            .chain(fleet_cells(r))
            .chain(audio_cells(r))
            .chain(generation_cells(r))
            .collect();
        let line: Vec<String> = cells.iter().map(|c| field(c)).collect();
        out.push_str(&line.join(","));
        out.push('\n');
    }
    out
}

/// The reasoning, tool-call, session, prefix-reuse and image cells of a request (empty when it
/// had none of them; images as their sizes separated by spaces).
fn channel_cells(
    r: &RequestRecord,
    ms: impl Fn(Option<std::time::Duration>) -> String,
) -> [String; 13] {
    let number = |n: Option<u64>| n.map(|n| n.to_string()).unwrap_or_default();
    let flag = |on: bool| if on { "true" } else { "false" }.to_string();
    let answer = r.reasoning_tokens.map(|_| r.answer_tokens());
    [
        number(r.reasoning_tokens),
        number(answer),
        ms(r.ttfat()),
        ms(r.thinking_time()),
        r.tool_calls.to_string(),
        ms(r.time_to_first_tool_call()),
        flag(r.ended_in_tool_call),
        number(r.session),
        number(r.turn.map(u64::from)),
        flag(r.tool_result_turn),
        number(r.expected_prefix_tokens),
        number(r.cached_input_tokens),
        r.images
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(" "),
    ]
}

/// The audio sent and produced, and the real-time factor (E2E from send ÷ the audio).
fn audio_cells(r: &RequestRecord) -> [String; 3] {
    let number = |n: Option<f64>| n.map(|n| n.to_string()).unwrap_or_default();
    let audio = r.audio.unwrap_or_default();
    let rtf = r
        .e2e_from_send()
        .zip(audio.seconds())
        .map(|(e2e, seconds)| e2e.as_secs_f64() / seconds);
    [
        number(audio.input_seconds),
        number(audio.output_seconds),
        number(rtf),
    ]
}

/// Image generation: the size and steps the request asked for (empty when it named none).
fn generation_cells(r: &RequestRecord) -> [String; 2] {
    let generation = r.generation.unwrap_or_default();
    [
        generation.size.map(|s| s.to_string()).unwrap_or_default(),
        generation.steps.map(|s| s.to_string()).unwrap_or_default(),
    ]
}

/// The correlation ids (sent, the server's header, the body's), the model, adapter and SLO
/// class of a request, and the fleet's target and replica (empty when it had none).
fn fleet_cells(r: &RequestRecord) -> [String; 8] {
    [
        &r.request_id,
        &r.server_request_id,
        &r.response_id,
        &r.model,
        &r.adapter,
        &r.class,
        &r.target,
        &r.replica,
    ]
    .map(|cell| cell.clone().unwrap_or_default())
}

/// One CSV field, quoted when it holds a separator, a quote or a line break.
fn field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

/// Writes `text` to `path`.
pub(crate) fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_quoted_when_needed() {
        assert_eq!(field("plain"), "plain");
        assert_eq!(field("a,b"), "\"a,b\"");
        assert_eq!(field("say \"hi\""), "\"say \"\"hi\"\"\"");
    }
}
