//! Methodology checks: warnings attached to a report when the run itself undermines its
//! numbers (too few samples for the percentile quoted, too short a window, no warmup, an SLO
//! judged in closed loop, failures, an unstable queue, a client that could not keep the
//! schedule, token counts that disagree). Each names the fix.

use crate::config::{LoadSpec, RunConfig, Warmup};
use crate::metrics::stability::Verdict;
use crate::report::{StepReport, Warning};
use crate::runner::EndReason;

/// Samples below which a p99 is not trustworthy (MLPerf early stopping: 459 passing queries
/// are needed to claim p99 at 99 % confidence with no over-latency query).
pub const P99_TRUSTED_SAMPLES: u64 = 459;

/// Measurement windows shorter than this are flagged.
pub const SHORT_WINDOW_SECS: f64 = 10.0;

/// Dispatch lag p99 above which, in open loop without a cap, the client is suspected of not
/// keeping the schedule, ms.
pub const DISPATCH_LAG_ALARM_MS: f64 = 5.0;

/// Every warning that applies to a run with `config`, its steps and how it ended.
pub fn check(config: &RunConfig, steps: &[StepReport], end: EndReason) -> Vec<Warning> {
    let mut warnings = Vec::new();
    match end {
        EndReason::Interrupted => warnings.push(Warning::new(
            "interrupted",
            "the run was interrupted; in-flight requests were recorded as cancelled".into(),
            "let the run finish for complete figures",
        )),
        EndReason::NoProgress => warnings.push(Warning::new(
            "no_progress",
            format!(
                "the target sent nothing for {:?} with requests in flight; the run was abandoned",
                config.no_progress_timeout
            ),
            "check the server; raise --no-progress-timeout if it is just very slow",
        )),
        EndReason::SinkFailed => warnings.push(Warning::new(
            "journal_failed",
            "writing the journal failed; the run was stopped".into(),
            "free disk space or choose another --out directory",
        )),
        EndReason::Completed => {}
    }
    if config.warmup == Warmup::None {
        warnings.push(Warning::new(
            "no_warmup",
            "no warmup: cold-start effects (connection set-up, caches, compilation) are in the numbers".into(),
            "add --warmup 10% (or a request count or duration)",
        ));
    }
    let closed_loop = if steps.is_empty() {
        matches!(config.load, LoadSpec::Closed { .. })
    } else {
        steps.iter().any(|step| step.load.mode == "closed")
    };
    if config.slo.is_some() && closed_loop {
        warnings.push(Warning::new(
            "slo_in_closed_loop",
            "the SLO was judged under closed-loop load, which hides queueing delay".into(),
            "validate SLOs with open-loop load: --rate R (Poisson arrivals)",
        ));
    }
    for (index, step) in steps.iter().enumerate() {
        let first = warnings.len();
        check_step(config, step, &mut warnings);
        if steps.len() > 1 {
            let about_step: Vec<Warning> = warnings
                .drain(first..)
                .map(|w| w.about_step(index))
                .collect();
            warnings.extend(about_step);
        }
    }
    warnings
}

fn check_step(config: &RunConfig, step: &StepReport, warnings: &mut Vec<Warning>) {
    check_sample(step, warnings);
    check_outcome(step, warnings);
    check_client(config, step, warnings);
    check_tokens(step, warnings);
    check_reasoning(step, warnings);
}

/// Answers emptied or cut because the reasoning used the token budget.
fn check_reasoning(step: &StepReport, warnings: &mut Vec<Warning>) {
    let Some(reasoning) = &step.reasoning else {
        return;
    };
    let (empty, truncated) = (reasoning.empty_answers, reasoning.truncated_answers);
    if empty + truncated == 0 {
        return;
    }
    warnings.push(Warning::new(
        "answer_budget_exhausted",
        format!(
            "the reasoning used the token budget: {empty} answers came out empty and {truncated} \
             were cut at max_tokens after thinking through half of it or more (of {} requests \
             with reasoning)",
            reasoning.requests_with_reasoning
        ),
        "raise max_tokens (--output-tokens) or lower the server's thinking budget; compare \
         answer_tokens_per_sec, not output tokens/s",
    ));
}

/// Enough samples and a long enough window for the figures quoted.
fn check_sample(step: &StepReport, warnings: &mut Vec<Warning>) {
    let completed = step.requests.completed;
    if completed < P99_TRUSTED_SAMPLES {
        warnings.push(Warning::new(
            "few_samples",
            format!("p99 figures rest on {completed} completed requests; {P99_TRUSTED_SAMPLES} are needed to trust a p99 at 99 % confidence"),
            "run more requests (--requests) or longer (--duration)",
        ));
    }
    if step.duration_secs < SHORT_WINDOW_SECS {
        warnings.push(Warning::new(
            "short_window",
            format!("the measurement window is {:.1} s; short windows report peaks, not sustainable throughput", step.duration_secs),
            "measure for at least a minute (--duration 60s)",
        ));
    }
}

/// Failures and an unstable queue.
fn check_outcome(step: &StepReport, warnings: &mut Vec<Warning>) {
    if step.requests.failed > 0 {
        let kinds: Vec<String> = step
            .requests
            .failed_by_kind
            .iter()
            .map(|(k, n)| format!("{n} {k}"))
            .collect();
        warnings.push(Warning::new(
            "failures",
            format!("{} of {} measured requests failed ({}); latency percentiles cover successes only, goodput counts failures as misses", step.requests.failed, step.requests.scheduled, kinds.join(", ")),
            "see failed_by_kind and the journal's failure messages",
        ));
    }
    match step.stability.verdict {
        Verdict::Unstable => warnings.push(Warning::new(
            "unstable",
            format!("the queue was not stable: {}; this throughput is the server's completion rate under overload, not a sustainable load", step.stability.reason),
            "lower the load until the run is stable, or use `goodput capacity` to find the sustainable rate",
        )),
        Verdict::Inconclusive => warnings.push(Warning::new(
            "stability_inconclusive",
            // The reason's own closing advice ("…: run longer") is the warning's advice.
            format!(
                "stability could not be judged: {}",
                step.stability.reason.trim_end_matches(": run longer")
            ),
            "run longer (--duration) so the verdict has enough intervals and arrivals after start-up",
        )),
        Verdict::Stable => {}
    }
}

/// A client that could not keep its schedule.
fn check_client(config: &RunConfig, step: &StepReport, warnings: &mut Vec<Warning>) {
    let open_uncapped = matches!(
        config.load,
        LoadSpec::Open {
            max_concurrency: None,
            ..
        } | LoadSpec::Replay {
            max_concurrency: None
        }
    );
    if let Some(lag) = step
        .latency_ms
        .dispatch_lag
        .p99
        .filter(|lag| open_uncapped && *lag > DISPATCH_LAG_ALARM_MS)
    {
        warnings.push(Warning::new(
            "client_lag",
            format!("dispatch lag p99 is {lag:.1} ms: the client did not keep its schedule"),
            "lower the rate, give the client more CPU, or run it on another machine",
        ));
    }
}

/// Token counts that disagree or lengths that missed the request.
fn check_tokens(step: &StepReport, warnings: &mut Vec<Warning>) {
    let completed = step.requests.completed;
    let tokens = &step.tokens;
    if tokens.usage_tokenizer_disagreements > 0 {
        warnings.push(Warning::new(
            "usage_disagrees",
            format!("{} requests' server usage differs from goodput's tokenizer by more than 10 %", tokens.usage_tokenizer_disagreements),
            "expected with a different model vocabulary; otherwise check the server's usage reporting",
        ));
    }
    if tokens.output_length_mismatches > 0 {
        warnings.push(Warning::new(
            "output_length_mismatch",
            format!(
                "{} requests generated a different number of tokens than requested",
                tokens.output_length_mismatches
            ),
            "make sure the server honours ignore_eos/min_tokens, or compare by output tokens",
        ));
    }
    if completed > 0 && tokens.output_from_tokenizer == completed {
        warnings.push(Warning::new(
            "no_usage",
            "the server reported no usage; output tokens were counted with goodput's tokenizer"
                .into(),
            "enable usage reporting on the server (stream_options.include_usage)",
        ));
    }
}
