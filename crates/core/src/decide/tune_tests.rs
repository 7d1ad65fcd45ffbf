#![allow(clippy::unwrap_used)]

use super::*;
use crate::report::tune::{TuneFailure, TuneRun};

/// A configuration with goodput `g` per accelerator, `user` tok/s per user and `acc` good
/// output tok/s per accelerator (`runs`: its repeated measurements).
fn config(name: &str, g: Option<f64>, (user, acc): (f64, f64), runs: &[f64]) -> TuneConfiguration {
    TuneConfiguration {
        name: name.into(),
        values: Default::default(),
        accelerators: 1,
        run: TuneRun {
            dir: name.into(),
            command: None,
            target: None,
            startup_secs: Some(1.0),
            failure: None,
            figures: Some(TuneFigures {
                rank_value: g,
                rank_runs: runs.to_vec(),
                tokens_per_sec_per_user: Some(user),
                good_output_tokens_per_sec_per_accelerator: Some(acc),
                ..TuneFigures::default()
            }),
        },
        rank: None,
        on_front: false,
    }
}

fn plan(repeats: u32) -> TunePlan {
    TunePlan {
        mode: TuneMode::Live,
        measure: TuneMeasure::Capacity,
        slo: "e2e=1s".into(),
        attainment: 0.99,
        accelerators_basis: "1 each".into(),
        gpu_hour_cost: None,
        repeats,
        server: None,
    }
}

#[test]
fn ranks_by_goodput_per_accelerator_and_names_the_margin() {
    let configs = vec![
        config("a", Some(2.0), (50.0, 100.0), &[]),
        config("b", Some(5.0), (20.0, 300.0), &[]),
        config("c", None, (90.0, 10.0), &[]),
        config("d", Some(4.0), (25.0, 250.0), &[]),
    ];
    let tune = conclude(plan(1), configs, Vec::new());
    let ranks: Vec<Option<usize>> = tune.configurations.iter().map(|c| c.rank).collect();
    assert_eq!(ranks, [Some(3), Some(1), None, Some(2)]);
    let best = tune.best.unwrap();
    assert_eq!((best.configuration, best.runner_up), (1, Some(3)));
    assert!((best.margin.unwrap() - 0.25).abs() < 1e-12);
    assert_eq!(best.significance, "not tested: one run each");
    assert!(best.significant.is_none());
    assert!(
        tune.conclusion.starts_with("best: b at 5.000"),
        "{}",
        tune.conclusion
    );
    assert!(tune.conclusion.contains("25.0 % above the runner-up d"));
}

#[test]
fn the_front_keeps_the_undominated_among_those_that_met_the_slo() {
    let configs = vec![
        config("fast-users", Some(1.0), (80.0, 100.0), &[]),
        config("dominated", Some(1.5), (40.0, 150.0), &[]),
        config("balanced", Some(2.0), (50.0, 200.0), &[]),
        config("throughput", Some(3.0), (20.0, 400.0), &[]),
        // Would dominate everything, but met no SLO.
        config("missed", None, (100.0, 1000.0), &[]),
    ];
    let tune = conclude(plan(1), configs, Vec::new());
    assert_eq!(tune.pareto_front, [3, 2, 0]);
    let on: Vec<bool> = tune.configurations.iter().map(|c| c.on_front).collect();
    assert_eq!(on, [true, false, true, true, false]);
}

#[test]
fn repeated_runs_judge_the_margin_by_welch() {
    let clear = vec![
        config("big", Some(10.0), (1.0, 1.0), &[10.1, 9.9, 10.0]),
        config("small", Some(5.0), (1.0, 1.0), &[5.1, 4.9, 5.0]),
    ];
    let best = conclude(plan(3), clear, Vec::new()).best.unwrap();
    assert_eq!(best.significant, Some(true), "{}", best.significance);
    assert!(
        best.significance
            .starts_with("significant at 5 %: p = 0.000")
    );
    let noisy = vec![
        config("x", Some(5.2), (1.0, 1.0), &[3.0, 7.4, 5.2]),
        config("y", Some(5.0), (1.0, 1.0), &[6.9, 3.1, 5.0]),
    ];
    let best = conclude(plan(3), noisy, Vec::new()).best.unwrap();
    assert_eq!(best.significant, Some(false));
    assert!(best.p_value.unwrap() > 0.5);
}

#[test]
fn failures_are_counted_and_a_tune_without_a_passing_configuration_says_so() {
    let mut failed = config("broken", None, (1.0, 1.0), &[]);
    failed.run.figures = None;
    failed.run.failure = Some(TuneFailure {
        stage: "ready".into(),
        reason: "not ready within 5s".into(),
        log_tail: vec!["listening".into()],
    });
    let tune = conclude(plan(1), vec![failed], Vec::new());
    assert!(tune.best.is_none());
    assert_eq!(
        tune.conclusion,
        "no configuration met the SLO (0 of 1 configurations met the SLO, 1 failed; 0 on the \
         Pareto front)"
    );
}

#[test]
fn verification_gives_measured_over_predicted() {
    let configs = vec![config("a", Some(4.0), (1.0, 1.0), &[])];
    let measured = config("a", Some(3.0), (1.0, 1.0), &[]).run;
    let check = TuneVerification {
        configuration: 0,
        predicted_rank: 1,
        measured,
        ratio: None,
    };
    let tune = conclude(plan(1), configs, vec![check]);
    assert!((tune.verification[0].ratio.unwrap() - 0.75).abs() < 1e-12);
}
