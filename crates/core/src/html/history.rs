//! The pages of `goodput ui` over a history store: the runs, filtered (by model, target,
//! tags and dates, every filter in the page's address so a view can be shared) and ready to
//! be compared, and a figure's trend per series with each run's significance mark. The data
//! each page embeds is typed here; `history.js` draws it.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::json;

use super::{NavLink, page};
use crate::decide::history::{ListedRun, Trend};

/// The filters of a page, as the address gives them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Filters {
    /// Only this model (empty: any).
    pub model: String,
    /// Only this target (empty: any).
    pub target: String,
    /// Only runs with every one of these tags (`KEY=VALUE`).
    pub tags: Vec<String>,
    /// Only runs started on or after this day (`YYYY-MM-DD`; empty: any).
    pub since: String,
    /// Only runs started on or before this day (`YYYY-MM-DD`; empty: any).
    pub until: String,
    /// At most this many of the most recent runs.
    pub last: usize,
}

/// What the filters can be set to: the values the store holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Facets {
    /// Every model.
    pub models: Vec<String>,
    /// Every target.
    pub targets: Vec<String>,
    /// Every tag as `KEY=VALUE`.
    pub tags: Vec<String>,
}

/// One run in the list.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunRow {
    /// The store's id.
    pub id: i64,
    /// Run start (RFC 3339).
    pub started_at: String,
    /// Model.
    pub model: String,
    /// Target (redacted).
    pub target: String,
    /// Tags.
    pub tags: BTreeMap<String, String>,
    /// Its kind and figures.
    pub listed: ListedRun,
}

/// The runs page.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunsPage {
    /// The store, for people (a password never shown).
    pub store: String,
    /// The filters applied.
    pub filters: Filters,
    /// What they can be set to.
    pub facets: Facets,
    /// Headings of the listed figures (`decide::history::LISTED`).
    pub columns: Vec<String>,
    /// The runs shown, oldest first.
    pub runs: Vec<RunRow>,
    /// Runs matching the filters (more than shown when `last` cut the list).
    pub total: usize,
    /// The grouping the trend links use (the first tag key, if any).
    pub suggested_by: String,
}

/// The trend page.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TrendPage {
    /// The store, for people.
    pub store: String,
    /// The filters applied.
    pub filters: Filters,
    /// What they can be set to.
    pub facets: Facets,
    /// The figure asked for.
    pub metric: String,
    /// The grouping asked for (`model`, `target`, `tag:NAME`; empty: none).
    pub by: String,
    /// The groupings offered.
    pub groupings: Vec<String>,
    /// Figures offered in the figure field.
    pub metrics: Vec<String>,
    /// The trend (absent with an error or no figure).
    pub trend: Option<Trend>,
    /// Why there is no trend (an unknown figure or grouping).
    pub error: Option<String>,
}

/// The runs page as HTML.
pub fn render_runs(data: &RunsPage, nav: &[NavLink]) -> Result<String, serde_json::Error> {
    page(
        "goodput runs",
        &json!({"mode": "runs", "page": data, "nav": nav}),
    )
}

/// The trend page as HTML.
pub fn render_trend(data: &TrendPage, nav: &[NavLink]) -> Result<String, serde_json::Error> {
    let title = format!("goodput trend · {}", data.metric);
    page(&title, &json!({"mode": "trend", "page": data, "nav": nav}))
}
