//! Why requests failed, in a few words per kind: the message of the failed request with the
//! lowest index of each failure kind. Choosing by index (not arrival) keeps a report rebuilt
//! from the journal identical to the live one.

use std::collections::BTreeMap;

use crate::record::Failure;

/// The first failure (by request index) of each kind.
#[derive(Debug, Clone, Default)]
pub(crate) struct FailureExamples(BTreeMap<&'static str, (u64, String)>);

impl FailureExamples {
    /// Considers the failure of request `index`.
    pub(crate) fn add(&mut self, index: u64, failure: &Failure) {
        let entry = self
            .0
            .entry(failure.kind.as_str())
            .or_insert_with(|| (index, failure.message.clone()));
        if index < entry.0 {
            *entry = (index, failure.message.clone());
        }
    }

    /// Kind → message.
    pub(crate) fn messages(&self) -> BTreeMap<String, String> {
        self.0
            .iter()
            .map(|(kind, (_, message))| ((*kind).to_string(), message.clone()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::OutcomeKind;

    #[test]
    fn the_lowest_index_wins_whatever_the_order() {
        let mut examples = FailureExamples::default();
        examples.add(7, &Failure::new(OutcomeKind::Transport, "reset"));
        examples.add(3, &Failure::new(OutcomeKind::Transport, "refused"));
        examples.add(5, &Failure::http(429, "HTTP 429"));
        examples.add(9, &Failure::new(OutcomeKind::Transport, "closed"));
        let messages = examples.messages();
        assert_eq!(messages["transport"], "refused");
        assert_eq!(messages["http"], "HTTP 429");
        assert_eq!(messages.len(), 2);
    }
}
