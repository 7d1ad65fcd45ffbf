//! The tensors of a KServe v2 request: a generated tensor ([`TensorSpec`]: a name, a shape
//! whose first dimension is the batch, a datatype) or the `inputs` of a workload file
//! ([`TensorSource::File`], one request body per line, used in turn).

use std::fmt;
use std::str::FromStr;

use serde_json::{Value, json};

use crate::backend::{RequestInput, RequestSpec};

/// A tensor datatype of the Open Inference Protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataType {
    /// `BOOL`.
    Bool,
    /// `UINT8`.
    Uint8,
    /// `UINT16`.
    Uint16,
    /// `UINT32`.
    Uint32,
    /// `UINT64`.
    Uint64,
    /// `INT8`.
    Int8,
    /// `INT16`.
    Int16,
    /// `INT32`.
    Int32,
    /// `INT64`.
    Int64,
    /// `FP16`.
    Fp16,
    /// `FP32`.
    Fp32,
    /// `FP64`.
    Fp64,
    /// `BYTES` (strings: the workload's prompts, one per row).
    Bytes,
}

/// Every datatype, in protocol order.
pub const DATATYPES: [DataType; 13] = [
    DataType::Bool,
    DataType::Uint8,
    DataType::Uint16,
    DataType::Uint32,
    DataType::Uint64,
    DataType::Int8,
    DataType::Int16,
    DataType::Int32,
    DataType::Int64,
    DataType::Fp16,
    DataType::Fp32,
    DataType::Fp64,
    DataType::Bytes,
];

impl DataType {
    /// The protocol's name (`FP32`).
    pub fn name(self) -> &'static str {
        match self {
            DataType::Bool => "BOOL",
            DataType::Uint8 => "UINT8",
            DataType::Uint16 => "UINT16",
            DataType::Uint32 => "UINT32",
            DataType::Uint64 => "UINT64",
            DataType::Int8 => "INT8",
            DataType::Int16 => "INT16",
            DataType::Int32 => "INT32",
            DataType::Int64 => "INT64",
            DataType::Fp16 => "FP16",
            DataType::Fp32 => "FP32",
            DataType::Fp64 => "FP64",
            DataType::Bytes => "BYTES",
        }
    }

    /// Element `k` of a generated tensor of request `index`: deterministic, small enough for
    /// every type (integers in 0..100, floats in [0, 1)).
    fn element(self, index: u64, k: u64, texts: &[String], row: usize) -> Value {
        let n = index.wrapping_mul(31).wrapping_add(k.wrapping_mul(7));
        match self {
            DataType::Bool => json!(n.is_multiple_of(2)),
            DataType::Fp16 | DataType::Fp32 | DataType::Fp64 => json!((n % 1000) as f64 / 1000.0),
            DataType::Bytes => json!(
                texts
                    .get(row % texts.len().max(1))
                    .map_or("", String::as_str)
            ),
            _ => json!(n % 100),
        }
    }
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for DataType {
    type Err = TensorError;

    fn from_str(text: &str) -> Result<DataType, TensorError> {
        DATATYPES
            .into_iter()
            .find(|t| t.name().eq_ignore_ascii_case(text.trim()))
            .ok_or_else(|| TensorError::DataType(text.to_string()))
    }
}

/// A tensor description or workload file that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TensorError {
    /// Not `D0xD1x…` of positive integers.
    #[error(
        "invalid tensor shape `{0}`: expected positive dimensions such as 1x3x224x224 (the first is the batch)"
    )]
    Shape(String),
    /// An unknown datatype.
    #[error(
        "unknown tensor datatype `{0}` (known: BOOL, UINT8…UINT64, INT8…INT64, FP16, FP32, FP64, BYTES)"
    )]
    DataType(String),
    /// A line of the tensor file that is not a v2 request.
    #[error("tensor file line {line}: {reason}")]
    File {
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// A file with no request in it.
    #[error("the tensor file holds no request")]
    Empty,
}

/// A generated input tensor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorSpec {
    /// The input's name (`--tensor-name`).
    pub name: String,
    /// The shape; the first dimension is the batch (replaced by a request's batch size).
    pub shape: Vec<u64>,
    /// The datatype.
    pub datatype: DataType,
}

/// Parses `1x3x224x224` (also `1,3,224,224`).
pub fn parse_shape(text: &str) -> Result<Vec<u64>, TensorError> {
    let dims: Option<Vec<u64>> = text
        .split(['x', 'X', ','])
        .map(|d| d.trim().parse::<u64>().ok().filter(|&d| d > 0))
        .collect();
    dims.filter(|d| !d.is_empty())
        .ok_or_else(|| TensorError::Shape(text.to_string()))
}

impl TensorSpec {
    /// Elements of one batch row (the product of every dimension after the first).
    pub fn row_elements(&self) -> u64 {
        self.shape.iter().skip(1).product()
    }

    /// The `inputs` entry of a request of `rows` rows; BYTES elements are the request's
    /// prompts, one per row.
    fn input(&self, index: u64, rows: u64, texts: &[String]) -> Value {
        let per_row = self.row_elements();
        let data: Vec<Value> = (0..rows)
            .flat_map(|row| {
                (0..per_row).map(move |k| {
                    let position = row * per_row + k;
                    let row = usize::try_from(row).unwrap_or(usize::MAX);
                    self.datatype.element(index, position, texts, row)
                })
            })
            .collect();
        let mut shape = self.shape.clone();
        if let Some(first) = shape.first_mut() {
            *first = rows;
        }
        json!({"name": self.name, "shape": shape, "datatype": self.datatype.name(), "data": data})
    }
}

/// Where the tensors of a request come from.
#[derive(Debug, Clone, PartialEq)]
pub enum TensorSource {
    /// Generated to a shape; a request's batch is its number of prompts (`--batch-size`),
    /// else the shape's first dimension.
    Generated(TensorSpec),
    /// Request bodies read from a JSONL file (`{"inputs": […], …}` or a bare `inputs`
    /// array per line), request `i` sending line `i mod n`, with the rows each sends.
    File(Vec<(Value, u64)>),
}

/// Why a v2 run reports no input tokens (the run's `workload.tensor_input_tokens`).
pub const NO_INPUT_TOKENS: &str =
    "none: the tensors are not text (only BYTES tensors generated from the prompts carry tokens)";

impl TensorSource {
    /// Whether the tensors carry the workload's prompts as text (generated `BYTES`), so the
    /// prompts' token counts are the requests' input tokens; numeric tensors and file
    /// requests carry none.
    pub fn carries_text(&self) -> bool {
        matches!(self, TensorSource::Generated(spec) if spec.datatype == DataType::Bytes)
    }

    /// Reads a JSONL file of v2 requests: each line a body `{"inputs": [...]}` (other keys,
    /// such as `parameters`, are sent as they are) or a bare `inputs` array.
    pub fn from_jsonl(text: &str) -> Result<TensorSource, TensorError> {
        let mut bodies = Vec::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let error = |reason: String| TensorError::File {
                line: i + 1,
                reason,
            };
            let value: Value = serde_json::from_str(line).map_err(|e| error(e.to_string()))?;
            let body = match value {
                Value::Array(_) => json!({ "inputs": value }),
                Value::Object(_) => value,
                _ => return Err(error("expected an object with `inputs` or an array".into())),
            };
            let rows = body_rows(&body).map_err(error)?;
            bodies.push((body, rows));
        }
        if bodies.is_empty() {
            return Err(TensorError::Empty);
        }
        Ok(TensorSource::File(bodies))
    }

    /// The body of request `spec` and the batch rows it sends.
    pub fn body(&self, spec: &RequestSpec) -> (Value, u64) {
        match self {
            TensorSource::Generated(tensor) => {
                let texts = texts(&spec.input);
                let rows = match &spec.input {
                    RequestInput::Batch(prompts) => prompts.len() as u64,
                    _ => tensor.shape.first().copied().unwrap_or(1),
                };
                (
                    json!({ "inputs": [tensor.input(spec.index, rows, &texts)] }),
                    rows,
                )
            }
            TensorSource::File(bodies) => {
                let at = usize::try_from(spec.index % bodies.len().max(1) as u64).unwrap_or(0);
                bodies
                    .get(at)
                    .cloned()
                    .unwrap_or_else(|| (json!({"inputs": []}), 0))
            }
        }
    }
}

fn texts(input: &RequestInput) -> Vec<String> {
    match input {
        RequestInput::Text(text) => vec![text.clone()],
        RequestInput::Messages(messages) => {
            vec![
                messages
                    .iter()
                    .map(|m| m.content.text())
                    .collect::<Vec<_>>()
                    .join("\n"),
            ]
        }
        RequestInput::Batch(prompts) => prompts.clone(),
    }
}

/// The batch rows of a v2 body: the first dimension of its first input, every input having
/// a name, a datatype and a shape.
fn body_rows(body: &Value) -> Result<u64, String> {
    let inputs = body
        .get("inputs")
        .and_then(Value::as_array)
        .filter(|inputs| !inputs.is_empty())
        .ok_or("`inputs` must be a non-empty array")?;
    for input in inputs {
        let named = input.get("name").is_some_and(Value::is_string);
        let typed = input.get("datatype").is_some_and(Value::is_string);
        if !named || !typed || input.get("data").is_none() {
            return Err("every input needs `name`, `datatype`, `shape` and `data`".into());
        }
    }
    inputs[0]
        .get("shape")
        .and_then(Value::as_array)
        .and_then(|shape| shape.first())
        .and_then(Value::as_u64)
        .filter(|&rows| rows > 0)
        .ok_or_else(|| {
            "the first input's `shape` must start with a positive batch dimension".into()
        })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn spec(input: RequestInput) -> RequestSpec {
        RequestSpec {
            index: 2,
            input,
            expected_input_tokens: None,
            max_output_tokens: None,
            turn: None,
            tags: Default::default(),
        }
    }

    #[test]
    fn generated_tensors_take_the_batch_as_first_dimension() {
        let tensor = TensorSpec {
            name: "x".into(),
            shape: parse_shape("1x2x3").unwrap(),
            datatype: "fp32".parse().unwrap(),
        };
        let source = TensorSource::Generated(tensor);
        let batch = RequestInput::Batch(vec!["a".into(), "b".into()]);
        let (body, rows) = source.body(&spec(batch));
        assert_eq!(rows, 2);
        let input = &body["inputs"][0];
        assert_eq!(input["shape"], json!([2, 2, 3]));
        assert_eq!(input["datatype"], "FP32");
        assert_eq!(input["data"].as_array().unwrap().len(), 12);
        let bytes = TensorSource::Generated(TensorSpec {
            name: "t".into(),
            shape: vec![1],
            datatype: DataType::Bytes,
        });
        let (body, _) = bytes.body(&spec(RequestInput::Batch(vec!["p".into(), "q".into()])));
        assert_eq!(body["inputs"][0]["data"], json!(["p", "q"]));
        let one = TensorSource::Generated(TensorSpec {
            name: "t".into(),
            shape: vec![3, 2],
            datatype: DataType::Int64,
        });
        let (body, rows) = one.body(&spec(RequestInput::Text("p".into())));
        assert_eq!(
            (rows, body["inputs"][0]["shape"].clone()),
            (3, json!([3, 2]))
        );
        for bad in ["", "0x3", "3xa", "x"] {
            assert!(parse_shape(bad).is_err(), "{bad}");
        }
        assert!("FP33".parse::<DataType>().is_err());
    }

    #[test]
    fn files_are_sent_in_turn_with_their_rows() {
        let text = "{\"inputs\":[{\"name\":\"a\",\"shape\":[3,1],\"datatype\":\"INT64\",\"data\":[1,2,3]}],\"parameters\":{\"k\":1}}\n\n[{\"name\":\"a\",\"shape\":[1,1],\"datatype\":\"INT64\",\"data\":[4]}]\n";
        let source = TensorSource::from_jsonl(text).unwrap();
        let (body, rows) = source.body(&spec(RequestInput::Text(String::new())));
        assert_eq!(rows, 3, "index 2 → line 0 of 2");
        assert_eq!(body["parameters"]["k"], 1);
        let bad = TensorSource::from_jsonl("{\"inputs\":[{\"name\":\"a\"}]}").unwrap_err();
        assert!(bad.to_string().contains("line 1"), "{bad}");
        assert_eq!(TensorSource::from_jsonl("\n"), Err(TensorError::Empty));
    }
}
