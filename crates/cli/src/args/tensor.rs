//! `--api v2` tensor arguments: a tensor generated to `--tensor-shape` (`--tensor-dtype`,
//! `--tensor-name`) or the requests of a `--tensor-file`; refused with any other API.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use goodput_core::backend::v2::grpc::GrpcMethod;
use goodput_core::backend::v2::{DataType, NO_INPUT_TOKENS, TensorSource, TensorSpec, parse_shape};

/// The tensors of `--api v2`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct TensorArgs {
    /// --api v2: the input tensor's shape, e.g. 1x3x224x224; its first dimension is the batch
    /// (replaced by --batch-size or each --batch-steps step when given) [default: 1x16].
    #[arg(long, value_name = "DIMS", help_heading = "Target")]
    pub(crate) tensor_shape: Option<String>,
    /// --api v2: the generated tensor's datatype: FP32, FP16, FP64, INT8…INT64, UINT8…UINT64,
    /// BOOL or BYTES (the workload's prompts, one per row) [default: FP32].
    #[arg(long, value_name = "TYPE", help_heading = "Target")]
    pub(crate) tensor_dtype: Option<String>,
    /// --api v2: the generated input's name [default: input].
    #[arg(long, value_name = "NAME", help_heading = "Target")]
    pub(crate) tensor_name: Option<String>,
    /// --api v2: requests from a JSONL file, each line a v2 body `{"inputs": [...]}` or its
    /// `inputs` array, sent in turn (instead of a generated tensor).
    #[arg(long, value_name = "FILE", help_heading = "Target", conflicts_with_all = ["tensor_shape", "tensor_dtype", "tensor_name"])]
    pub(crate) tensor_file: Option<PathBuf>,
    /// --api v2 over gRPC (KServe v2 / Triton `GRPCInferenceService` on --target's gRPC port,
    /// e.g. http://host:8001): `unary` calls ModelInfer (one response, items = rows); `stream`
    /// calls ModelStreamInfer (decoupled: every response is a token, the last marked
    /// `triton_final_response`).
    #[arg(long, value_name = "METHOD", help_heading = "Target")]
    pub(crate) grpc: Option<GrpcArg>,
}

/// `--grpc`: which v2 gRPC method requests call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum GrpcArg {
    /// ModelInfer: one response per request.
    Unary,
    /// ModelStreamInfer: decoupled streaming, each response a token.
    Stream,
}

impl TensorArgs {
    fn given(&self) -> bool {
        self.tensor_shape.is_some()
            || self.tensor_dtype.is_some()
            || self.tensor_name.is_some()
            || self.tensor_file.is_some()
            || self.grpc.is_some()
    }

    /// `--grpc`, the method of a v2 run over gRPC.
    pub(crate) fn grpc_method(&self) -> Option<GrpcMethod> {
        self.grpc.map(|method| match method {
            GrpcArg::Unary => GrpcMethod::Unary,
            GrpcArg::Stream => GrpcMethod::Stream,
        })
    }

    /// Why a `--api v2` run (`v2`) reports no input tokens, when its tensors are not text
    /// (a `--tensor-file`, or a generated tensor of any datatype but BYTES).
    pub(crate) fn input_tokens_note(&self, v2: bool) -> Option<&'static str> {
        let bytes = self.tensor_file.is_none()
            && self
                .tensor_dtype
                .as_deref()
                .is_some_and(|dtype| dtype.parse::<DataType>().ok() == Some(DataType::Bytes));
        (v2 && !bytes).then_some(NO_INPUT_TOKENS)
    }

    /// The tensors of `--api v2` (`v2`), checked; the flags are refused with other APIs.
    pub(crate) fn source(&self, v2: bool, batch_size: Option<u32>) -> Result<Option<TensorSource>> {
        if !v2 {
            if self.given() {
                bail!(
                    "--tensor-shape, --tensor-dtype, --tensor-name, --tensor-file and --grpc go with --api v2"
                );
            }
            return Ok(None);
        }
        if let Some(path) = &self.tensor_file {
            if batch_size.is_some() {
                bail!(
                    "--tensor-file requests carry their own batch (the first input's shape): drop --batch-size"
                );
            }
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("--tensor-file: cannot read {}", path.display()))?;
            let source = TensorSource::from_jsonl(&text)
                .with_context(|| format!("--tensor-file {}", path.display()))?;
            return Ok(Some(source));
        }
        let shape = parse_shape(self.tensor_shape.as_deref().unwrap_or("1x16"))
            .context("--tensor-shape")?;
        let datatype: DataType = self
            .tensor_dtype
            .as_deref()
            .unwrap_or("FP32")
            .parse()
            .context("--tensor-dtype")?;
        let name = self.tensor_name.clone().unwrap_or_else(|| "input".into());
        if name.trim().is_empty() {
            bail!("--tensor-name must not be empty");
        }
        Ok(Some(TensorSource::Generated(TensorSpec {
            name,
            shape,
            datatype,
        })))
    }
}
