//! The requests a virtual-time run sends, from the run's plain options: the workload a live
//! run would build and the API settings that shape each body
//! ([`goodput_virtual::VirtualRequests`]).

use std::sync::Arc;

use anyhow::{Result, bail};
use goodput_core::backend::openai::ApiKind;
use goodput_core::config::RunConfig;
use goodput_sim::http::frontend::Api;
use goodput_virtual::VirtualRequests;

use crate::options::run::{Api as ApiOption, RunOptions};
use crate::wiring::workload::{prepare_offline, with_images};

/// The requests `options` would send in a live run (and `config` adjusted to the workload, as
/// for trace replay).
pub(crate) async fn from_run(
    options: &RunOptions,
    model: String,
    config: &mut RunConfig,
) -> Result<VirtualRequests> {
    if options.request.api == ApiOption::Http {
        bail!("--api http POSTs to --target; in virtual time use --api chat or --api completions");
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
    let workload = crate::wiring::workload::with_mix(options, workload)?;
    Ok(VirtualRequests {
        workload,
        openai,
        api,
        buckets: built.buckets,
        tensors,
        classes: options.fleet.classes.clone(),
    })
}
