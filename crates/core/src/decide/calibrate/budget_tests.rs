//! The step budget read from a decoding stream: chunks counted by their share of a full one,
//! a whole prompt in one step, streams that show nothing; the probe sized from a lone decode.

use super::*;
use crate::decide::calibrate::{CalibrationProbe, Tail};

/// A stream decoding every `gap` µs from 0, whose steps from `from` on carry the prompt's
/// chunks (each `per_token` µs a token) until the prompt is done: its token times and the
/// prompt's first token.
fn stream(gap: u64, from: u64, chunks: &[u64], per_token: u64) -> (Vec<u64>, u64) {
    let mut times = vec![0];
    let mut at = 0;
    while at < from {
        at += gap;
        times.push(at);
    }
    for tokens in chunks {
        at += gap + tokens * per_token;
        times.push(at);
    }
    let first = at;
    for _ in 0..20 {
        at += gap;
        times.push(at);
    }
    (times, first)
}

#[test]
fn a_chunked_prompt_is_counted_by_the_stream_gaps_it_grew() {
    // 1,000 prompt tokens through steps of 256 (the decode's token and 255 of the prompt):
    // three full chunks and one of 235, 500 µs a token.
    let (times, first) = stream(10_000, 100_000, &[255, 255, 255, 235], 500);
    let budget = read_budget(&times, (95_000, first), 1000).unwrap();
    let StepBudget::Measured { tokens, steps, .. } = budget else {
        panic!("{budget:?}")
    };
    assert_eq!(tokens, 256);
    assert!((steps - 3.92).abs() < 0.01, "{steps}");
    // With no power of two near the estimate, the estimate: 1,000 tokens in chunks of 383
    // (three steps: 250 to 499 prompt tokens a step; 256 is a third off).
    let (times, first) = stream(10_000, 100_000, &[383, 383, 234], 500);
    let Some(StepBudget::Measured { tokens, .. }) = read_budget(&times, (95_000, first), 1000)
    else {
        panic!()
    };
    assert_eq!(tokens, 384);
    // Two steps allow one power of two (here 512, though the second chunk of 349 tokens cost
    // as much as the first, as on llama-server with `-b 512`).
    let (times, first) = stream(10_000, 100_000, &[511, 511], 500);
    let Some(StepBudget::Measured { tokens, .. }) = read_budget(&times, (95_000, first), 860)
    else {
        panic!()
    };
    assert_eq!(tokens, 512);
}

#[test]
fn a_prompt_in_one_step_bounds_the_budget_from_below() {
    let (times, first) = stream(10_000, 100_000, &[1000], 500);
    assert_eq!(
        read_budget(&times, (95_000, first), 1000),
        Some(StepBudget::AtLeast { tokens: 1001 })
    );
}

#[test]
fn a_stream_that_ended_first_shows_nothing_and_one_that_never_slowed_ran_beside() {
    let (times, first) = stream(10_000, 100_000, &[255, 255, 255, 235], 500);
    // Ended before the prompt's first token.
    let cut: Vec<u64> = times.iter().copied().filter(|t| *t < first).collect();
    assert_eq!(read_budget(&cut, (95_000, first), 1000), None);
    assert_eq!(read_budget(&[], (0, 0), 1000), None);
    // Too few gaps outside the prompt to know the usual one.
    let short = [0, 10_000, 20_000, 130_000, 140_000];
    assert_eq!(read_budget(&short, (5_000, 125_000), 1000), None);
    // No gap grew, and the stream went on past the prompt's first token: it ran beside.
    let even: Vec<u64> = (0..60).map(|k| k * 10_000).collect();
    assert_eq!(
        read_budget(&even, (95_000, 300_000), 1000),
        Some(StepBudget::Beside)
    );
}

#[test]
fn jitter_in_the_usual_gaps_is_not_counted_as_chunks() {
    // The usual gap 10 ms ± 1 ms; two chunks of 512 (511 prompt tokens each), 200 µs a token.
    let (mut times, first) = stream(10_000, 100_000, &[511, 511], 200);
    for (k, t) in times.iter_mut().enumerate() {
        *t += [0, 900, 300, 600][k % 4];
    }
    let Some(StepBudget::Measured { tokens, .. }) = read_budget(&times, (95_000, first), 1022)
    else {
        panic!()
    };
    assert_eq!(tokens, 512);
}

fn measured(concurrency: u32, prompt: f64, output: u32, ttft: f64, tpot: f64) -> ProbeMeasurement {
    ProbeMeasurement {
        probe: CalibrationProbe {
            concurrency,
            input_tokens: prompt as u32,
            output_tokens: output,
            requests: 3,
        },
        prompt_tokens: prompt,
        ttft,
        tpot,
        e2e: ttft + tpot * f64::from(output),
        requests_per_sec: 1.0,
        tails: [Tail::default(); 3],
    }
}

#[test]
fn the_probe_fits_the_slot_and_sends_the_prompt_once_the_stream_decodes() {
    let probes = [
        measured(1, 512.0, 4, 0.5, 0.0),
        measured(1, 40.0, 48, 0.05, 0.01),
        measured(4, 90.0, 48, 0.08, 0.03),
    ];
    let probe = BudgetProbe::sized(1024, &probes).unwrap();
    assert_eq!(probe.prompt_tokens, 816);
    assert!((probe.offset.as_secs_f64() - 0.09).abs() < 1e-9);
    // 9 tokens before the prompt, two per possible chunk of 64, and a margin.
    assert_eq!(probe.stream_tokens, 9 + 2 * 13 + 32);
    assert_eq!(
        BudgetProbe::sized(131_072, &probes).unwrap().prompt_tokens,
        15_000
    );
    // No lone decode measured, or no room for a prompt.
    assert_eq!(BudgetProbe::sized(1024, &probes[..1]), None);
    assert_eq!(BudgetProbe::sized(100, &probes), None);
}

#[test]
fn llama_servers_gaps_with_a_step_of_128_read_as_128() {
    // llama-server (small model, `-np 4 -t 1 -b 128 -ub 128`, 2026-12-03): a stream's gaps in
    // ms while an 838-token prompt ran — seven steps (six of 127 prompt tokens, one of 76),
    // then a step with two sequences decoding.
    let gaps = [
        15, 17, 16, 16, 15, 16, 16, 15, 16, 16, 17, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15,
        122, 124, 134, 144, 149, 157, 127, 36, 16, 16, 16, 15, 15, 16, 16, 16, 15, 17, 16, 16,
    ];
    let mut times = vec![0u64];
    for gap in gaps {
        times.push(times.last().unwrap() + gap * 1000);
    }
    // Sent during the 22nd gap; its first token with the 29th gap's end.
    let (sent, first) = (times[21] + 5_000, times[29]);
    let budget = read_budget(&times, (sent, first), 838).unwrap();
    let StepBudget::Measured { tokens, steps, .. } = budget else {
        panic!("{budget:?}")
    };
    assert_eq!(tokens, 128);
    assert!((7.0..7.3).contains(&steps), "{steps}");
}

#[test]
fn a_sliver_of_host_work_before_the_prompt_is_no_chunk() {
    // A 6 ms longer gap as the server launches the request's slot, then the prompt in one
    // step (1,000 tokens at 500 µs) or in two of 512.
    let (mut times, first) = stream(10_000, 100_000, &[1000], 500);
    let at = times.iter().position(|t| *t > 100_000).unwrap();
    times.iter_mut().skip(at - 1).for_each(|t| *t += 6_000);
    let first = first + 6_000;
    assert_eq!(
        read_budget(&times, (95_000, first), 1000),
        Some(StepBudget::AtLeast { tokens: 1001 })
    );
    let (mut times, first) = stream(10_000, 100_000, &[511, 489], 500);
    times.iter_mut().skip(at - 1).for_each(|t| *t += 6_000);
    let Some(StepBudget::Measured { tokens, .. }) =
        read_budget(&times, (95_000, first + 6_000), 1000)
    else {
        panic!()
    };
    assert_eq!(tokens, 512);
}

#[test]
fn a_last_chunk_too_small_to_see_still_reads_the_budget() {
    // 16,391 tokens through steps of 8,192: two full chunks and one of 9 tokens, whose gap
    // grows too little to count (a GPU: 4 µs a token over a 10 ms step).
    let (times, first) = stream(10_000, 100_000, &[8191, 8191, 9], 4);
    let Some(StepBudget::Measured { tokens, .. }) = read_budget(&times, (95_000, first), 16_391)
    else {
        panic!()
    };
    assert_eq!(tokens, 8192);
}

#[test]
fn a_gap_that_jittered_while_the_prompt_ran_elsewhere_is_no_step() {
    // A server timing each request alone: the stream decodes every 6 ms ± 0.4 ms throughout,
    // one gap 2.4 ms long (beyond 1.25 times the usual) while the prompt's 100 ms ran beside it.
    let mut times = vec![0u64];
    for k in 0..80u64 {
        let jitter = [0, 400, 200, 300][(k % 4) as usize];
        let gap = if k == 30 { 8_400 } else { 6_000 + jitter };
        times.push(times.last().unwrap() + gap);
    }
    let sent = times[25] + 1_000;
    assert_eq!(
        read_budget(&times, (sent, sent + 100_000), 15_000),
        Some(StepBudget::Beside)
    );
    // The same gap carrying the whole prompt (its first token at the gap's end) is one step.
    let mut times = times.clone();
    times.iter_mut().skip(31).for_each(|t| *t += 91_200);
    let first = times[31];
    assert_eq!(
        read_budget(&times, (sent, first), 15_000),
        Some(StepBudget::AtLeast { tokens: 15_001 })
    );
}
