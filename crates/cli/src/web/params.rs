//! A page's query string read once: the filters (`model`, `target`, `tag`, `since`, `until`,
//! `last`), the trend's `metric` and `by`, the runs to compare (`run`). Empty fields count as
//! absent, so a submitted form with blank fields means "any".

use goodput_core::html::history::Filters;

use crate::store::RunQuery;

/// Runs listed when the address does not say.
pub(crate) const DEFAULT_LAST: usize = 100;
/// The most runs one page lists.
const MAX_LAST: usize = 5000;

/// What a page was asked for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Params {
    /// Only this model.
    pub(crate) model: Option<String>,
    /// Only this target.
    pub(crate) target: Option<String>,
    /// Only runs with all these tags.
    pub(crate) tags: Vec<(String, String)>,
    /// From this day (`YYYY-MM-DD`).
    pub(crate) since: Option<String>,
    /// To this day, included.
    pub(crate) until: Option<String>,
    /// The most recent this many.
    pub(crate) last: usize,
    /// The trend's figure.
    pub(crate) metric: Option<String>,
    /// The trend's series.
    pub(crate) by: Option<String>,
    /// Runs to compare.
    pub(crate) runs: Vec<String>,
}

impl Params {
    /// The query string's pairs, read.
    pub(crate) fn parse(pairs: &[(String, String)]) -> Params {
        let mut params = Params {
            last: DEFAULT_LAST,
            ..Params::default()
        };
        for (key, value) in pairs {
            let value = value.trim();
            if value.is_empty() {
                continue;
            }
            let text = Some(value.to_string());
            match key.as_str() {
                "model" => params.model = text,
                "target" => params.target = text,
                "since" if is_day(value) => params.since = text,
                "until" if is_day(value) => params.until = text,
                "metric" => params.metric = text,
                "by" => params.by = text,
                "run" => params.runs.push(value.to_string()),
                "last" => {
                    params.last = value
                        .parse()
                        .map_or(DEFAULT_LAST, |n: usize| n.clamp(1, MAX_LAST));
                }
                "tag" => params
                    .tags
                    .extend(value.split_whitespace().filter_map(|pair| {
                        let (k, v) = pair.split_once('=')?;
                        (!k.is_empty()).then(|| (k.to_string(), v.to_string()))
                    })),
                _ => {}
            }
        }
        params
    }

    /// The store query of the filters (`last` included).
    pub(crate) fn query(&self) -> RunQuery {
        RunQuery {
            model: self.model.clone(),
            target: self.target.clone(),
            tags: self.tags.clone(),
            since: self.since.clone(),
            until: self.until.clone(),
            ids: Vec::new(),
            last: Some(self.last),
        }
    }

    /// The filters as the page shows them.
    pub(crate) fn filters(&self) -> Filters {
        Filters {
            model: self.model.clone().unwrap_or_default(),
            target: self.target.clone().unwrap_or_default(),
            tags: self.tags.iter().map(|(k, v)| format!("{k}={v}")).collect(),
            since: self.since.clone().unwrap_or_default(),
            until: self.until.clone().unwrap_or_default(),
            last: self.last,
        }
    }
}

/// `YYYY-MM-DD` (what a date field submits).
fn is_day(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() == 10
        && bytes.iter().enumerate().all(|(i, b)| match i {
            4 | 7 => *b == b'-',
            _ => b.is_ascii_digit(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn blank_fields_are_absent_and_tags_split() {
        let p = Params::parse(&pairs(&[
            ("model", ""),
            ("target", "http://a"),
            ("tag", "version=2 gpu=h100"),
            ("tag", "team=x"),
            ("since", "2026-01-01"),
            ("until", "yesterday"),
            ("last", "0"),
            ("run", "3"),
            ("run", "7"),
        ]));
        assert_eq!(p.model, None);
        assert_eq!(p.target.as_deref(), Some("http://a"));
        assert_eq!(p.tags.len(), 3);
        assert_eq!(
            (p.since.as_deref(), p.until.as_deref()),
            (Some("2026-01-01"), None)
        );
        assert_eq!((p.last, p.runs.len()), (1, 2));
        assert_eq!(p.filters().tags, ["version=2", "gpu=h100", "team=x"]);
        assert_eq!(Params::parse(&[]).last, DEFAULT_LAST);
    }
}
