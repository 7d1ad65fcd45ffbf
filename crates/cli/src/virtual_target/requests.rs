//! The requests a virtual-time run sends, from the run's flags: the workload a live run would
//! build and the API settings that shape each body ([`goodput_virtual::VirtualRequests`]).

use std::sync::Arc;

use anyhow::{Result, bail};
use goodput_core::backend::openai::ApiKind;
use goodput_core::config::RunConfig;
use goodput_sim::http::frontend::Api;
use goodput_virtual::VirtualRequests;

use crate::args::run::{ApiArg, RunArgs};
use crate::wiring::session::openai_config;
use crate::wiring::workload::prepare_offline;

/// The requests `args` would send in a live run (and `config` adjusted to the workload,
/// as for trace replay).
pub(crate) async fn from_run(
    args: &RunArgs,
    seed: u64,
    model: String,
    config: &mut RunConfig,
) -> Result<VirtualRequests> {
    if args.api == ApiArg::Http {
        bail!("--api http POSTs to --target; in virtual time use --api chat or --api completions");
    }
    let openai = openai_config(args, model)?;
    let tensors = args
        .tensors
        .source(args.api == ApiArg::V2, args.batch_size)?
        .map(Arc::new);
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
    let built = prepare_offline(args, seed, config).await?;
    let workload = args
        .images
        .wrap(args.api == ApiArg::Chat, seed, built.workload)?;
    Ok(VirtualRequests {
        workload,
        openai,
        api,
        buckets: built.buckets,
        tensors,
    })
}
