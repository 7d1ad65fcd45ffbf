//! What a virtual-time run sends: the workload a live run would build from the same flags
//! (fixed or distributed lengths, shared prefixes, datasets, multi-turn sessions, traces) and
//! the API settings that shape each request's body, which the simulator's own front end then
//! parses and tokenizes exactly as it would over HTTP.

use std::sync::Arc;

use goodput_core::backend::openai::OpenAiConfig;
use goodput_core::backend::v2::TensorSource;
use goodput_core::metrics::LengthBuckets;
use goodput_core::report::run::ClassInfo;
use goodput_core::workload::{GeneratedWorkload, LengthDistribution, PromptVocabulary, Workload};
use goodput_sim::SimConfig;
use goodput_sim::config::AgentConfig;
use goodput_sim::http::frontend::Api;

/// The client side of a virtual-time target.
#[derive(Debug, Clone)]
pub struct VirtualRequests {
    /// What each request asks.
    pub workload: Arc<dyn Workload>,
    /// The API settings that make a request's body (stream, ignore_eos, extra body…).
    pub openai: OpenAiConfig,
    /// The endpoint the body goes to.
    pub api: Api,
    /// How the report splits requests by prompt length.
    pub buckets: LengthBuckets,
    /// `--api v2`: the tensors each body carries (the endpoint is then [`Api::V2`]).
    pub tensors: Option<Arc<TensorSource>>,
    /// SLO classes: each class's requests are judged against its own SLO.
    pub classes: Vec<ClassInfo>,
}

impl VirtualRequests {
    /// Synthetic chat prompts of exactly `input` tokens asking for exactly `output` tokens
    /// (`ignore_eos`), streamed.
    pub fn fixed(input: u32, output: u32, seed: u64) -> VirtualRequests {
        VirtualRequests::generated(GeneratedWorkload {
            input: LengthDistribution::Fixed(input),
            output: Some(LengthDistribution::Fixed(output)),
            prefix: None,
            vocabulary: Arc::new(PromptVocabulary::cl100k()),
            seed,
        })
    }

    /// The synthetic chat prompts of `workload`, each asking for its answer length
    /// (`ignore_eos`), streamed.
    pub fn generated(workload: GeneratedWorkload) -> VirtualRequests {
        VirtualRequests {
            workload: Arc::new(workload),
            openai: OpenAiConfig {
                ignore_eos: true,
                ..OpenAiConfig::default()
            },
            api: Api::Chat,
            buckets: LengthBuckets::default(),
            tensors: None,
            classes: Vec::new(),
        }
    }
}

/// What a live run against the embedded simulator has and virtual time does not emulate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NotEmulated {
    /// Reasoning tokens or tool calls.
    #[error(
        "virtual time does not emulate reasoning or tool calls: drop --sim-reasoning-tokens, \
         --sim-tool-calls and the config's `agent` section (or run live)"
    )]
    Agent,
    /// Injected faults.
    #[error(
        "virtual time does not inject faults: drop --sim-fault-* and the config's `faults` \
         section (or run live against the embedded simulator)"
    )]
    Faults,
}

/// Refuses what virtual time does not emulate: reasoning, tool calls and injected faults
/// (live runs against the embedded simulator have them).
pub fn check_emulated(sim: &SimConfig) -> Result<(), NotEmulated> {
    let agent = AgentConfig {
        prompt_tokens_details: sim.agent.prompt_tokens_details,
        ..AgentConfig::default()
    };
    if sim.agent != agent {
        return Err(NotEmulated::Agent);
    }
    if sim.faults != goodput_sim::config::FaultConfig::default() {
        return Err(NotEmulated::Faults);
    }
    Ok(())
}
