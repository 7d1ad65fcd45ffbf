//! Input-length buckets: how a step's requests are split to report every metric per prompt
//! length (prefill-heavy and decode-heavy requests must not be blended into one number).
//!
//! Syntax: `short<1024,medium<8192,long` — named buckets with exclusive upper ends, the last
//! one open — or bare edges `512,4096` (named `<512`, `512-4095`, `≥4096`). A request falls in
//! the bucket of the prompt length its workload built (`expected_input_tokens`, known even when
//! the request failed), else of the server's count.

use std::fmt;
use std::str::FromStr;

/// The default: `short<1024,medium<8192,long`.
pub const DEFAULT_BUCKETS: &str = "short<1024,medium<8192,long";

/// One bucket: prompts of `min..max` tokens (`max` exclusive, `None`: no upper end).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LengthBucket {
    /// Name in the report.
    pub name: String,
    /// Shortest prompt, tokens.
    pub min: u64,
    /// First length beyond the bucket.
    pub end: Option<u64>,
}

/// Buckets covering every length, in increasing order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LengthBuckets {
    buckets: Vec<LengthBucket>,
    spec: String,
}

impl Default for LengthBuckets {
    fn default() -> Self {
        DEFAULT_BUCKETS
            .parse()
            .unwrap_or_else(|_| unreachable!("the default buckets parse"))
    }
}

impl LengthBuckets {
    /// The buckets, shortest first.
    pub fn buckets(&self) -> &[LengthBucket] {
        &self.buckets
    }

    /// The bucket of a prompt of `tokens` tokens.
    pub fn index_of(&self, tokens: u64) -> usize {
        self.buckets
            .iter()
            .position(|b| b.end.is_none_or(|end| tokens < end))
            .unwrap_or(self.buckets.len().saturating_sub(1))
    }
}

impl fmt::Display for LengthBuckets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.spec)
    }
}

/// A bucket specification that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "length buckets `{spec}`: {problem}; expected e.g. short<1024,medium<8192,long or 512,4096"
)]
pub struct BucketSpecError {
    /// The text as given.
    pub spec: String,
    /// What is wrong.
    pub problem: String,
}

impl FromStr for LengthBuckets {
    type Err = BucketSpecError;

    fn from_str(spec: &str) -> Result<Self, Self::Err> {
        let fail = |problem: String| BucketSpecError {
            spec: spec.to_string(),
            problem,
        };
        let parts: Vec<&str> = spec.split(',').map(str::trim).collect();
        if parts.iter().any(|p| p.is_empty()) {
            return Err(fail("an empty part".into()));
        }
        let named = parts.iter().any(|p| p.parse::<u64>().is_err());
        let buckets = if named {
            named_buckets(&parts)
        } else {
            edge_buckets(&parts)
        }
        .map_err(fail)?;
        Ok(LengthBuckets {
            buckets,
            spec: spec.trim().to_string(),
        })
    }
}

fn edge_buckets(parts: &[&str]) -> Result<Vec<LengthBucket>, String> {
    let edges: Vec<u64> = parts.iter().filter_map(|p| p.parse().ok()).collect();
    check_increasing(&edges)?;
    let mut buckets = Vec::with_capacity(edges.len() + 1);
    let mut min = 0;
    for &edge in &edges {
        let name = if min == 0 {
            format!("<{edge}")
        } else {
            format!("{min}-{}", edge - 1)
        };
        buckets.push(LengthBucket {
            name,
            min,
            end: Some(edge),
        });
        min = edge;
    }
    buckets.push(LengthBucket {
        name: format!("≥{min}"),
        min,
        end: None,
    });
    Ok(buckets)
}

fn named_buckets(parts: &[&str]) -> Result<Vec<LengthBucket>, String> {
    let (last, bounded) = parts.split_last().ok_or_else(|| "no bucket".to_string())?;
    let mut buckets = Vec::with_capacity(parts.len());
    let mut edges = Vec::new();
    let mut min = 0;
    for part in bounded {
        let (name, edge) = part
            .split_once('<')
            .ok_or_else(|| format!("`{part}` needs an upper end, like short<1024"))?;
        let edge: u64 = edge
            .trim()
            .parse()
            .map_err(|_| format!("`{part}`: the upper end is not a whole number"))?;
        edges.push(edge);
        buckets.push(LengthBucket {
            name: check_name(name)?,
            min,
            end: Some(edge),
        });
        min = edge;
    }
    check_increasing(&edges)?;
    if last.contains('<') {
        return Err(format!(
            "the last bucket `{last}` takes every longer prompt; drop its `<`"
        ));
    }
    buckets.push(LengthBucket {
        name: check_name(last)?,
        min,
        end: None,
    });
    Ok(buckets)
}

fn check_name(name: &str) -> Result<String, String> {
    let name = name.trim();
    if name.is_empty() {
        return Err("a bucket has no name".into());
    }
    Ok(name.to_string())
}

fn check_increasing(edges: &[u64]) -> Result<(), String> {
    if edges.first() == Some(&0) {
        return Err("an upper end of 0 leaves its bucket empty".into());
    }
    if edges.windows(2).any(|w| w[0] >= w[1]) {
        return Err("upper ends must increase".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn default_buckets_are_short_medium_long() {
        let buckets = LengthBuckets::default();
        let names: Vec<&str> = buckets.buckets().iter().map(|b| b.name.as_str()).collect();
        assert_eq!(names, ["short", "medium", "long"]);
        assert_eq!(buckets.index_of(0), 0);
        assert_eq!(buckets.index_of(1023), 0);
        assert_eq!(buckets.index_of(1024), 1);
        assert_eq!(buckets.index_of(100_000), 2);
        assert_eq!(buckets.to_string(), DEFAULT_BUCKETS);
    }

    #[test]
    fn bare_edges_get_names() {
        let buckets: LengthBuckets = "512,4096".parse().unwrap();
        let names: Vec<&str> = buckets.buckets().iter().map(|b| b.name.as_str()).collect();
        assert_eq!(names, ["<512", "512-4095", "≥4096"]);
        let one: LengthBuckets = "all".parse().unwrap();
        assert_eq!(one.index_of(5), 0);
    }

    #[test]
    fn bad_specs_say_why() {
        for (spec, problem) in [
            ("short<1024,medium<512,long", "increase"),
            ("short,long", "needs an upper end"),
            ("short<1k,long", "not a whole number"),
            ("short<10,long<20", "drop its `<`"),
            ("a<0,b", "empty"),
            ("", "empty part"),
        ] {
            let error = spec.parse::<LengthBuckets>().unwrap_err().to_string();
            assert!(error.contains(problem), "{spec}: {error}");
        }
    }
}
