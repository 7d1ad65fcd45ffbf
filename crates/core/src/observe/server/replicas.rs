//! A fleet's targets on their own `/metrics`: each target scraped right before a step and
//! right after it ([`ReplicaScrapes`], one line each of `fleet_metrics.jsonl`), and the
//! counters' increases over the step set on the step's per-target rows (`targets[].server`),
//! so what each replica says it served stands beside what the client sent it.

use serde::{Deserialize, Serialize};

use super::concepts::Concept;
use super::series::{Scrape, ScrapeLog};
use crate::report::{ReplicaServer, StepReport};

/// One target's scrapes around one step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplicaScrapes {
    /// The step (0 for a plain run).
    pub step: u32,
    /// The target's name in the fleet.
    pub target: String,
    /// Where its metrics were read.
    pub metrics_url: String,
    /// Right before the step.
    pub before: Scrape,
    /// Right after it.
    pub after: Scrape,
}

impl ReplicaScrapes {
    /// The counters' increases between the two scrapes (a reset in between counts from zero).
    pub fn counts(&self) -> ReplicaServer {
        let log = ScrapeLog {
            scrapes: vec![self.before.clone(), self.after.clone()],
        };
        let increase = |concept| {
            let series = log.counter(concept)?;
            (series.values.len() == 2).then(|| series.total())
        };
        let problem = [&self.before, &self.after]
            .iter()
            .find_map(|scrape| scrape.problem.as_ref())
            .filter(|_| !(self.before.is_usable() && self.after.is_usable()))
            .map(|problem| problem.message.clone());
        ReplicaServer {
            metrics_url: self.metrics_url.clone(),
            requests_finished: increase(Concept::RequestsFinished),
            prompt_tokens: increase(Concept::PromptTokens),
            generation_tokens: increase(Concept::GenerationTokens),
            problem,
        }
    }
}

/// Sets each of `step`'s target rows' `server` from the scrapes of step `index` in `scrapes`.
pub fn attach(step: &mut StepReport, index: u32, scrapes: &[ReplicaScrapes]) {
    for row in &mut step.targets {
        row.server = scrapes
            .iter()
            .find(|s| s.step == index && s.target == row.name)
            .map(ReplicaScrapes::counts);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn scrape(at_us: u64, finished: u64, generated: u64) -> Scrape {
        let body = format!(
            "vllm:request_success_total{{finished_reason=\"stop\"}} {finished}\n\
             vllm:generation_tokens_total {generated}\n"
        );
        Scrape::from_body(at_us, body.as_bytes())
    }

    #[test]
    fn counts_are_the_increases_over_the_step_and_missing_counters_stay_unknown() {
        let scrapes = ReplicaScrapes {
            step: 0,
            target: "a".into(),
            metrics_url: "http://a/metrics".into(),
            before: scrape(0, 7, 70),
            after: scrape(1_000, 27, 130),
        };
        let counts = scrapes.counts();
        assert_eq!(counts.requests_finished, Some(20.0));
        assert_eq!(counts.generation_tokens, Some(60.0));
        assert_eq!(counts.prompt_tokens, None);
        assert_eq!(counts.problem, None);
    }

    #[test]
    fn a_failed_scrape_leaves_counts_unknown_and_says_why() {
        let scrapes = ReplicaScrapes {
            step: 0,
            target: "a".into(),
            metrics_url: "http://a/metrics".into(),
            before: scrape(0, 7, 70),
            after: Scrape::failed(
                1_000,
                super::super::series::ProblemKind::Unreachable,
                "down",
            ),
        };
        let counts = scrapes.counts();
        assert_eq!(counts.requests_finished, None);
        assert_eq!(counts.problem.as_deref(), Some("down"));
    }
}
