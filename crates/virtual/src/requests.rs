//! What a virtual-time run sends, and how: the workload a live run would build from the same
//! flags (fixed or distributed lengths, shared prefixes, datasets, multi-turn sessions,
//! traces), the backend of its `--api` (made over a client to the simulator, so each body is
//! written, sent, parsed and tokenized exactly as over TCP), and how the report splits it.

use std::sync::Arc;

use goodput_core::backend::openai::{OpenAiBackend, OpenAiConfig};
use goodput_core::backend::{Backend, RequestIds};
use goodput_core::http::HttpClient;
use goodput_core::metrics::LengthBuckets;
use goodput_core::report::run::ClassInfo;
use goodput_core::tokens::{Tiktoken, TokenCounter};
use goodput_core::workload::{GeneratedWorkload, LengthDistribution, PromptVocabulary, Workload};

/// Makes the run's backend over a client to the simulator, on a clock running at a time scale
/// (target seconds per runtime second: a backend pacing its own sends scales its waits by it).
pub type MakeBackend =
    Arc<dyn Fn(HttpClient, f64) -> Result<Arc<dyn Backend>, String> + Send + Sync>;

/// The client side of a virtual-time target.
#[derive(Clone)]
pub struct VirtualRequests {
    /// What each request asks.
    pub workload: Arc<dyn Workload>,
    /// The backend of the run's `--api`, over a client to the simulator.
    pub backend: MakeBackend,
    /// Whether answers are streamed (non-streamed ones have no TTFT).
    pub streamed: bool,
    /// Fallback token counting (where the answer carries no usage).
    pub counter: Arc<dyn TokenCounter>,
    /// The correlation id every request carries, if any.
    pub request_ids: Option<RequestIds>,
    /// How the report splits requests by prompt length.
    pub buckets: LengthBuckets,
    /// SLO classes: each class's requests are judged against its own SLO.
    pub classes: Vec<ClassInfo>,
}

impl std::fmt::Debug for VirtualRequests {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VirtualRequests")
            .field("workload", &self.workload)
            .field("streamed", &self.streamed)
            .field("counter", &self.counter.name())
            .field("request_ids", &self.request_ids)
            .field("buckets", &self.buckets)
            .field("classes", &self.classes)
            .finish_non_exhaustive()
    }
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
        let openai = OpenAiConfig {
            ignore_eos: true,
            ..OpenAiConfig::default()
        };
        VirtualRequests::openai(Arc::new(workload), openai)
    }

    /// `workload` sent through an OpenAI-compatible API configured by `openai`.
    pub fn openai(workload: Arc<dyn Workload>, openai: OpenAiConfig) -> VirtualRequests {
        let streamed = openai.stream;
        let backend: MakeBackend = Arc::new(move |client, _time_scale| {
            OpenAiBackend::new(openai.clone(), client)
                .map(|backend| Arc::new(backend) as Arc<dyn Backend>)
                .map_err(|error| error.to_string())
        });
        VirtualRequests {
            workload,
            backend,
            streamed,
            counter: Arc::new(Tiktoken::cl100k()),
            request_ids: None,
            buckets: LengthBuckets::default(),
            classes: Vec::new(),
        }
    }
}
