//! A fleet layout in one word, for flags and grids: `8` or `4xtp2` (replicas, each with its
//! tensor parallelism), `2p+6d` or `2p:tp2+4d:tp1` (prefill and decode pools). Applied to a
//! configuration it sets `replicas`, the engine's `tensor_parallel` and `disaggregation`,
//! keeping the rest (the link, the routing) as configured.

use super::{DisaggregationConfig, EngineConfig, SimConfig};

/// A parsed layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// Identical replicas, with their tensor parallelism when given.
    Replicas {
        /// Replicas.
        count: u32,
        /// Tensor parallelism of each.
        tp: Option<u32>,
    },
    /// Prefill and decode pools: `(replicas, tensor parallelism)` of each.
    Pools {
        /// The prefill pool.
        prefill: (u32, Option<u32>),
        /// The decode pool.
        decode: (u32, Option<u32>),
    },
}

/// What a layout looks like, for error messages.
pub const LAYOUT_FORMS: &str = "N, NxtpK (e.g. 4xtp2), Np+Md (e.g. 2p+6d) or 2p:tp2+4d:tp1";

/// `N`, or `N` followed by `suffix` (`p`, `d`; empty for none).
fn count(text: &str, suffix: char) -> Option<u32> {
    let digits = if suffix == ' ' {
        text
    } else {
        text.strip_suffix(suffix)?
    };
    digits.parse().ok().filter(|n| *n > 0)
}

/// `tpK`.
fn tp(text: &str) -> Option<u32> {
    text.strip_prefix("tp")?.parse().ok().filter(|n| *n > 0)
}

/// One pool: `Np` or `Np:tpK` (with `suffix` `p` or `d`).
fn pool(text: &str, suffix: char) -> Option<(u32, Option<u32>)> {
    match text.split_once(':') {
        None => Some((count(text, suffix)?, None)),
        Some((n, k)) => Some((count(n, suffix)?, Some(tp(k)?))),
    }
}

impl std::fmt::Display for Layout {
    /// The layout in the form [`Layout::parse`] reads: `8`, `4xtp2`, `2p+6d`, `2p:tp2+4d:tp1`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let pool = |f: &mut std::fmt::Formatter<'_>, (n, tp): (u32, Option<u32>), suffix| {
            write!(f, "{n}{suffix}")?;
            tp.map_or(Ok(()), |tp| write!(f, ":tp{tp}"))
        };
        match *self {
            Layout::Replicas { count, tp: None } => write!(f, "{count}"),
            Layout::Replicas {
                count,
                tp: Some(tp),
            } => write!(f, "{count}xtp{tp}"),
            Layout::Pools { prefill, decode } => {
                pool(f, prefill, 'p')?;
                f.write_str("+")?;
                pool(f, decode, 'd')
            }
        }
    }
}

impl Layout {
    /// Parses a layout (case and spaces ignored; `×` is `x`).
    pub fn parse(text: &str) -> Result<Layout, String> {
        let text: String = text
            .to_ascii_lowercase()
            .replace('×', "x")
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        let parsed = match text.split_once('+') {
            Some((prefill, decode)) => pool(prefill, 'p')
                .zip(pool(decode, 'd'))
                .map(|(prefill, decode)| Layout::Pools { prefill, decode }),
            None => match text.split_once('x') {
                None => count(&text, ' ').map(|count| Layout::Replicas { count, tp: None }),
                Some((n, k)) => count(n, ' ')
                    .zip(tp(k))
                    .map(|(count, tp)| Layout::Replicas {
                        count,
                        tp: Some(tp),
                    }),
            },
        };
        parsed.ok_or_else(|| format!("layout `{text}` is none of {LAYOUT_FORMS}"))
    }

    /// `config` laid out this way; `Err` when it gives the fixed-timing engine (one
    /// accelerator a replica) a tensor parallelism above 1.
    pub fn apply(self, config: &mut SimConfig) -> Result<(), String> {
        let tps = match self {
            Layout::Replicas { tp, .. } => [tp, None],
            Layout::Pools { prefill, decode } => [prefill.1, decode.1],
        };
        if matches!(config.engine, EngineConfig::Fixed(_)) && tps.iter().flatten().any(|tp| *tp > 1)
        {
            return Err("the fixed-timing engine runs on one accelerator a replica (tp1)".into());
        }
        let set_tp = |config: &mut SimConfig, tp: Option<u32>| {
            if let (EngineConfig::Batching(batching), Some(tp)) = (&mut config.engine, tp) {
                batching.tensor_parallel = tp;
            }
        };
        match self {
            Layout::Replicas { count, tp } => {
                config.replicas = count;
                config.disaggregation = None;
                set_tp(config, tp);
            }
            Layout::Pools { prefill, decode } => {
                config.replicas = 1;
                let split = config
                    .disaggregation
                    .get_or_insert_with(DisaggregationConfig::default);
                split.prefill_replicas = prefill.0;
                split.prefill_tensor_parallel = prefill.1;
                split.decode_replicas = decode.0;
                split.decode_tensor_parallel = decode.1;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn layouts_of_eight_gpus_parse_and_count_eight() {
        for (text, gpus) in [
            ("8xtp1", 8),
            ("4xtp2", 8),
            ("4 × TP2", 8),
            ("2p+6d", 8),
            ("2p:tp2+4d:tp1", 8),
            ("1p:tp4+2d:tp2", 8),
        ] {
            let mut config = SimConfig::default();
            Layout::parse(text).unwrap().apply(&mut config).unwrap();
            config.validate().unwrap();
            assert_eq!(config.accelerators(), gpus, "{text}");
        }
        for text in ["8", "4xtp2", "2p+6d", "2p:tp2+4d:tp1", "1p+3d:tp2"] {
            assert_eq!(Layout::parse(text).unwrap().to_string(), text);
        }
        assert_eq!(Layout::parse("4 × TP2").unwrap().to_string(), "4xtp2");
        let mut config = SimConfig::default();
        Layout::parse("3").unwrap().apply(&mut config).unwrap();
        assert_eq!((config.replicas, config.accelerators()), (3, 3));
    }

    #[test]
    fn malformed_layouts_are_refused_with_the_forms() {
        for text in [
            "", "0", "2p", "2p+", "x2", "4xtp0", "2p:4+6d", "2d+6p", "4xtp",
        ] {
            let error = Layout::parse(text).unwrap_err();
            assert!(error.contains("NxtpK"), "{text}: {error}");
        }
    }
}
