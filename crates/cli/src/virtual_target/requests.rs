//! What a virtual-time run sends: the workload a live run would build from the same flags
//! (fixed or distributed lengths, shared prefixes, datasets, multi-turn sessions, traces) and
//! the API settings that shape each request's body, which the simulator's own front end then
//! parses and tokenizes exactly as it would over HTTP.

use std::sync::Arc;

use anyhow::{Result, bail};
use goodput_core::backend::openai::{ApiKind, OpenAiConfig};
use goodput_core::backend::v2::TensorSource;
use goodput_core::config::RunConfig;
use goodput_core::metrics::LengthBuckets;
use goodput_core::workload::{GeneratedWorkload, LengthDistribution, PromptVocabulary, Workload};
use goodput_sim::SimConfig;
use goodput_sim::config::AgentConfig;
use goodput_sim::http::frontend::Api;

use crate::options::run::{Api as ApiOption, RunOptions};
use crate::wiring::workload::{prepare_offline, with_images};

/// The client side of a virtual-time target.
#[derive(Debug, Clone)]
pub(crate) struct VirtualRequests {
    /// What each request asks.
    pub(crate) workload: Arc<dyn Workload>,
    /// The API settings that make a request's body (stream, ignore_eos, extra body…).
    pub(crate) openai: OpenAiConfig,
    /// The endpoint the body goes to.
    pub(crate) api: Api,
    /// How the report splits requests by prompt length.
    pub(crate) buckets: LengthBuckets,
    /// `--api v2`: the tensors each body carries (the endpoint is then [`Api::V2`]).
    pub(crate) tensors: Option<Arc<TensorSource>>,
}

impl VirtualRequests {
    /// Synthetic chat prompts of exactly `input` tokens asking for exactly `output` tokens
    /// (`ignore_eos`), streamed.
    pub(crate) fn fixed(input: u32, output: u32, seed: u64) -> VirtualRequests {
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
    pub(crate) fn generated(workload: GeneratedWorkload) -> VirtualRequests {
        VirtualRequests {
            workload: Arc::new(workload),
            openai: OpenAiConfig {
                ignore_eos: true,
                ..OpenAiConfig::default()
            },
            api: Api::Chat,
            buckets: LengthBuckets::default(),
            tensors: None,
        }
    }

    /// The requests `options` would send in a live run (and `config` adjusted to the
    /// workload, as for trace replay).
    pub(crate) async fn from_run(
        options: &RunOptions,
        model: String,
        config: &mut RunConfig,
    ) -> Result<VirtualRequests> {
        if options.request.api == ApiOption::Http {
            bail!(
                "--api http POSTs to --target; in virtual time use --api chat or --api completions"
            );
        }
        let openai = options.request.openai(model);
        let tensors = options.request.tensors.clone().map(Arc::new);
        let api = match openai.api {
            _ if tensors.is_some() => Api::V2,
            ApiKind::Chat => Api::Chat,
            ApiKind::Completions => Api::Completions,
            ApiKind::Responses => bail!(
                "--api responses: the simulator serves chat, completions, embeddings and rerank; \
                 use one of those in virtual time"
            ),
            ApiKind::Embeddings => Api::Embeddings,
            ApiKind::Rerank => Api::Rerank,
        };
        let built = prepare_offline(options, config).await?;
        let workload = with_images(options.request.images.as_ref(), built.workload);
        Ok(VirtualRequests {
            workload,
            openai,
            api,
            buckets: built.buckets,
            tensors,
        })
    }
}

/// Refuses what virtual time does not emulate: reasoning, tool calls and injected faults
/// (live runs against the embedded simulator have them).
pub(crate) fn check_emulated(sim: &SimConfig) -> Result<()> {
    let agent = AgentConfig {
        prompt_tokens_details: sim.agent.prompt_tokens_details,
        ..AgentConfig::default()
    };
    if sim.agent != agent {
        bail!(
            "virtual time does not emulate reasoning or tool calls: drop --sim-reasoning-tokens, \
             --sim-tool-calls and the config's `agent` section (or run live)"
        );
    }
    if sim.faults != goodput_sim::config::FaultConfig::default() {
        bail!(
            "virtual time does not inject faults: drop --sim-fault-* and the config's `faults` \
             section (or run live against the embedded simulator)"
        );
    }
    Ok(())
}
