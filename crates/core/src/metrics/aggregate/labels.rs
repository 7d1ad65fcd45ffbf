//! The step broken down by request label: one inner aggregator per model of a model mix, per
//! adapter of an adapter mix (the base model's requests in a row of their own, `base`, last),
//! per SLO class, each judged against its class's own thresholds, and per target of a fleet
//! and per replica a response header named. Each computes every metric exactly as
//! the step does, throughput over the step's interval.

use std::collections::BTreeMap;
use std::time::Duration;

use super::StepAggregator;
use super::interval::Interval;
use crate::metrics::slo::Slo;
use crate::record::RequestRecord;
use crate::report::{ClassReport, LabelReport};
use crate::workload::mix::BASE_ADAPTER;

/// Per-model, per-adapter and per-class aggregators.
#[derive(Debug, Clone)]
pub(super) struct LabelSlices {
    slo: Option<Slo>,
    window: Duration,
    /// Each class's own SLO (its thresholds, in flag syntax too).
    class_slos: BTreeMap<String, (Slo, String)>,
    by_model: BTreeMap<String, StepAggregator>,
    by_adapter: BTreeMap<String, StepAggregator>,
    by_class: BTreeMap<String, StepAggregator>,
    by_target: BTreeMap<String, StepAggregator>,
    by_replica: BTreeMap<String, StepAggregator>,
}

/// The rows of the label breakdown.
pub(super) struct LabelRows {
    pub(super) models: Vec<LabelReport>,
    pub(super) adapters: Vec<LabelReport>,
    pub(super) classes: Vec<ClassReport>,
    pub(super) targets: Vec<LabelReport>,
    pub(super) replicas: Vec<LabelReport>,
}

impl LabelRows {
    /// No rows.
    pub(super) fn empty() -> Self {
        LabelRows {
            models: Vec::new(),
            adapters: Vec::new(),
            classes: Vec::new(),
            targets: Vec::new(),
            replicas: Vec::new(),
        }
    }
}

impl LabelSlices {
    pub(super) fn new(slo: Option<Slo>, window: Duration) -> Self {
        LabelSlices {
            slo,
            window,
            class_slos: BTreeMap::new(),
            by_model: BTreeMap::new(),
            by_adapter: BTreeMap::new(),
            by_class: BTreeMap::new(),
            by_target: BTreeMap::new(),
            by_replica: BTreeMap::new(),
        }
    }

    /// Judges each class's requests against its own SLO (`name → (slo, flag syntax)`).
    pub(super) fn set_classes(&mut self, classes: BTreeMap<String, (Slo, String)>) {
        self.class_slos = classes;
    }

    pub(super) fn add(&mut self, record: &RequestRecord) {
        let (slo, window) = (&self.slo, self.window);
        let fresh = || StepAggregator::bare(slo.clone(), window);
        if let Some(model) = &record.model {
            self.by_model
                .entry(model.clone())
                .or_insert_with(fresh)
                .add(record);
        }
        if let Some(adapter) = &record.adapter {
            self.by_adapter
                .entry(adapter.clone())
                .or_insert_with(fresh)
                .add(record);
        }
        for (label, slices) in [
            (&record.target, &mut self.by_target),
            (&record.replica, &mut self.by_replica),
        ] {
            if let Some(label) = label {
                slices
                    .entry(label.clone())
                    .or_insert_with(fresh)
                    .add(record);
            }
        }
        if let Some(class) = &record.class {
            let own = self.class_slos.get(class).map(|(slo, _)| slo.clone());
            self.by_class
                .entry(class.clone())
                .or_insert_with(|| StepAggregator::bare(own.or_else(|| slo.clone()), window))
                .add(record);
        }
    }

    /// The rows over the step's `interval`: models, classes, targets and replicas by name,
    /// adapters by name with the base model's row last.
    pub(super) fn rows(&self, interval: &Interval) -> LabelRows {
        let row = |(name, aggregator): (&String, &StepAggregator)| LabelReport {
            name: name.clone(),
            metrics: aggregator.slice(interval),
            server: None,
        };
        let models = self.by_model.iter().map(row).collect();
        let is_base = |name: &String| name == BASE_ADAPTER;
        let named = self.by_adapter.iter().filter(|(name, _)| !is_base(name));
        let base = self.by_adapter.iter().filter(|(name, _)| is_base(name));
        let adapters = named.chain(base).map(row).collect();
        let classes = self
            .by_class
            .iter()
            .map(|(name, aggregator)| ClassReport {
                name: name.clone(),
                slo: self.class_slos.get(name).map(|(_, text)| text.clone()),
                metrics: aggregator.slice(interval),
            })
            .collect();
        LabelRows {
            models,
            adapters,
            classes,
            targets: self.by_target.iter().map(row).collect(),
            replicas: self.by_replica.iter().map(row).collect(),
        }
    }
}
