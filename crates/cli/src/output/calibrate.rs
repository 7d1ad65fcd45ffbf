//! `goodput calibrate` output: a line per probe, the fitted constants with their
//! uncertainties and residuals, the verdict, the server's repeatability, the header of the
//! written configuration, and the check's predicted-against-measured table with its capacity
//! rows.

use std::fmt::Write;

use goodput_core::decide::calibrate::{
    BatchLimit, BudgetProbe, CacheReading, CalibrateError, CalibrationProbe, CapacityCheck,
    CapacityComparison, MAX_CACHE_PROBE_TOKENS, ProbeMeasurement, QueueProbe, QueueReading,
    Repeatability, ServerFacts, SlotSplit, StepBudget, StepPattern,
};
use goodput_core::decide::capacity::Dimension;
use goodput_protocol::QueueOrder;
use goodput_sim::calibrate::{Fit, Predicted};

/// One held-out shape of a check: measured on the server, predicted by the checked
/// configuration, and by the same at the server's speed now (when it was measured).
pub(crate) struct CheckRow {
    pub(crate) measured: ProbeMeasurement,
    pub(crate) predicted: Predicted,
    pub(crate) at_speed: Option<Predicted>,
    /// Beyond the server's slots: the prediction with the other step pattern (at the server's
    /// speed now when measured).
    pub(crate) other: Option<(StepPattern, Predicted)>,
}

/// What the batch-limit waves found.
pub(crate) fn batch_limit_line(limit: &BatchLimit) -> String {
    if limit.is_lower_bound() {
        format!(
            "batch limit: all {} requests of a wave sent together ran at once (the server runs \
             at least {}; the simulator gets that many slots)",
            limit.wave, limit.running
        )
    } else {
        format!(
            "batch limit: {} of a wave of {} requests sent together ran at once (the rest \
             waited for one to end): {} slots",
            limit.running, limit.wave, limit.running
        )
    }
}

/// What the step-budget probe found, for stderr and the facts' sources.
pub(crate) fn step_budget_line(
    probe: &BudgetProbe,
    found: &Result<Option<StepBudget>, CalibrateError>,
) -> String {
    let sent = format!(
        "step budget: a {}-token prompt sent while one request decoded",
        probe.prompt_tokens
    );
    match found {
        Ok(Some(StepBudget::Measured {
            tokens,
            steps,
            prompt_tokens,
        })) => format!(
            "{sent} ran in {steps:.1} of its steps ({prompt_tokens} tokens as the server \
             counted them): {tokens} tokens a step"
        ),
        Ok(Some(StepBudget::AtLeast { tokens })) => {
            format!("{sent} ran in one of its steps: at least {tokens} tokens a step")
        }
        Ok(Some(StepBudget::Beside)) => format!(
            "{sent} did not slow its steps, though they went on past its first token: prompts \
             take nothing from the decodes' steps (no bound binds them; the fit prefers none)"
        ),
        Ok(None) => format!(
            "{sent}: the stream ended before its first token or was too short to read: the \
             budget is not known"
        ),
        Err(e) => format!("{sent}: {e}; the budget is not known"),
    }
}

/// What the queue-order probe found (in `took`), for stderr and the facts' sources.
pub(crate) fn queue_order_line(
    probe: &QueueProbe,
    found: &Result<QueueReading, CalibrateError>,
    took: std::time::Duration,
) -> String {
    let fifo = "first come first served assumed";
    let heard = |served: &[Vec<usize>]| {
        let each: Vec<String> = served
            .iter()
            .map(|seq| {
                seq.iter()
                    .map(|k| k.to_string())
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect();
        format!(
            "queue order: requests queued behind {} busy slots in two rounds were served {}",
            probe.slots,
            each.join(", then ")
        )
    };
    match found {
        Ok(QueueReading::Read { order, served }) => format!(
            "{}: {} ({:.1} s)",
            heard(served),
            order_words(*order),
            took.as_secs_f64()
        ),
        Ok(QueueReading::Unexplained { served }) => format!(
            "{}: no one order (by arrival or by length) serves both so; {fifo}",
            heard(served)
        ),
        Ok(QueueReading::Unclear(why)) => format!("queue order: not read ({why}); {fifo}"),
        Err(e) => format!("queue order: {e}; {fifo}"),
    }
}

/// An order in words.
fn order_words(order: QueueOrder) -> &'static str {
    match order {
        QueueOrder::Fifo => "first come first served",
        QueueOrder::Lifo => "last come first served",
        QueueOrder::ShortestPrompt => "shortest prompt first",
        QueueOrder::LongestPrompt => "longest prompt first",
        QueueOrder::ShortestOutput => "fewest answer tokens asked first",
        QueueOrder::LongestOutput => "most answer tokens asked first",
    }
}

/// What the slot probe found, for stderr and the facts' sources.
pub(crate) fn slot_split_line(found: &Result<Option<SlotSplit>, CalibrateError>) -> String {
    let pinned = "slots: two requests pinned to slots 0 and 1, then 0 and 2";
    match found {
        Ok(Some(split)) => format!(
            "{pinned}, decoded at TPOT {:.2} and {:.2} ms: {}",
            split.side_by_side * 1e3,
            split.apart * 1e3,
            if split.by_slot() {
                "micro-batches by slot (a KV stream per slot, `-np N`)"
            } else {
                "one batch a step whatever the slots (a unified KV cache, or micro-batches \
                 that cost no more here)"
            }
        ),
        Ok(None) => format!("{pinned}: no TPOT measured; micro-batches by slot assumed"),
        Err(e) => format!("{pinned}: {e}; micro-batches by slot assumed"),
    }
}

/// What the cache probe found, for stderr and the facts' sources.
pub(crate) fn cache_line(
    probe: &CalibrationProbe,
    context: u32,
    found: &Result<Option<CacheReading>, CalibrateError>,
) -> String {
    let sent = format!(
        "KV cache: {} requests of {}-token prompts sent together ({:.1} times a slot's {context} \
         tokens)",
        probe.requests,
        probe.input_tokens,
        f64::from(probe.input_tokens) * f64::from(probe.requests) / f64::from(context.max(1))
    );
    match found {
        Ok(Some(CacheReading::PerSlot)) => format!("{sent}: all ran — a cache per slot"),
        Ok(Some(CacheReading::Shared { refused })) => format!(
            "{sent}: {refused} refused for want of context — one cache of {context} tokens the \
             slots share"
        ),
        Ok(None) => format!(
            "{sent}: requests failed for another reason, or ran one after another; a cache per \
             slot assumed"
        ),
        Err(e) => format!("{sent}: {e}; a cache per slot assumed"),
    }
}

/// Why the cache probe did not run.
pub(crate) fn cache_skipped_line(slots: u32, context: u32) -> String {
    format!(
        "KV cache: not probed ({slots} slots of {context} tokens: over {MAX_CACHE_PROBE_TOKENS} \
         prompt tokens to fill); a cache per slot assumed"
    )
}

/// One probe's progress line.
pub(crate) fn probe_line(
    (index, total): (usize, usize),
    pass: Option<(usize, u32)>,
    m: &ProbeMeasurement,
) -> String {
    let pass = pass.map_or(String::new(), |(k, n)| format!("pass {}/{n}, ", k + 1));
    format!(
        "{pass}probe {}/{}: concurrency {}, {:.0}-token prompts, {} answer tokens, {} requests → \
         TTFT p50 {:.1} ms, TPOT p50 {:.2} ms",
        index + 1,
        total,
        m.probe.concurrency,
        m.prompt_tokens,
        m.probe.output_tokens,
        m.probe.requests,
        m.ttft * 1e3,
        m.tpot * 1e3
    )
}

fn uncertainty(value: Option<f64>) -> String {
    value.map_or("undetermined".to_string(), |u| {
        format!("± {:.1} %", u * 100.0)
    })
}

fn facts_line(server: &ServerFacts) -> String {
    let show = |v: Option<u32>| v.map_or("?".to_string(), |v| v.to_string());
    format!(
        "server: {} slots, {} tokens of context per slot, chat prompts starting with the same \
         {} tokens, width {}, vocabulary {}, {} parameters, weights {} (from {})",
        show(server.slots),
        show(server.context_per_slot),
        show(server.shared_prefix_tokens),
        show(server.hidden),
        show(server.vocab),
        server
            .params
            .map_or("?".to_string(), |p| format!("{:.1} M", p / 1e6)),
        server.weight_format.as_deref().unwrap_or("?"),
        if server.sources.is_empty() {
            "nothing: defaults assumed".to_string()
        } else {
            server.sources.join(", ")
        }
    )
}

/// The fit: server facts, constants, residuals, verdict.
pub(crate) fn fit_table(fit: &Fit, server: &ServerFacts) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", facts_line(server));
    let _ = writeln!(
        out,
        "\n{:<20} {:>14}  {:<8} uncertainty",
        "constant", "value", "unit"
    );
    for c in &fit.table {
        let _ = writeln!(
            out,
            "{:<20} {:>14.3}  {:<8} {}",
            c.name,
            c.value,
            c.unit,
            uncertainty(c.relative_uncertainty)
        );
    }
    let _ = writeln!(
        out,
        "\n{:<6} {:>4} {:>7} {:>7} {:>12} {:>12} {:>8}",
        "figure", "conc", "prompt", "answer", "measured ms", "model ms", "error"
    );
    for r in &fit.residuals {
        let _ = writeln!(
            out,
            "{:<6} {:>4} {:>7} {:>7} {:>12.2} {:>12.2} {:>7.1}%",
            r.metric,
            r.shape.concurrency,
            r.shape.prompt_tokens,
            r.shape.output_tokens,
            r.measured * 1e3,
            r.predicted * 1e3,
            r.relative_error * 100.0
        );
    }
    let verdict = if fit.poor { "POOR" } else { "good" };
    let _ = writeln!(
        out,
        "\nfit: {verdict} (RMS error {:.1} % over {} figures)",
        fit.rms_relative_error * 100.0,
        fit.residuals.len()
    );
    for problem in &fit.problems {
        let _ = writeln!(out, "  - {problem}");
    }
    out
}

/// TOML comments recording where the configuration came from (ignored when it is read).
pub(crate) fn config_header(target: &str, server: &ServerFacts, fit: &Fit) -> String {
    let mut out = format!(
        "# goodput calibrate --target {target}\n# {}\n",
        facts_line(server)
    );
    for c in &fit.table {
        let _ = writeln!(
            out,
            "# {} = {:.4} {} ({})",
            c.name,
            c.value,
            c.unit,
            uncertainty(c.relative_uncertainty)
        );
    }
    let _ = writeln!(
        out,
        "# fit RMS error {:.1} %{}\n",
        fit.rms_relative_error * 100.0,
        if fit.poor { " (POOR)" } else { "" }
    );
    out
}

fn error(predicted: f64, measured: f64) -> String {
    if measured > 0.0 {
        format!("{:+.1}%", (predicted / measured - 1.0) * 100.0)
    } else {
        "-".to_string()
    }
}

/// How closely the server repeated the same probes from one pass to the next.
pub(crate) fn repeatability_line(r: Option<&Repeatability>) -> String {
    let Some(r) = r else {
        return "repeatability: not measured (one pass; --passes 2 or more measures it)\n"
            .to_string();
    };
    format!(
        "repeatability: {} probes measured in {} passes; one pass's median varies by TTFT \
         {:.1} %, TPOT {:.1} %, E2E {:.1} % (relative standard deviation): errors within that are \
         the server's own noise\n",
        r.probes,
        r.passes,
        r.ttft * 100.0,
        r.tpot * 100.0,
        r.e2e * 100.0
    )
}

/// The model against the server on a calibration probe measured again: how far the server's
/// speed has moved since the calibration, which every held-out error below carries too.
pub(crate) fn speed_line(
    reference: Option<&(ProbeMeasurement, Predicted)>,
    factor: Option<f64>,
) -> String {
    let Some((m, p)) = reference else {
        return "speed since calibration: not measured (the budget ran out)\n".to_string();
    };
    let now = factor.map_or(String::new(), |f| {
        format!(
            "; the server runs {f:.3} times the configuration's speed, and the \"at speed\" \
             figures are the configuration's with that divided out"
        )
    });
    let line = format!(
        "speed since calibration: the calibration's probe at concurrency {}, {:.0}-token \
         prompts, {} answer tokens now measures TPOT p50 {:.2} ms and E2E p50 {:.1} ms; the \
         model, fitted to it, says {:.2} ms ({}) and {:.1} ms ({}): beyond the fit's residual, \
         that is how far the server has drifted, and the errors below include it",
        m.probe.concurrency,
        m.prompt_tokens,
        m.probe.output_tokens,
        m.tpot * 1e3,
        m.e2e * 1e3,
        p.tpot * 1e3,
        error(p.tpot, m.tpot),
        p.e2e * 1e3,
        error(p.e2e, m.e2e),
    );
    format!("{line}{now}\n")
}

/// Predicted against measured for every held-out shape (and at the server's speed now).
pub(crate) fn check_table(rows: &[CheckRow]) -> String {
    let mut out = String::new();
    for row in rows {
        let m = &row.measured;
        let _ = writeln!(
            out,
            "concurrency {}, {:.0}-token prompts, {} answer tokens, {} requests",
            m.probe.concurrency, m.prompt_tokens, m.probe.output_tokens, m.probe.requests
        );
        let now = row.at_speed.map(|p| figures(m, &p));
        let other = row
            .other
            .map(|(pattern, p)| (pattern.name(), figures(m, &p)));
        for (i, (name, measured, predicted)) in figures(m, &row.predicted).into_iter().enumerate() {
            let at_speed = now.as_ref().map_or(String::new(), |now| {
                format!(
                    "  at speed {:>10.2}  {}",
                    now[i].2,
                    error(now[i].2, measured)
                )
            });
            let other = other.as_ref().map_or(String::new(), |(pattern, f)| {
                format!("  {pattern} {:>10.2}  {}", f[i].2, error(f[i].2, measured))
            });
            let _ = writeln!(
                out,
                "  {name:<12} measured {measured:>10.2}  predicted {predicted:>10.2}  {:>7}{at_speed}{other}",
                error(predicted, measured)
            );
        }
    }
    out
}

/// A row's figures: name, measured, predicted (ms, and requests/s).
fn figures(m: &ProbeMeasurement, p: &Predicted) -> Vec<(String, f64, f64)> {
    let mut figures = Vec::new();
    let medians = [m.ttft, m.tpot, m.e2e]
        .into_iter()
        .zip([p.ttft, p.tpot, p.e2e]);
    for ((name, (m50, p50)), (mt, pt)) in ["TTFT", "TPOT", "E2E"]
        .into_iter()
        .zip(medians)
        .zip(m.tails.iter().zip(&p.tails))
    {
        figures.push((format!("{name} p50 ms"), m50 * 1e3, p50 * 1e3));
        figures.push((format!("{name} p95 ms"), mt.p95 * 1e3, pt.p95 * 1e3));
        figures.push((format!("{name} p99 ms"), mt.p99 * 1e3, pt.p99 * 1e3));
    }
    figures.push(("requests/s".into(), m.requests_per_sec, p.requests_per_sec));
    figures
}

fn load(value: Option<f64>, dimension: Dimension) -> String {
    match (value, dimension) {
        (None, _) => "none".to_string(),
        (Some(v), Dimension::Concurrency) => format!("{v:.0} concurrent"),
        (Some(v), Dimension::Rate) => format!("{v:.3} req/s"),
    }
}

/// A search's resolution; "open" when it found no bracket (no failing load above its answer).
fn resolution(value: Option<f64>) -> String {
    value.map_or("open".to_string(), |v| format!("{:.1}%", v * 100.0))
}

/// The check's capacity rows: measured against predicted under the SLO, the error, and each
/// search's resolution (the relative width of its final bracket: an error below it cannot be
/// told from zero).
pub(crate) fn capacity_table(check: &CapacityCheck) -> String {
    let mut out = String::new();
    if let Some(plan) = &check.plan {
        let _ = writeln!(
            out,
            "capacity under {} ({:.0} % attainment, {:.0} % confidence, {} requests a probe, {} \
             search):",
            plan.criteria.slo,
            plan.criteria.attainment * 100.0,
            plan.criteria.confidence * 100.0,
            plan.requests_per_probe,
            match plan.dimension {
                Dimension::Rate => "rate",
                Dimension::Concurrency => "concurrency",
            }
        );
    }
    for c in &check.shapes {
        let dimension = c.measured.dimension;
        let _ = writeln!(
            out,
            "  {}: measured {} ({:?}, resolution {}), predicted {} ({:?}, resolution {}), error {}",
            c.shape,
            load(c.measured.lower_bound, dimension),
            c.measured.conclusion,
            resolution(c.measured_resolution),
            load(c.predicted.lower_bound, dimension),
            c.predicted.conclusion,
            resolution(c.predicted_resolution),
            c.error
                .map_or("-".to_string(), |e| format!("{:+.1}%", e * 100.0))
        );
        if let Some(line) = at_speed_line(c) {
            out.push_str(&line);
        }
        if let Some(other) = c.other_pattern {
            let _ = writeln!(
                out,
                "    with clients {} beyond the slots: predicted {}",
                other.pattern.name(),
                load(other.capacity, dimension)
            );
        }
    }
    if let Some(reason) = &check.not_searched {
        let _ = writeln!(out, "capacity: {reason}");
    }
    out
}

/// A capacity row's search at the server's speed now and its band, when the speed was
/// measured.
fn at_speed_line(c: &CapacityComparison) -> Option<String> {
    let now = c.predicted_at_speed.as_ref()?;
    let dimension = c.measured.dimension;
    let band = c.speed_band.map_or(String::new(), |b| {
        format!(
            "; at {:.0} % and {:.0} % of that speed {} and {}{}",
            (1.0 - b.margin) * 100.0,
            (1.0 + b.margin) * 100.0,
            load(b.slower, dimension),
            load(b.faster, dimension),
            match c.measured.lower_bound.map(|m| b.contains(m)) {
                Some(true) => " (the measured capacity lies between)",
                Some(false) => " (the measured capacity lies outside)",
                None => "",
            }
        )
    });
    Some(format!(
        "    at the server's speed now: predicted {} ({:?}), error {}{band}\n",
        load(now.lower_bound, dimension),
        now.conclusion,
        c.error_at_speed
            .map_or("-".to_string(), |e| format!("{:+.1}%", e * 100.0))
    ))
}
