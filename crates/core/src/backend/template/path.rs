//! A small JSONPath subset for counting a reply's items: `$`, `.key` (or `['key']`), `[n]`
//! and `[*]`. Parsed before the run (a path that does not parse is a usage error); evaluated
//! on every reply, where finding nothing is a protocol failure, never a zero.

use std::fmt;

use serde_json::Value;

/// One step of a path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Key(String),
    Index(usize),
    Wildcard,
}

/// A parsed items path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemsPath {
    text: String,
    segments: Vec<Segment>,
}

/// A path that cannot be understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid items path `{text}`: {reason} (e.g. `$.data[*]`, `$.outputs[0].data`, `$.count`)")]
pub struct PathError {
    /// The path as given.
    pub text: String,
    /// What is wrong.
    pub reason: &'static str,
}

impl fmt::Display for ItemsPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl ItemsPath {
    /// Parses `$.a.b[*]`-style paths.
    pub fn parse(text: &str) -> Result<ItemsPath, PathError> {
        let error = |reason| PathError {
            text: text.to_string(),
            reason,
        };
        let rest = text
            .trim()
            .strip_prefix('$')
            .ok_or_else(|| error("must start with `$`"))?;
        let mut segments = Vec::new();
        let mut chars = rest.char_indices().peekable();
        while let Some((at, c)) = chars.next() {
            match c {
                '.' => {
                    let start = at + 1;
                    let mut end = rest.len();
                    while let Some(&(i, next)) = chars.peek() {
                        if next == '.' || next == '[' {
                            end = i;
                            break;
                        }
                        chars.next();
                    }
                    let key = &rest[start..end];
                    if key.is_empty() {
                        return Err(error("empty key"));
                    }
                    segments.push(Segment::Key(key.to_string()));
                }
                '[' => {
                    let close = rest[at..].find(']').ok_or_else(|| error("unclosed `[`"))?;
                    let inner = rest[at + 1..at + close].trim();
                    for _ in 0..close {
                        chars.next();
                    }
                    segments.push(bracket(inner).ok_or_else(|| error("bad `[…]`"))?);
                }
                _ => return Err(error("expected `.` or `[`")),
            }
        }
        Ok(ItemsPath {
            text: text.trim().to_string(),
            segments,
        })
    }

    /// The nodes the path matches in `value`, and whether it has a `[*]`.
    fn nodes<'v>(&self, value: &'v Value) -> (Vec<&'v Value>, bool) {
        let mut nodes: Vec<&'v Value> = vec![value];
        let mut wildcard = false;
        for segment in &self.segments {
            nodes = nodes
                .into_iter()
                .flat_map(|node| -> Vec<&'v Value> {
                    match segment {
                        Segment::Key(key) => node.get(key).into_iter().collect(),
                        Segment::Index(i) => node.get(*i).into_iter().collect(),
                        Segment::Wildcard => match node {
                            Value::Array(items) => items.iter().collect(),
                            Value::Object(map) => map.values().collect(),
                            _ => Vec::new(),
                        },
                    }
                })
                .collect();
            wildcard |= *segment == Segment::Wildcard;
        }
        (nodes, wildcard)
    }

    /// The items `value` holds at the path: the number of nodes matched when the path has a
    /// `[*]`; else the length of the array, or the number, it names. `None` when the path
    /// finds nothing (or a value that is neither).
    pub fn count(&self, value: &Value) -> Option<u64> {
        let (nodes, wildcard) = self.nodes(value);
        if wildcard {
            return (!nodes.is_empty()).then_some(nodes.len() as u64);
        }
        match nodes.first()? {
            Value::Array(items) if !items.is_empty() => Some(items.len() as u64),
            Value::Number(n) => n.as_u64(),
            _ => None,
        }
    }

    /// The tokens of one streamed event: with a `[*]` the nodes matched; else the array found
    /// counts its length and any other value found (a token object, its id, its text) one.
    /// `None` when the path finds nothing (or `null`).
    pub fn tokens(&self, value: &Value) -> Option<u64> {
        let (nodes, wildcard) = self.nodes(value);
        if wildcard {
            return (!nodes.is_empty()).then_some(nodes.len() as u64);
        }
        match nodes.first()? {
            Value::Null => None,
            Value::Array(items) => Some(items.len() as u64),
            _ => Some(1),
        }
    }
}

fn bracket(inner: &str) -> Option<Segment> {
    if inner == "*" {
        return Some(Segment::Wildcard);
    }
    if let Ok(index) = inner.parse::<usize>() {
        return Some(Segment::Index(index));
    }
    let quoted = inner
        .strip_prefix('\'')
        .and_then(|s| s.strip_suffix('\''))
        .or_else(|| inner.strip_prefix('"').and_then(|s| s.strip_suffix('"')))?;
    Some(Segment::Key(quoted.to_string()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn counts() {
        let value = json!({"outputs": [{"data": [1, 2, 3]}, {"data": [4]}], "n": 7, "e": []});
        let count = |path: &str| ItemsPath::parse(path).unwrap().count(&value);
        assert_eq!(count("$.outputs[*]"), Some(2));
        assert_eq!(count("$.outputs[*].data[*]"), Some(4));
        assert_eq!(count("$.outputs[0].data"), Some(3));
        assert_eq!(count("$['outputs'][1].data"), Some(1));
        assert_eq!(count("$.n"), Some(7));
        assert_eq!(count("$.missing"), None);
        assert_eq!(count("$.missing[*]"), None);
        assert_eq!(count("$.e"), None);
        let tokens = |path: &str| ItemsPath::parse(path).unwrap().tokens(&value);
        assert_eq!(tokens("$.n"), Some(1));
        assert_eq!(tokens("$.outputs[0]"), Some(1));
        assert_eq!(tokens("$.outputs[0].data"), Some(3));
        assert_eq!(tokens("$.e"), Some(0));
        assert_eq!(tokens("$.missing"), None);
        for bad in ["data", "$.", "$[", "$.a[x]", "$x"] {
            assert!(ItemsPath::parse(bad).is_err(), "{bad}");
        }
    }
}
