//! Model, adapter and SLO-class mixes: which model (`--model a=70%,b=30%`), LoRA adapter
//! (`--lora x=20%,y=10%`, the rest to the base model) and traffic class each request is, drawn
//! from the seed and the request's index alone (so shards and rebuilt journals agree), and
//! [`Mixed`], the workload that sends each request to its model or adapter and notes its
//! labels on its record ([`Workload::labels`]).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde_json::json;
use thiserror::Error;

use super::{Workload, mix_seed};
use crate::backend::RequestSpec;

/// Which model, adapter and class one request is (each `None` outside a mix of its kind).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Labels {
    /// The model of a model mix.
    pub model: Option<String>,
    /// The adapter of an adapter mix ([`BASE_ADAPTER`]: the base model's share).
    pub adapter: Option<String>,
    /// The SLO class.
    pub class: Option<String>,
}

/// The adapter label of the requests an adapter mix leaves to the base model (no adapter of
/// that name is allowed).
pub const BASE_ADAPTER: &str = "base";

/// Named shares of the requests, in the order given.
#[derive(Debug, Clone, PartialEq)]
pub struct Shares {
    entries: Vec<(String, f64)>,
}

/// Why a mix cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MixError {
    /// An entry is not `name=share%`.
    #[error("{0:?} is not name=share% (e.g. a=70%)")]
    Entry(String),
    /// A share is not a percentage in (0, 100].
    #[error("share {0:?} is not a percentage above 0 and at most 100 (e.g. 70%)")]
    Share(String),
    /// A name is given twice.
    #[error("{0:?} is named twice")]
    Twice(String),
    /// An adapter named as the base model's share.
    #[error("\"base\" names the base model's share; name the adapter otherwise")]
    Base,
    /// The shares do not add up to what they must.
    #[error("the shares add up to {0}%, {1}")]
    Total(String, &'static str),
}

impl Shares {
    /// `name=share%,…`; the shares must add up to 100 % (`rest_allowed`: to at most 100 %,
    /// the rest going to none of them).
    pub fn parse(text: &str, rest_allowed: bool) -> Result<Shares, MixError> {
        let mut entries: Vec<(String, f64)> = Vec::new();
        for entry in text.split(',').map(str::trim) {
            let Some((name, share)) = entry.split_once('=') else {
                return Err(MixError::Entry(entry.to_string()));
            };
            let name = name.trim();
            if name.is_empty() {
                return Err(MixError::Entry(entry.to_string()));
            }
            let percent = share
                .trim()
                .strip_suffix('%')
                .and_then(|number| number.trim().parse::<f64>().ok())
                .filter(|p| p.is_finite() && *p > 0.0 && *p <= 100.0)
                .ok_or_else(|| MixError::Share(share.trim().to_string()))?;
            if entries.iter().any(|(known, _)| known == name) {
                return Err(MixError::Twice(name.to_string()));
            }
            entries.push((name.to_string(), percent / 100.0));
        }
        let total: f64 = entries.iter().map(|(_, share)| share).sum();
        let percent = format!("{}", (total * 1e6).round() / 1e4);
        if rest_allowed && total > 1.0 + 1e-9 {
            return Err(MixError::Total(percent, "more than 100%"));
        }
        if !rest_allowed && (total - 1.0).abs() > 1e-9 {
            return Err(MixError::Total(percent, "not 100%"));
        }
        Ok(Shares { entries })
    }

    /// These shares as an adapter mix: none named [`BASE_ADAPTER`].
    pub fn adapters(self) -> Result<Shares, MixError> {
        if self.entries.iter().any(|(name, _)| name == BASE_ADAPTER) {
            return Err(MixError::Base);
        }
        Ok(self)
    }

    /// The names and shares (fractions), in the order given.
    pub fn entries(&self) -> &[(String, f64)] {
        &self.entries
    }

    /// The name `draw` (uniform in [0, 1)) falls on; `None` in the rest.
    fn pick(&self, draw: f64) -> Option<&str> {
        let mut below = 0.0;
        for (name, share) in &self.entries {
            below += share;
            if draw < below {
                return Some(name);
            }
        }
        // Rounding: shares adding up to 100 % always name someone.
        let total: f64 = self.entries.iter().map(|(_, share)| share).sum();
        let last = self.entries.last().filter(|_| (total - 1.0).abs() <= 1e-9);
        last.map(|(name, _)| name.as_str())
    }

    /// `a=70%,b=30%`, as given.
    pub fn describe(&self) -> String {
        let parts: Vec<String> = self
            .entries
            .iter()
            .map(|(name, share)| format!("{name}={}%", (share * 1e6).round() / 1e4))
            .collect();
        parts.join(",")
    }
}

/// The mixes of a run.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Mix {
    /// `--model a=70%,b=30%`.
    pub models: Option<Shares>,
    /// `--lora x=20%,y=10%` (the rest: the base model); check the names with
    /// [`Shares::adapters`].
    pub adapters: Option<Shares>,
    /// `--class` names and shares.
    pub classes: Option<Shares>,
}

/// Each dimension draws from its own stream of the seed.
const MODEL_STREAM: u64 = 0x6d6f_6465_6c00_0001;
const ADAPTER_STREAM: u64 = 0x6164_6170_7400_0002;
const CLASS_STREAM: u64 = 0x636c_6173_7300_0003;

impl Mix {
    /// Whether any mix is set.
    pub fn is_empty(&self) -> bool {
        self.models.is_none() && self.adapters.is_none() && self.classes.is_none()
    }

    /// The labels of request `index` under `seed`.
    pub fn labels(&self, seed: u64, index: u64) -> Labels {
        let draw = |shares: &Option<Shares>, stream: u64| {
            let shares = shares.as_ref()?;
            let bits = mix_seed(seed ^ stream, index) >> 11;
            shares
                .pick(bits as f64 / (1u64 << 53) as f64)
                .map(str::to_string)
        };
        let base = self.adapters.as_ref().map(|_| BASE_ADAPTER.to_string());
        Labels {
            model: draw(&self.models, MODEL_STREAM),
            adapter: draw(&self.adapters, ADAPTER_STREAM).or(base),
            class: draw(&self.classes, CLASS_STREAM),
        }
    }
}

/// A workload whose requests go to the models and adapters of a mix: each request asks for its
/// adapter (sent as the `model`, as vLLM and SGLang route adapters), else its model of the mix,
/// else the backend's model.
pub struct Mixed {
    inner: Arc<dyn Workload>,
    mix: Mix,
    seed: u64,
}

impl Mixed {
    /// `inner`'s requests labelled by `mix` under `seed` (`inner` itself when `mix` is empty).
    pub fn wrap(inner: Arc<dyn Workload>, mix: Mix, seed: u64) -> Arc<dyn Workload> {
        if mix.is_empty() {
            return inner;
        }
        Arc::new(Mixed { inner, mix, seed })
    }
}

impl fmt::Debug for Mixed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} mixed by {:?}", self.inner, self.mix)
    }
}

impl Workload for Mixed {
    fn inner(&self) -> Option<&dyn Workload> {
        Some(self.inner.as_ref())
    }

    fn request(&self, index: u64) -> RequestSpec {
        let mut spec = self.inner.request(index);
        let labels = self.labels(index);
        let adapter = labels.adapter.filter(|adapter| adapter != BASE_ADAPTER);
        spec.tags.model = adapter.or(labels.model);
        spec
    }

    fn describe(&self) -> BTreeMap<String, serde_json::Value> {
        let mut described = self.inner.describe();
        let mixes = [
            ("model_mix", &self.mix.models),
            ("adapter_mix", &self.mix.adapters),
            ("class_mix", &self.mix.classes),
        ];
        for (key, shares) in mixes {
            if let Some(shares) = shares {
                described.insert(key.to_string(), json!(shares.describe()));
            }
        }
        described
    }

    fn labels(&self, index: u64) -> Labels {
        self.mix.labels(self.seed, index)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn shares_parse_and_check_their_total() {
        let shares = Shares::parse("a=70%, b=30%", false).unwrap();
        assert_eq!(shares.entries().len(), 2);
        assert_eq!(shares.describe(), "a=70%,b=30%");
        assert!(matches!(
            Shares::parse("a=70%,b=20%", false),
            Err(MixError::Total(..))
        ));
        assert!(Shares::parse("a=20%", true).is_ok());
        assert!(matches!(
            Shares::parse("a=70%,b=40%", true),
            Err(MixError::Total(..))
        ));
        assert!(matches!(
            Shares::parse("a=70", false),
            Err(MixError::Share(_))
        ));
        assert!(matches!(Shares::parse("a", false), Err(MixError::Entry(_))));
        assert!(matches!(
            Shares::parse("base=5%", true).unwrap().adapters(),
            Err(MixError::Base)
        ));
        assert!(matches!(
            Shares::parse("a=50%,a=50%", false),
            Err(MixError::Twice(_))
        ));
    }

    #[test]
    fn draws_follow_the_shares_and_the_seed() {
        let mix = Mix {
            models: Some(Shares::parse("a=70%,b=30%", false).unwrap()),
            adapters: Some(Shares::parse("x=25%", true).unwrap()),
            classes: None,
        };
        let n = 20_000;
        let labels: Vec<Labels> = (0..n).map(|i| mix.labels(7, i)).collect();
        let a = labels
            .iter()
            .filter(|l| l.model.as_deref() == Some("a"))
            .count();
        let x = labels
            .iter()
            .filter(|l| l.adapter.as_deref() == Some("x"))
            .count();
        assert!(labels.iter().all(|l| l.adapter.is_some()));
        assert!((a as f64 / n as f64 - 0.7).abs() < 0.02, "{a}");
        assert!((x as f64 / n as f64 - 0.25).abs() < 0.02, "{x}");
        assert!(
            labels
                .iter()
                .all(|l| l.class.is_none() && l.model.is_some())
        );
        assert_eq!(mix.labels(7, 3), labels[3]);
        let other: Vec<Labels> = (0..64).map(|i| mix.labels(8, i)).collect();
        assert_ne!(other, labels[..64].to_vec());
    }
}
