//! Every flag of every subcommand is honoured or refused. The flags come from clap (each
//! subcommand's `--help`); every one must have a probe, and every probe must either change
//! what the run shows — `run.json`, the report's sections, the files written, stdout, the
//! requests on the wire (a capture server) — against a baseline that is itself reproducible,
//! or be refused with exit status 2 and a message.
#![allow(clippy::unwrap_used)]

mod flags;
mod support;

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use std::collections::BTreeSet;

use flags::probes::{self, Sub, Variant};
use flags::{
    Expect, Probe, command, describe_differences, differences, draws_on_terminal, fixtures,
    flags_of, run,
};
use serde_json::Value;

/// Checks one subcommand: coverage of its flags, then each variant.
fn check(sub: Sub) {
    let variants = probes::variants(sub);
    let listed = flags_of(sub.name());
    let probed: BTreeSet<String> = variants
        .iter()
        .flat_map(|v| v.probes.iter().map(|p| p.flag.to_string()))
        .collect();
    let missing: Vec<&String> = listed.difference(&probed).collect();
    let stale: Vec<&String> = probed.difference(&listed).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "goodput {}: flags without a probe {missing:?}, probes of no flag {stale:?}",
        sub.name()
    );
    let failures: Vec<String> = variants.iter().flat_map(check_variant).collect();
    assert!(
        failures.is_empty(),
        "goodput {}: {} probe(s) failed (flag neither honoured nor refused as expected):\n{}",
        sub.name(),
        failures.len(),
        failures.join("\n")
    );
}

/// A reproducible baseline, then every probe of the variant (three at a time).
fn check_variant(variant: &Variant) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let fixtures = fixtures(dir.path());
    let base = &variant.base;
    let (first, baseline) = run(base, &dir.path().join("base-1"), &fixtures);
    let (_, again) = run(base, &dir.path().join("base-2"), &fixtures);
    assert_eq!(
        first.status.code(),
        Some(0),
        "baseline {base:?}: {}",
        String::from_utf8_lossy(&first.stderr)
    );
    assert!(
        differences(&baseline, &again).is_empty(),
        "the baseline {base:?} is not reproducible:\n{}",
        describe_differences(&baseline, &again)
    );
    let failures = Mutex::new(Vec::new());
    let next = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..3 {
            scope.spawn(|| {
                loop {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    let Some(probe) = variant.probes.get(index) else {
                        break;
                    };
                    let out = dir.path().join(format!("probe-{index}"));
                    if let Err(why) = judge(probe, base, &baseline, &out, &fixtures) {
                        failures.lock().unwrap().push(why);
                    }
                }
            });
        }
    });
    failures.into_inner().unwrap()
}

/// Runs one probe; `Err` says what went wrong.
fn judge(
    probe: &Probe,
    base: &[String],
    baseline: &Value,
    out: &std::path::Path,
    fixtures: &std::collections::BTreeMap<&'static str, std::path::PathBuf>,
) -> Result<(), String> {
    if let Expect::OnTerminal = probe.expect {
        let plain = draws_on_terminal(
            &command(base, &probe.without, &[]),
            &out.join("plain"),
            fixtures,
        );
        let probed = draws_on_terminal(
            &command(base, &probe.without, &probe.args),
            &out.join("probe"),
            fixtures,
        );
        return if plain != probed {
            Ok(())
        } else {
            Err(format!(
                "{} {:?}: draws the same on a terminal ({plain})",
                probe.flag, probe.args
            ))
        };
    }
    let args = command(base, &probe.without, &probe.args);
    let (output, seen) = run(&args, out, fixtures);
    let baseline = match &probe.against {
        Some(extra) => {
            &run(
                &command(base, &probe.without, extra),
                &out.with_extension("against"),
                fixtures,
            )
            .1
        }
        None => baseline,
    };
    let stderr = String::from_utf8_lossy(&output.stderr);
    let context = || {
        format!(
            "{} {:?}: exit {:?}, stderr: {}",
            probe.flag,
            probe.args,
            output.status.code(),
            stderr.trim()
        )
    };
    if stderr.contains("panicked") {
        return Err(format!("{} panicked", context()));
    }
    match &probe.expect {
        Expect::Refused(text) => {
            if output.status.code() == Some(2) && stderr.contains(text) {
                Ok(())
            } else {
                Err(format!("{} — expected exit 2 saying {text:?}", context()))
            }
        }
        Expect::OnTerminal => Ok(()),
        Expect::Changes | Expect::At(_) if output.status.code() == Some(2) => {
            Err(format!("{} — refused, expected honoured", context()))
        }
        Expect::Changes => {
            if differences(baseline, &seen).is_empty() {
                Err(format!("{} — changed nothing observable", context()))
            } else {
                Ok(())
            }
        }
        Expect::At(pointer) => {
            let (before, after) = (baseline.pointer(pointer), seen.pointer(pointer));
            if before == after {
                let mut shown = format!("{before:?}");
                shown.truncate(300);
                Err(format!("{} — {pointer} unchanged: {shown}", context()))
            } else {
                Ok(())
            }
        }
    }
}

#[test]
fn every_run_flag_is_honoured_or_refused() {
    check(Sub::Run);
}

#[test]
fn every_sweep_flag_is_honoured_or_refused() {
    check(Sub::Sweep);
}

#[test]
fn every_capacity_flag_is_honoured_or_refused() {
    check(Sub::Capacity);
}
