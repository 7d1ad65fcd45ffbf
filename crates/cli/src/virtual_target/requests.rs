//! The requests a virtual-time run sends, from the run's plain options: the workload a live
//! run would build, the backend of its `--api` (the live run's own, over a client to the
//! simulator), its counting tokenizer and correlation ids ([`goodput_virtual::VirtualRequests`]).

use std::sync::Arc;

use anyhow::{Result, bail};
use goodput_core::backend::RequestIds;
use goodput_core::backend::openai::ApiKind;
use goodput_core::config::RunConfig;
use goodput_virtual::{MakeBackend, VirtualRequests};

use crate::options::run::{Api as ApiOption, RunOptions};
use crate::wiring::workload::{prepare_offline, runner_counter};

/// The requests `options` would send in a live run against the embedded simulator (and
/// `config` adjusted to the workload, as for trace replay).
pub(crate) async fn from_run(
    options: &RunOptions,
    model: String,
    config: &mut RunConfig,
) -> Result<VirtualRequests> {
    if options.request.api == ApiOption::Http {
        bail!("--api http POSTs to --target; in virtual time use --api chat or --api completions");
    }
    let openai = options.request.openai(model);
    if openai.api == ApiKind::Responses {
        bail!(
            "--api responses: the simulator serves chat, completions, messages, embeddings, \
             rerank and v2; use one of those in virtual time"
        );
    }
    let streamed = openai.stream;
    let built = prepare_offline(options, config).await?;
    let workload = crate::wiring::workload::per_request(options, built.workload)?;
    let request = options.request.clone();
    let backend: MakeBackend = Arc::new(move |client, time_scale| {
        crate::wiring::backend::backend(&request, openai.clone(), client, time_scale)
            .map_err(|error| format!("{error:#}"))
    });
    Ok(VirtualRequests {
        workload,
        backend,
        streamed,
        counter: runner_counter(&options.workload.tokenizer)?,
        request_ids: options
            .fleet
            .request_id_header
            .clone()
            .map(RequestIds::fresh),
        buckets: built.buckets,
        classes: options.fleet.classes.clone(),
    })
}
