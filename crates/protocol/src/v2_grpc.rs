//! The messages of KServe v2 / Triton's `grpc_service.proto` (package `inference`) that
//! goodput sends and reads, written by hand as prost messages (no `protoc` at build time):
//! the field numbers and types are the proto's, so any v2 gRPC server understands them.

use std::collections::HashMap;

/// The service every method belongs to.
pub const SERVICE: &str = "inference.GRPCInferenceService";

/// `ServerLiveRequest {}`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ServerLiveRequest {}

/// `ServerLiveResponse { bool live = 1; }`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ServerLiveResponse {
    /// Whether the server is live.
    #[prost(bool, tag = "1")]
    pub live: bool,
}

/// `ServerReadyRequest {}`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ServerReadyRequest {}

/// `ServerReadyResponse { bool ready = 1; }`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ServerReadyResponse {
    /// Whether the server is ready.
    #[prost(bool, tag = "1")]
    pub ready: bool,
}

/// `ModelMetadataRequest { string name = 1; string version = 2; }`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ModelMetadataRequest {
    /// The model.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Its version (empty: the server's choice).
    #[prost(string, tag = "2")]
    pub version: String,
}

/// `ModelMetadataResponse.TensorMetadata`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TensorMetadata {
    /// The tensor's name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Its datatype (`FP32`).
    #[prost(string, tag = "2")]
    pub datatype: String,
    /// Its shape (-1: variable).
    #[prost(int64, repeated, tag = "3")]
    pub shape: Vec<i64>,
}

/// `ModelMetadataResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ModelMetadataResponse {
    /// The model.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Its versions.
    #[prost(string, repeated, tag = "2")]
    pub versions: Vec<String>,
    /// Its platform (`onnxruntime_onnx`, `python`…).
    #[prost(string, tag = "3")]
    pub platform: String,
    /// Its inputs.
    #[prost(message, repeated, tag = "4")]
    pub inputs: Vec<TensorMetadata>,
    /// Its outputs.
    #[prost(message, repeated, tag = "5")]
    pub outputs: Vec<TensorMetadata>,
}

/// `InferParameter`: one of a bool, an integer, a string or a double.
#[derive(Clone, PartialEq, prost::Message)]
pub struct InferParameter {
    /// The value.
    #[prost(oneof = "ParameterChoice", tags = "1, 2, 3, 4, 5")]
    pub parameter_choice: Option<ParameterChoice>,
}

/// `InferParameter.parameter_choice`.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum ParameterChoice {
    /// `bool_param`.
    #[prost(bool, tag = "1")]
    BoolParam(bool),
    /// `int64_param`.
    #[prost(int64, tag = "2")]
    Int64Param(i64),
    /// `string_param`.
    #[prost(string, tag = "3")]
    StringParam(String),
    /// `double_param`.
    #[prost(double, tag = "4")]
    DoubleParam(f64),
    /// `uint64_param`.
    #[prost(uint64, tag = "5")]
    Uint64Param(u64),
}

impl InferParameter {
    /// A bool parameter.
    pub fn bool(value: bool) -> Self {
        InferParameter {
            parameter_choice: Some(ParameterChoice::BoolParam(value)),
        }
    }
}

/// `InferTensorContents`: a tensor's elements, in the field of its datatype.
#[derive(Clone, PartialEq, prost::Message)]
pub struct InferTensorContents {
    /// `BOOL`.
    #[prost(bool, repeated, tag = "1")]
    pub bool_contents: Vec<bool>,
    /// `INT8`, `INT16`, `INT32`.
    #[prost(int32, repeated, tag = "2")]
    pub int_contents: Vec<i32>,
    /// `INT64`.
    #[prost(int64, repeated, tag = "3")]
    pub int64_contents: Vec<i64>,
    /// `UINT8`, `UINT16`, `UINT32`.
    #[prost(uint32, repeated, tag = "4")]
    pub uint_contents: Vec<u32>,
    /// `UINT64`.
    #[prost(uint64, repeated, tag = "5")]
    pub uint64_contents: Vec<u64>,
    /// `FP32`.
    #[prost(float, repeated, tag = "6")]
    pub fp32_contents: Vec<f32>,
    /// `FP64`.
    #[prost(double, repeated, tag = "7")]
    pub fp64_contents: Vec<f64>,
    /// `BYTES`.
    #[prost(bytes = "vec", repeated, tag = "8")]
    pub bytes_contents: Vec<Vec<u8>>,
}

/// `ModelInferRequest.InferInputTensor` (and, with the same fields,
/// `ModelInferResponse.InferOutputTensor`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct InferTensor {
    /// The tensor's name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Its datatype.
    #[prost(string, tag = "2")]
    pub datatype: String,
    /// Its shape; the first dimension is the batch.
    #[prost(int64, repeated, tag = "3")]
    pub shape: Vec<i64>,
    /// Its parameters.
    #[prost(map = "string, message", tag = "4")]
    pub parameters: HashMap<String, InferParameter>,
    /// Its elements (unless sent raw).
    #[prost(message, optional, tag = "5")]
    pub contents: Option<InferTensorContents>,
}

/// `ModelInferRequest.InferRequestedOutputTensor`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RequestedOutput {
    /// The output's name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Its parameters.
    #[prost(map = "string, message", tag = "2")]
    pub parameters: HashMap<String, InferParameter>,
}

/// `ModelInferRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ModelInferRequest {
    /// The model.
    #[prost(string, tag = "1")]
    pub model_name: String,
    /// Its version (empty: the server's choice).
    #[prost(string, tag = "2")]
    pub model_version: String,
    /// The request's id (echoed in the response).
    #[prost(string, tag = "3")]
    pub id: String,
    /// The request's parameters.
    #[prost(map = "string, message", tag = "4")]
    pub parameters: HashMap<String, InferParameter>,
    /// The input tensors.
    #[prost(message, repeated, tag = "5")]
    pub inputs: Vec<InferTensor>,
    /// The outputs asked for (none: all).
    #[prost(message, repeated, tag = "6")]
    pub outputs: Vec<RequestedOutput>,
    /// The inputs' elements as raw little-endian bytes, one entry per input, when sent raw.
    #[prost(bytes = "vec", repeated, tag = "7")]
    pub raw_input_contents: Vec<Vec<u8>>,
}

/// `ModelInferResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ModelInferResponse {
    /// The model.
    #[prost(string, tag = "1")]
    pub model_name: String,
    /// Its version.
    #[prost(string, tag = "2")]
    pub model_version: String,
    /// The request's id.
    #[prost(string, tag = "3")]
    pub id: String,
    /// The response's parameters (`triton_final_response` in a decoupled stream).
    #[prost(map = "string, message", tag = "4")]
    pub parameters: HashMap<String, InferParameter>,
    /// The output tensors.
    #[prost(message, repeated, tag = "5")]
    pub outputs: Vec<InferTensor>,
    /// The outputs' elements as raw bytes, when sent raw.
    #[prost(bytes = "vec", repeated, tag = "6")]
    pub raw_output_contents: Vec<Vec<u8>>,
}

/// `ModelStreamInferResponse { string error_message = 1; ModelInferResponse infer_response = 2; }`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ModelStreamInferResponse {
    /// Non-empty: the request failed with this message.
    #[prost(string, tag = "1")]
    pub error_message: String,
    /// The response.
    #[prost(message, optional, tag = "2")]
    pub infer_response: Option<ModelInferResponse>,
}

/// The parameter a decoupled model's responses carry, true on the last one.
pub const FINAL_RESPONSE: &str = "triton_final_response";

impl ModelInferResponse {
    /// Whether the response says it is the last of its request (`triton_final_response`).
    pub fn is_final(&self) -> bool {
        matches!(
            self.parameters.get(FINAL_RESPONSE),
            Some(InferParameter {
                parameter_choice: Some(ParameterChoice::BoolParam(true))
            })
        )
    }
}
