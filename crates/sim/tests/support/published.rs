//! A table of published figures against their simulated counterparts, each within a relative
//! tolerance; known misses kept as tripwires (the test fails once one passes, so the table and
//! its docs are updated). Printed as the Markdown the docs quote. [`offline`] runs an offline
//! throughput benchmark (every request queued at once), as several published figures were.

use std::time::Duration;

use goodput_sim::config::BatchingConfig;
use goodput_sim::engine::batching::BatchingEngine;
use goodput_sim::virtual_time::Simulation;

/// `total` requests of `prompt` + `output` tokens queued at once on `config`: (output tokens/s
/// over the span from the first arrival to the last token, that span).
pub fn offline(config: &BatchingConfig, total: u64, prompt: u32, output: u32) -> (f64, Duration) {
    let engine = Box::new(BatchingEngine::new(config.clone(), 1));
    let arrivals = (0..total).map(|id| (Duration::ZERO, super::engine_request(id, prompt, output)));
    let sim = Simulation::run_open_loop(engine, arrivals);
    let end = sim
        .timelines()
        .iter()
        .map(|t| t.finished.unwrap().0)
        .max()
        .unwrap();
    let tokens: u32 = sim.timelines().iter().map(|t| t.output_tokens()).sum();
    (f64::from(tokens) / end.as_secs_f64(), end)
}

/// One published figure and its simulated counterpart.
pub struct Check {
    pub name: String,
    pub published: f64,
    pub simulated: f64,
    pub tolerance: f64,
    /// A published point the simulator is known to miss.
    pub known_miss: bool,
}

impl Check {
    pub fn passes(&self) -> bool {
        (self.simulated / self.published - 1.0).abs() <= self.tolerance
    }
}

#[derive(Default)]
pub struct Table(pub Vec<Check>);

impl Table {
    /// A row that must be within `tolerance`.
    pub fn add(&mut self, name: impl Into<String>, published: f64, simulated: f64, tolerance: f64) {
        self.push(name.into(), (published, simulated), tolerance, false);
    }

    /// A row recorded as a known miss.
    pub fn miss(
        &mut self,
        name: impl Into<String>,
        published: f64,
        simulated: f64,
        tolerance: f64,
    ) {
        self.push(name.into(), (published, simulated), tolerance, true);
    }

    fn push(&mut self, name: String, (published, simulated): (f64, f64), tol: f64, miss: bool) {
        self.0.push(Check {
            name,
            published,
            simulated,
            tolerance: tol,
            known_miss: miss,
        });
    }

    /// Prints the table.
    pub fn print(&self) {
        println!("| check | published | simulated | sim/pub | tolerance | |");
        println!("|---|---:|---:|---:|---:|---|");
        for c in &self.0 {
            println!(
                "| {} | {:.2} | {:.2} | {:.2} | ±{:.0} % | {} |",
                c.name,
                c.published,
                c.simulated,
                c.simulated / c.published,
                c.tolerance * 100.0,
                match (c.passes(), c.known_miss) {
                    (true, _) => "pass",
                    (false, true) => "known miss",
                    (false, false) => "FAIL",
                }
            );
        }
    }

    /// Prints the table, then fails on a row outside its tolerance and on a known miss that
    /// now passes (to be made a check in this test and in `docs`).
    pub fn print_and_assert(&self, docs: &str) {
        self.print();
        let names = |keep: &dyn Fn(&Check) -> bool| -> Vec<&str> {
            self.0
                .iter()
                .filter(|c| keep(c))
                .map(|c| c.name.as_str())
                .collect()
        };
        let failed = names(&|c| !c.passes() && !c.known_miss);
        assert!(failed.is_empty(), "outside tolerance: {failed:?}");
        let fixed = names(&|c| c.passes() && c.known_miss);
        assert!(
            fixed.is_empty(),
            "known misses now within tolerance — make them checks in this test and in \
             {docs}: {fixed:?}"
        );
    }
}
