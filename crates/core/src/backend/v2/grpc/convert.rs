//! A v2 JSON request body (what [`crate::backend::v2::TensorSource`] generates or reads, the
//! same tensors as `--api v2` over HTTP) turned into a gRPC `ModelInferRequest`: each input's
//! elements in the typed `contents` field of its datatype, or, when an input is `FP16` (which
//! has no typed field), every input as raw little-endian bytes in `raw_input_contents`.

use serde_json::Value;

use super::proto::{InferParameter, InferTensor, InferTensorContents, ModelInferRequest};
use super::proto::{ParameterChoice, RequestedOutput};

/// Builds the request of `body` for `model`, with `id`.
pub fn infer_request(body: &Value, model: &str, id: String) -> Result<ModelInferRequest, String> {
    let inputs = body
        .get("inputs")
        .and_then(Value::as_array)
        .ok_or("the request has no `inputs` array")?;
    let raw = inputs
        .iter()
        .any(|input| datatype(input).eq_ignore_ascii_case("FP16"));
    let mut request = ModelInferRequest {
        model_name: model.to_string(),
        id,
        parameters: parameters(body.get("parameters")),
        ..ModelInferRequest::default()
    };
    for input in inputs {
        let name = input.get("name").and_then(Value::as_str).unwrap_or("");
        let shape = input
            .get("shape")
            .and_then(Value::as_array)
            .map(|dims| dims.iter().filter_map(Value::as_i64).collect())
            .unwrap_or_default();
        let mut elements = Vec::new();
        flatten(input.get("data").unwrap_or(&Value::Null), &mut elements);
        let datatype = datatype(input).to_ascii_uppercase();
        let mut tensor = InferTensor {
            name: name.to_string(),
            datatype: datatype.clone(),
            shape,
            parameters: parameters(input.get("parameters")),
            contents: None,
        };
        if raw {
            request
                .raw_input_contents
                .push(raw_bytes(&datatype, &elements)?);
        } else {
            tensor.contents = Some(contents(&datatype, &elements)?);
        }
        request.inputs.push(tensor);
    }
    if let Some(outputs) = body.get("outputs").and_then(Value::as_array) {
        request.outputs = outputs
            .iter()
            .filter_map(|output| output.get("name").and_then(Value::as_str))
            .map(|name| RequestedOutput {
                name: name.to_string(),
                ..RequestedOutput::default()
            })
            .collect();
    }
    Ok(request)
}

fn datatype(input: &Value) -> &str {
    input.get("datatype").and_then(Value::as_str).unwrap_or("")
}

/// A JSON `parameters` object as v2 parameters (bools, integers, floats and strings).
fn parameters(value: Option<&Value>) -> std::collections::HashMap<String, InferParameter> {
    let Some(Value::Object(map)) = value else {
        return Default::default();
    };
    map.iter()
        .filter_map(|(key, value)| {
            let choice = match value {
                Value::Bool(b) => ParameterChoice::BoolParam(*b),
                Value::Number(n) => match n.as_i64() {
                    Some(i) => ParameterChoice::Int64Param(i),
                    None => ParameterChoice::DoubleParam(n.as_f64()?),
                },
                Value::String(s) => ParameterChoice::StringParam(s.clone()),
                _ => return None,
            };
            Some((
                key.clone(),
                InferParameter {
                    parameter_choice: Some(choice),
                },
            ))
        })
        .collect()
}

/// The elements of a (possibly nested, row-major) `data` array.
fn flatten<'a>(value: &'a Value, out: &mut Vec<&'a Value>) {
    match value {
        Value::Array(items) => items.iter().for_each(|item| flatten(item, out)),
        Value::Null => {}
        other => out.push(other),
    }
}

fn number(value: &Value) -> Result<f64, String> {
    match value {
        Value::Number(n) => n.as_f64().ok_or_else(|| format!("{n} is not a number")),
        Value::Bool(b) => Ok(f64::from(u8::from(*b))),
        other => Err(format!("{other} is not a number")),
    }
}

fn integers<T>(elements: &[&Value], cast: impl Fn(f64) -> T) -> Result<Vec<T>, String> {
    elements.iter().map(|e| number(e).map(&cast)).collect()
}

fn text(value: &Value) -> Vec<u8> {
    match value {
        Value::String(s) => s.as_bytes().to_vec(),
        other => other.to_string().into_bytes(),
    }
}

/// The typed contents of `elements` of `datatype`.
fn contents(datatype: &str, elements: &[&Value]) -> Result<InferTensorContents, String> {
    let mut contents = InferTensorContents::default();
    match datatype {
        "BOOL" => {
            contents.bool_contents = integers(elements, |n| n != 0.0)?;
        }
        "INT8" | "INT16" | "INT32" => contents.int_contents = integers(elements, |n| n as i32)?,
        "INT64" => contents.int64_contents = integers(elements, |n| n as i64)?,
        "UINT8" | "UINT16" | "UINT32" => contents.uint_contents = integers(elements, |n| n as u32)?,
        "UINT64" => contents.uint64_contents = integers(elements, |n| n as u64)?,
        "FP32" => contents.fp32_contents = integers(elements, |n| n as f32)?,
        "FP64" => contents.fp64_contents = integers(elements, |n| n)?,
        "BYTES" => contents.bytes_contents = elements.iter().map(|e| text(e)).collect(),
        other => return Err(format!("datatype {other:?} cannot be sent over gRPC")),
    }
    Ok(contents)
}

/// The raw little-endian bytes of `elements` of `datatype` (`BYTES`: each element prefixed
/// by its 4-byte length).
fn raw_bytes(datatype: &str, elements: &[&Value]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    for element in elements {
        if datatype == "BYTES" {
            let bytes = text(element);
            let length = u32::try_from(bytes.len()).map_err(|_| "an element over 4 GiB")?;
            out.extend_from_slice(&length.to_le_bytes());
            out.extend_from_slice(&bytes);
            continue;
        }
        let n = number(element)?;
        match datatype {
            "BOOL" | "UINT8" => out.push(n as u8),
            "INT8" => out.push((n as i8) as u8),
            "INT16" => out.extend_from_slice(&(n as i16).to_le_bytes()),
            "UINT16" => out.extend_from_slice(&(n as u16).to_le_bytes()),
            "INT32" => out.extend_from_slice(&(n as i32).to_le_bytes()),
            "UINT32" => out.extend_from_slice(&(n as u32).to_le_bytes()),
            "INT64" => out.extend_from_slice(&(n as i64).to_le_bytes()),
            "UINT64" => out.extend_from_slice(&(n as u64).to_le_bytes()),
            "FP16" => out.extend_from_slice(&f16_bits(n as f32).to_le_bytes()),
            "FP32" => out.extend_from_slice(&(n as f32).to_le_bytes()),
            "FP64" => out.extend_from_slice(&n.to_le_bytes()),
            other => return Err(format!("datatype {other:?} cannot be sent over gRPC")),
        }
    }
    Ok(out)
}

/// The IEEE 754 half-precision bits of `value` (rounded toward zero; generated tensors are
/// in [0, 1), well inside its range).
fn f16_bits(value: f32) -> u16 {
    let bits = value.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let exponent = ((bits >> 23) & 0xff) as i32 - 127 + 15;
    let mantissa = bits & 0x7f_ffff;
    if value == 0.0 || exponent <= 0 {
        return sign;
    }
    if exponent >= 0x1f {
        return sign | 0x7c00;
    }
    sign | ((exponent as u16) << 10) | ((mantissa >> 13) as u16)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn typed_contents_and_raw_fp16() {
        let body = json!({"inputs": [{"name": "x", "shape": [2, 2], "datatype": "INT64", "data": [[1, 2], [3, 4]]}],
                          "parameters": {"k": 1, "s": "v"}});
        let request = infer_request(&body, "m", "7".into()).unwrap();
        assert_eq!(request.model_name, "m");
        assert_eq!(request.inputs[0].shape, vec![2, 2]);
        let contents = request.inputs[0].contents.clone().unwrap();
        assert_eq!(contents.int64_contents, vec![1, 2, 3, 4]);
        assert_eq!(request.parameters.len(), 2);
        let half = json!({"inputs": [{"name": "h", "shape": [1, 2], "datatype": "FP16", "data": [0.5, 1.0]},
                                     {"name": "b", "shape": [1], "datatype": "BYTES", "data": ["ab"]}]});
        let request = infer_request(&half, "m", String::new()).unwrap();
        assert!(request.inputs.iter().all(|i| i.contents.is_none()));
        assert_eq!(request.raw_input_contents[0], vec![0x00, 0x38, 0x00, 0x3c]);
        assert_eq!(request.raw_input_contents[1], vec![2, 0, 0, 0, b'a', b'b']);
        let bad =
            json!({"inputs": [{"name": "x", "shape": [1], "datatype": "FP32", "data": ["a"]}]});
        assert!(infer_request(&bad, "m", String::new()).is_err());
    }
}
