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
    Expect, Probe, add_runs, command, describe_differences, differences, draws_on_terminal,
    fixtures, flags_of, run,
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
    let mut fixtures = fixtures(dir.path());
    if variant.runs {
        add_runs(dir.path(), &mut fixtures);
    }
    let fixtures = fixtures;
    let base = &variant.base;
    let (first, baseline) = run(base, &dir.path().join("base-1"), &fixtures, &variant.how);
    let (_, again) = run(base, &dir.path().join("base-2"), &fixtures, &variant.how);
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
                    if let Err(why) = judge(probe, variant, &baseline, &out, &fixtures) {
                        failures.lock().unwrap().push(why);
                    }
                }
            });
        }
    });
    failures.into_inner().unwrap()
}

/// Where the probe's files and fixtures are.
type Fixtures = std::collections::BTreeMap<&'static str, std::path::PathBuf>;

/// Runs one probe; `Err` says what went wrong.
fn judge(
    probe: &Probe,
    variant: &Variant,
    baseline: &Value,
    out: &std::path::Path,
    fixtures: &Fixtures,
) -> Result<(), String> {
    let (base, how) = (&variant.base, &variant.how);
    if let Expect::OnTerminal = probe.expect {
        return judge_on_terminal(probe, base, out, fixtures);
    }
    let args = command(base, &probe.without, &probe.args);
    let (output, seen) = run(&args, out, fixtures, how);
    let reference;
    let baseline = match &probe.against {
        Some(extra) => {
            let against = out.with_extension("against");
            // Each observation names its own directory `{out}`.
            reference = run(
                &command(base, &probe.without, extra),
                &against,
                fixtures,
                how,
            )
            .1;
            &reference
        }
        None => baseline,
    };
    let stderr = String::from_utf8_lossy(&output.stderr);
    let context = format!(
        "{} {:?}: exit {:?}, stderr: {}",
        probe.flag,
        probe.args,
        output.status.code(),
        stderr.trim()
    );
    if stderr.contains("panicked") {
        return Err(format!("{context} panicked"));
    }
    verdict(
        &probe.expect,
        output.status.code(),
        &stderr,
        baseline,
        &seen,
    )
    .map_err(|why| format!("{context} — {why}"))
}

/// Whether what a probe did is what it was expected to do.
fn verdict(
    expect: &Expect,
    code: Option<i32>,
    stderr: &str,
    baseline: &Value,
    seen: &Value,
) -> Result<(), String> {
    match expect {
        Expect::Refused(text) if code == Some(2) && stderr.contains(text) => Ok(()),
        Expect::Refused(text) => Err(format!("expected exit 2 saying {text:?}")),
        Expect::OnTerminal => Ok(()),
        Expect::Changes | Expect::At(_) if code == Some(2) => {
            Err("refused, expected honoured".to_string())
        }
        Expect::Changes if differences(baseline, seen).is_empty() => {
            Err("changed nothing observable".to_string())
        }
        Expect::Changes => Ok(()),
        Expect::At(pointer) => {
            let (before, after) = (baseline.pointer(pointer), seen.pointer(pointer));
            if before == after {
                let shown: String = format!("{before:?}").chars().take(300).collect();
                Err(format!("{pointer} unchanged: {shown}"))
            } else {
                Ok(())
            }
        }
    }
}

/// A flag seen only on a terminal: the base and the probe under a pseudo-terminal.
fn judge_on_terminal(
    probe: &Probe,
    base: &[String],
    out: &std::path::Path,
    fixtures: &Fixtures,
) -> Result<(), String> {
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
    if plain != probed {
        Ok(())
    } else {
        Err(format!(
            "{} {:?}: draws the same on a terminal ({plain})",
            probe.flag, probe.args
        ))
    }
}

#[test]
fn every_subcommand_is_probed() {
    let output = support::goodput().arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&output.stdout);
    let listed: BTreeSet<String> = help
        .lines()
        .skip_while(|line| !line.starts_with("Commands:"))
        .skip(1)
        .take_while(|line| !line.trim().is_empty())
        // A command at two spaces; its wrapped description further in.
        .filter(|line| line.starts_with("  ") && !line.starts_with("   "))
        .filter_map(|line| line.split_whitespace().next().map(str::to_string))
        .filter(|name| name != "help")
        .collect();
    let probed: BTreeSet<String> = Sub::ALL.iter().map(|s| s.name().to_string()).collect();
    assert_eq!(
        listed, probed,
        "every subcommand of `goodput --help` needs its probes"
    );
}

#[test]
fn every_calibrate_flag_is_honoured_or_refused() {
    check(Sub::Calibrate);
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

#[test]
fn every_report_compare_gate_history_and_merge_flag_is_honoured_or_refused() {
    for sub in [
        Sub::Report,
        Sub::Compare,
        Sub::Gate,
        Sub::History,
        Sub::Merge,
    ] {
        check(sub);
    }
}

#[test]
fn every_tune_flag_is_honoured_or_refused() {
    check(Sub::Tune);
}

#[test]
fn every_plan_flag_is_honoured_or_refused() {
    check(Sub::Plan);
}

#[test]
fn every_sim_monitor_and_ui_flag_is_honoured_or_refused() {
    for sub in [Sub::Sim, Sub::Monitor, Sub::Ui] {
        check(sub);
    }
}
