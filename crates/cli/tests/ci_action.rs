//! The GitHub Action (`action.yml`) and the GitLab CI example run `deploy/ci/goodput-ci`; here it
//! runs as the action's steps would, against `goodput sim` on loopback, with fake
//! `GITHUB_STEP_SUMMARY` and `GITHUB_OUTPUT` files: the job summary is written (the run's
//! Markdown summary, the gate's verdicts, the comparison with the baseline) and the exit status
//! follows the gate. Also: every input of `action.yml` reaches the script.
#![allow(clippy::unwrap_used)]

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use support::sim_process::Sim;
use support::{fixed_sim, goodput};

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `goodput-ci run` with the action's settings `env`, writing under `dir`.
fn ci_run(dir: &Path, env: &[(&str, &str)]) -> Output {
    let binary = goodput().get_program().to_owned();
    Command::new("bash")
        .arg(repository().join("deploy/ci/goodput-ci"))
        .arg("run")
        .current_dir(dir)
        .env("GOODPUT_BIN", binary)
        .env("GITHUB_STEP_SUMMARY", dir.join("step-summary.md"))
        .env("GITHUB_OUTPUT", dir.join("github-output"))
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

fn text(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

fn explain(output: &Output) -> String {
    format!(
        "status {:?}\nstdout: {}\nstderr: {}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn the_gate_decides_the_exit_status_and_the_summary_is_posted() {
    let dir = tempfile::tempdir().unwrap();
    let sim = Sim::start(&fixed_sim(dir.path(), "sim", 20, 5), &[]);
    let load = "--rate 40 --requests 60 --warmup 5 --slo 'ttft=500ms,tpot=100ms' --tag 'note=from the action'";

    // A passing gate: exit 0, the run's summary and the gate's verdicts in the job summary.
    let base = dir.path().join("base");
    std::fs::create_dir(&base).unwrap();
    let passed = ci_run(
        &base,
        &[
            ("GOODPUT_TARGET", &sim.url),
            ("GOODPUT_ARGS", load),
            (
                "GOODPUT_CONDITIONS",
                "error_rate <= 1%\n\nrequests_per_sec >= 1\n",
            ),
        ],
    );
    assert_eq!(passed.status.code(), Some(0), "{}", explain(&passed));
    let summary = text(&base.join("step-summary.md"));
    assert!(summary.starts_with("## goodput: passed"), "{summary}");
    assert!(summary.contains("### Gate"), "{summary}");
    assert!(summary.contains(&text(&base.join("goodput-results/run/summary.md"))));
    assert!(text(&base.join("github-output")).contains("verdict=pass"));
    let report = base.join("goodput-results/run/report.json");
    assert!(report.exists());

    // Against that baseline with a condition the run cannot meet: exit 1, the comparison (the
    // Markdown of `goodput compare`) in the job summary.
    let candidate = dir.path().join("candidate");
    std::fs::create_dir(&candidate).unwrap();
    let failed = ci_run(
        &candidate,
        &[
            ("GOODPUT_TARGET", &sim.url),
            ("GOODPUT_ARGS", load),
            ("GOODPUT_BASELINE", report.to_str().unwrap()),
            ("GOODPUT_CONDITIONS", "e2e.p50 <= 1ms"),
            ("GOODPUT_OUT", "results"),
        ],
    );
    assert_eq!(failed.status.code(), Some(1), "{}", explain(&failed));
    let summary = text(&candidate.join("step-summary.md"));
    assert!(summary.starts_with("## goodput: FAILED"), "{summary}");
    let gate = text(&candidate.join("results/gate.txt"));
    assert!(gate.contains("FAIL"), "{gate}");
    assert!(summary.contains(&gate), "{summary}");
    let comparison = text(&candidate.join("results/compare.md"));
    assert!(!comparison.is_empty());
    assert!(summary.contains(&comparison), "{summary}");
    assert!(text(&candidate.join("github-output")).contains("verdict=fail"));
}

#[test]
fn bad_settings_exit_2_without_a_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let output = ci_run(dir.path(), &[("GOODPUT_ARGS", "--rate -1 --requests 5")]);
    assert_eq!(output.status.code(), Some(2), "{}", explain(&output));
    assert!(!dir.path().join("github-output").exists());
    let output = ci_run(dir.path(), &[("GOODPUT_ARGS", "--tag 'unbalanced")]);
    assert_eq!(output.status.code(), Some(2), "{}", explain(&output));
}

/// `NAME: ${{ inputs.KEY }}` lines of action.yml: (NAME, KEY).
fn mapped_inputs(action: &str) -> Vec<(String, String)> {
    action
        .lines()
        .filter_map(|line| {
            let (name, value) = line.trim().split_once(": ${{ inputs.")?;
            Some((name.to_string(), value.strip_suffix(" }}")?.to_string()))
        })
        .collect()
}

#[test]
fn every_input_of_the_action_reaches_the_script() {
    let action = text(&repository().join("action.yml"));
    let script = text(&repository().join("deploy/ci/goodput-ci"));
    let inputs_section = action.split("\ninputs:\n").nth(1).unwrap();
    let inputs_section = inputs_section.split("\noutputs:\n").next().unwrap();
    let declared: Vec<&str> = inputs_section
        .lines()
        .filter(|line| line.starts_with("  ") && !line.starts_with("   "))
        .map(|line| line.trim().trim_end_matches(':'))
        .collect();
    let mapped = mapped_inputs(&action);
    assert!(declared.len() >= 10, "{declared:?}");
    for input in &declared {
        let (name, _) = mapped
            .iter()
            .find(|(_, key)| key == input)
            .unwrap_or_else(|| panic!("input {input} is not passed to deploy/ci/goodput-ci"));
        assert!(
            script.contains(&format!("${{{name}")),
            "the script never reads {name}"
        );
    }
    for step in ["goodput-ci\" install", "goodput-ci\" run"] {
        assert!(action.contains(step), "action.yml does not run {step}");
    }
}
